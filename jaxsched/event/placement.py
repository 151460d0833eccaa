"""Where a row's try lands: the sampled draws, full scans and feasibility tests of a replay
step, and the machine and victims of an eviction."""

from __future__ import annotations

import dataclasses

import jax
import jax.numpy as jnp
from jax import lax

from .. import rng
from ..packing import score_rows
from ..pickers import first_best
from ..policies import feasible
from .inputs import INF
from .state import columns, get, rows


def hash_bits(words, step, lanes):
    """Counter hash per row and try: words u32[B, 2], step u32[B, W], lanes i32[B, W, X] -> u32[B, W, X]."""
    one = lambda w, s, ln: rng.counter_bits(w[None], s, ln)[0]
    return jax.vmap(jax.vmap(one, in_axes=(None, 0, 0)))(words, step, lanes)


def _scores(cfg, st, free_x, inv_x, d, noise, inv_axes):
    """Scores f32[B, W, X] of each row's W tasks d f32[B, W, R] on their X machines each."""
    return score_rows(cfg.pack_config(), d, free_x, inv_x, st.genomes, noise, inv_axes, (0, 0), encoded=False)


def _noise(cfg, st, step, lanes):
    if "random" not in cfg.policies:
        return jnp.zeros(lanes.shape, jnp.float32)
    bits = hash_bits(st.nwords, step, lanes) >> 8
    return bits.astype(jnp.float32) * jnp.float32(2.0**-24)


def _draws(cfg, st, free, step, num_machines):
    """The sampled machines of each try, idx i32[B, W, K], with their free capacity and
    1 / capacity as gathered, f32[B, W, R, K]."""
    B, R, Mp = free.shape
    W = step.shape[1]
    lanes = jnp.broadcast_to(jnp.arange(cfg.sample_k, dtype=jnp.int32), (B, W, cfg.sample_k))
    idx = (hash_bits(st.swords, step, lanes) % jnp.uint32(num_machines)).astype(jnp.int32)
    dims = jnp.arange(R, dtype=jnp.int32)[None, None, :, None]
    free_s = free[rows(idx)[:, None, None, None], dims, idx[:, :, None, :]]  # [B, W, R, K]
    return idx, free_s, st.inv[dims[0], idx[:, :, None, :]]


def full_scan(cfg, st, free, d, step):
    """Lowest-index best machine of each row's W tasks, Mp where none is feasible: i32[B, W]."""
    B, R, Mp = free.shape
    W = d.shape[1]
    lanes = jnp.broadcast_to(jnp.arange(Mp, dtype=jnp.int32), (B, W, Mp))
    free_w = jnp.broadcast_to(free[:, None], (B, W, R, Mp))
    s = _scores(cfg, st, free_w, st.inv, d, _noise(cfg, st, step, lanes), (None, None))
    return first_best(s, jnp.int32(Mp))


def pick(cfg, st, free, d, step, fallback, num_machines):
    """The machine of each of the W tries per row, all against the same free state (Mp: none).

    d f32[B, W, R], step u32[B, W]: sample_k draws from each try's step, a full scan for
    the tries in `fallback` bool[B, W] whose draws all miss (computed only when one needs
    it); a full scan for every try when sample_k = 0.
    """
    B, R, Mp = free.shape
    if cfg.sample_k == 0:
        return full_scan(cfg, st, free, d, step)
    idx, free_s, inv_s = _draws(cfg, st, free, step, num_machines)
    s = _scores(cfg, st, free_s, inv_s, d, _noise(cfg, st, step, idx), (0, 0))
    best = jnp.max(s, axis=2, keepdims=True)
    tied = (s == best) & (best > -jnp.inf)
    j = jnp.min(jnp.where(tied, idx, Mp), axis=2).astype(jnp.int32)
    if fallback is None:
        return j
    need = fallback & (j == Mp)
    # Each policy's rows get their full scan only when one of them needs it (a cond whose
    # result is small reads the carry without copying it).
    out = []
    for name, lo, hi in cfg.pack_config().groups():
        sub_cfg = dataclasses.replace(cfg, policies=(name,) * (hi - lo))
        sub_st = st._replace(genomes=st.genomes[lo:hi], swords=st.swords[lo:hi], nwords=st.nwords[lo:hi])
        n, jg = need[lo:hi], j[lo:hi]
        scan = lambda sub_cfg=sub_cfg, sub_st=sub_st, lo=lo, hi=hi, n=n, jg=jg: jnp.where(
            n, full_scan(sub_cfg, sub_st, free[lo:hi], d[lo:hi], step[lo:hi]), jg)
        out.append(lax.cond(jnp.any(n), scan, lambda jg=jg: jg))
    return jnp.concatenate(out, axis=0) if len(out) > 1 else out[0]


def any_feasible(cfg, st, free, d, step, num_machines):
    """bool[B, W]: whether each try (d f32[B, W, R], step u32[B, W]) has a feasible machine to score."""
    R = free.shape[1]
    col = lambda a: tuple(a[..., x, :] for x in range(R))
    if cfg.sample_k == 0:
        fits = feasible(tuple(d[:, :, x, None] for x in range(R)), col(free[:, None]), col(st.inv[None, None]))
        return jnp.any(fits, axis=2)
    _, free_s, inv_s = _draws(cfg, st, free, step, num_machines)
    fits = feasible(tuple(d[:, :, x, None] for x in range(R)), col(free_s), col(inv_s))
    return jnp.any(fits, axis=2)


def fits(st, free, d, j):
    """bool[B]: row b's demand d[b] fits machine j[b] now."""
    B, R, Mp = free.shape
    dims = jnp.arange(R, dtype=jnp.int32)[None, :]
    f = free[rows(j)[:, None], dims, jnp.minimum(j, Mp - 1)[:, None]]
    i = st.inv[dims, jnp.minimum(j, Mp - 1)[:, None]]
    col = lambda a: tuple(a[:, x] for x in range(R))
    return feasible(col(d), col(f), col(i)) & (j < Mp)


def fits_on(st, free, d, w):
    """bool[B, W]: demand d f32[B, W, R] fits machine w i32[B, W] now (False where w < 0)."""
    B, R, Mp = free.shape
    wc = jnp.clip(w, 0, Mp - 1)[:, :, None]
    dims = jnp.arange(R, dtype=jnp.int32)[None, None, :]
    f = free[rows(w)[:, None, None], dims, wc]
    return feasible(columns(d), columns(f), columns(st.inv[dims, wc])) & (w >= 0)


def evict_machine(st, state, d, need):
    """For production demand d[B, R]: (machine i32[B] to evict on, found bool[B]) of the rows in `need`.

    Among machines where d fits once every evictable task is gone, the least shortfall
    sum_r max(0, d_r - free_r), lowest index among ties.
    """
    B, R, Mp = state.free.shape
    Np = state.end.shape[1]
    evictable = (state.end < INF) & (st.rank[None, :] < INF)
    where_m = jnp.where(evictable, state.tasks.machine, Mp)
    ev = jnp.zeros_like(state.free).at[rows(d)[:, None, None], jnp.arange(R, dtype=jnp.int32)[None, None, :],
                                      where_m[:, :, None]].add(jnp.broadcast_to(st.demand[None], (B, Np, R)),
                                                               mode="drop")
    dd = tuple(d[:, x, None] for x in range(R))
    ok = feasible(dd, tuple(state.free[:, x] + ev[:, x] for x in range(R)), tuple(st.inv[x][None] for x in range(R)))
    short = sum(jnp.maximum(d[:, x, None] - state.free[:, x], 0.0) for x in range(R))
    j = jnp.argmin(jnp.where(ok, short, jnp.inf), axis=1).astype(jnp.int32)
    return j, need & jnp.any(ok, axis=1)


def victim(st, state, j):
    """Next victim on machine j[B]: lowest place in the victim order among its evictable tasks."""
    key = jnp.where((state.end < INF) & (st.rank[None, :] < INF) & (state.tasks.machine == j[:, None]),
                    st.rank[None, :], INF)
    v = jnp.argmin(key, axis=1).astype(jnp.int32)
    return v, get(key, v) < INF
