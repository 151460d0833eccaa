"""Sequential greedy packing as one batched JAX program (docs/spec/POLICIES.md, "The picker").

Every (policy row, trial) pair packs the same tasks in its trial's order onto its own
copy of the cluster. One `lax.scan` step places task i for all P x T pairs at once:
each policy scores its rows (vmapped over genomes, trials and machines), the picker
takes the argmax, and the free-capacity carry f32[P, T, R, M] is updated in place. A
dimension of zero capacity holds -1e-6 in the carry (`policies.encode_free`), so that
feasibility is one comparison per dimension.

Two pickers, as the spec defines them:
- full scan: argmax over all feasible machines, ties to the lowest index, in plain
  reductions over 128-machine chunks (`first_best_chunked`, on scores computed in that
  shape), which XLA:CPU runs faster than a one-pass variadic argmax. A policy that scores
  every feasible machine alike (first_fit) takes the first feasible one in one reduction
  (`first_feasible`).
- sample_k = K: K machines drawn with replacement from the trial's stream, ties to the
  lowest machine index among them; when none is feasible, a full scan of that row (rows
  missing at a step are scanned one by one). Blocks first run without that fallback and
  are redone with it only if needed. On CPU its state is kept machine-major, as complex64
  pairs of dimensions (`to_state`): one gather fetches two dimensions of a drawn machine
  for all rows at once, and the draws are scored in that layout, rows last.

Tasks run in compiled blocks of `block` steps, so one program serves any task count,
the carry is donated between blocks, and long runs can report progress. On CPU,
trials run in sequential cache-sized groups. With several local devices (GPUs, or
forced CPU host devices) the rows are split over them, by whole policies or, for one
trial of a population of genomes, by genomes, each share its own program driven from
its own thread; otherwise the trial axis is split over all of them with `shard_map`.
Trials and rows are independent, so the results are bit-identical to one device.
"""

from __future__ import annotations

import dataclasses
import functools
import itertools
from typing import Callable, NamedTuple

import jax
import jax.numpy as jnp
import numpy as np
from jax import lax
from jax.experimental import multihost_utils
from jax.sharding import Mesh, NamedSharding, PartitionSpec

from .errors import InputError

from . import rng
from .devices import SlowestShare, on_devices
from .policies import (FEASIBILITY_TOL, ZERO_CAPACITY_FREE, encode_free, feasible, genome_width, get_policy,
                       row_genomes, safe_inverse, score_machines, score_terms, slot_vector)
from .types import Cluster, PackState, Workload

CHUNK = 128
PAD_CAPACITY = -1.0  # padding machines: never feasible, since demands are >= 0


@dataclasses.dataclass(frozen=True)
class PackConfig:
    """Static configuration of a packing program (hashable; one compile per value)."""

    policies: tuple[str, ...]  # one name per batch row P; rows of one name share a vmap
    sample_k: int = 0  # 0: full scan; K > 0: power-of-K choices with full-scan fallback
    slot: tuple[float, ...] = (0.05, 0.05)
    block: int = 512  # tasks per compiled block

    def groups(self) -> list[tuple[str, int, int]]:
        """Runs of equal policy names: (name, first row, end row)."""
        out, row = [], 0
        for name, run in itertools.groupby(self.policies):
            n = len(list(run))
            out.append((name, row, row + n))
            row += n
        return out

    @property
    def uses_noise(self) -> bool:
        return "random" in self.policies


def score_rows(cfg, d, free, inv, genomes, noise, inv_axes, noise_axes, reduce=None, chunked=False, *,
                encoded: bool, caches=None):
    """Scores of every (row, trial) pair on its X machines: f32[P, T, X], or reduce(scores) of each policy's rows.

    d f32[P, T, R]; free f32[P, T, R, X] (or a tuple of R f32[P, T, X]); inv (1 / capacity)
    has (row, trial) batch axes `inv_axes` (None: shared), noise likewise `noise_axes`.
    chunked: the machine axis comes as two, X = C x CHUNK (free [P, T, R, C, CHUNK], inv
    [R, C, CHUNK], noise [T, C, CHUNK]), and so do the scores.
    `reduce(scores, policy)` applies to each policy's scores before they are joined, so that
    XLA fuses it into their computation instead of writing all scores out (on CPU it would then
    reduce them in a separate pass, which costs more than the scoring itself).
    encoded: free is `encode_free`'s (a packing state's); caches: each group's kept `Policy.cached`
    terms laid out as free, f32[P_g, T, E, X] (or None), as `machine_caches` gives them.
    """
    out = []
    for g_i, (name, lo, hi) in enumerate(cfg.groups()):
        policy = get_policy(name)

        def one(dd, ff, ii, g, nn, cc, policy=policy):
            return score_machines(policy, dd, ff, ii, g, nn, cfg.slot, encoded, cc)

        if chunked:
            one = jax.vmap(one, in_axes=(None, 1, 1, None, 0, 1))

        per_trial = jax.vmap(one, in_axes=(0, 0, inv_axes[1], None, noise_axes[1], 0))
        per_row = jax.vmap(per_trial, in_axes=(0, 0, inv_axes[0], 0, noise_axes[0], 0))
        rows = slice(lo, hi)
        take = lambda a: jax.tree.map(lambda x: x[rows], a)
        i = take(inv) if inv_axes[0] == 0 else inv
        n = noise[rows] if noise_axes[0] == 0 else noise
        scores = per_row(d[rows], take(free), i, genomes[rows], n, None if caches is None else caches[g_i])
        out.append(scores if reduce is None else reduce(scores, policy))
    return jnp.concatenate(out, axis=0) if len(out) > 1 else out[0]


class RowsLast(NamedTuple):
    """What `_score_rows_last` takes per row, laid out with the rows last (contiguous): built from
    arrays transposed before the scan, since inside it XLA reads a transposed column strided
    and the scoring loop then does not vectorize."""

    genomes: jax.Array  # f32[8, P]
    demand: tuple  # R x f32[T, P]: the step's demand of each (trial, row)


def _score_rows_last(cfg, lanes: RowsLast, free, inv, noise, reduce):
    """`score_rows` with the rows as the minor axis: each policy's reduce(scores f32[T, X, P_g], policy).

    free: R x f32[T, X, P]; inv: R x f32[T, X]; noise f32[T, X]; the rows' genomes and demands
    in `lanes`. A sampled step gathers its drawn machines in this layout from the machine-major state
    and scores them there (a row's demand and genome are one vector across the rows): moving the
    draws to rows first would run the gather's transpose element by element inside the scoring loop.
    """
    out = []
    for name, lo, hi in cfg.groups():
        policy = get_policy(name)
        d_g = tuple(x[:, None, lo:hi] for x in lanes.demand)  # R x [T, 1, P_g]
        f_g = tuple(x[..., lo:hi] for x in free)
        ic = tuple(x[..., None] for x in inv)
        s = score_terms(policy, d_g, f_g, ic, lanes.genomes[:, None, None, lo:hi], noise[..., None], cfg.slot,
                        encoded=True)
        out.append(reduce(s, policy))
    return jnp.concatenate(out, axis=0) if len(out) > 1 else out[0]


def _noise(cfg, words, step, lanes):
    if not cfg.uses_noise:
        return jnp.zeros(lanes.shape, jnp.float32)
    return rng.uniform_noise(words, step, lanes)


def _take(flat, index):
    """flat[index] for in-range indices, as one 1-D gather (the fastest form on CPU)."""
    return flat.at[index].get(mode="promise_in_bounds")


def uses_pairs(cfg: PackConfig) -> bool:
    """Whether the packing state is kept in `to_pairs` form: sampled pickers on CPU."""
    return cfg.sample_k > 0 and jax.default_backend() == "cpu"


def to_pairs(x):
    """f32[..., R, X] as complex64[..., ceil(R / 2), X]: dimensions 2c and 2c + 1 in one element.

    On CPU the sampled picker keeps its state in this form, so that one 8-byte gather
    fetches two dimensions of a machine (gathers are most of a sampled step there).
    Complex addition is the float addition of each part, so placements are bit-identical.
    """
    R = x.shape[-2]
    if R % 2:
        x = jnp.concatenate([x, jnp.zeros_like(x[..., :1, :])], axis=-2)
    return lax.complex(x[..., 0::2, :], x[..., 1::2, :])


def from_pairs(z, R: int):
    """The f32[..., R, X] that `to_pairs` packed into z."""
    x = jnp.stack([z.real, z.imag], axis=-2)  # [..., C, 2, X]
    return x.reshape(*z.shape[:-2], 2 * z.shape[-2], z.shape[-1])[..., :R, :]


def pair_rows(z, R: int, axis: int = -2) -> tuple:
    """The R rows that `to_pairs` packed into z along `axis` (there of size C; no stacked copy)."""
    take = lambda c: lax.index_in_dim(z, c, axis, keepdims=False)
    return tuple(part(take(c)) for c in range(z.shape[axis]) for part in (jnp.real, jnp.imag))[:R]


def to_state(free, cfg: PackConfig):
    """The packing carry of free f32[P, T, R, Mp]: unchanged, or where `uses_pairs(cfg)`,
    machine-major pairs complex64[T, C, Mp, P] (`to_pairs`, rows last).

    A sampled step gathers the K drawn machines of a trial for all P rows; with the rows
    last, each draw is one contiguous slice of P elements instead of P scattered ones.
    """
    return jnp.transpose(to_pairs(free), (1, 2, 3, 0)) if uses_pairs(cfg) else free


def from_state(z, R: int):
    """free f32[P, T, R, Mp] from a packing carry in either form (`to_state`)."""
    return from_pairs(jnp.transpose(z, (3, 0, 1, 2)), R) if jnp.iscomplexobj(z) else z


def _full_scan(cfg, free, d, inv, genomes, nwords, step, none, caches=None):
    """Lowest-index argmax over all machines per (row, trial): i32[P, T], `none` if no fit.

    `_pick` of each policy's scores, before the policies are joined. The scores are computed
    in CHUNK-wide chunks, [P, T, C, CHUNK], the shape `first_best` reduces: computed flat and
    reshaped, XLA fuses the reshape into the scoring and then splits or repeats it.
    """
    P, T, R, Mp = free.shape
    C = Mp // CHUNK  # Mp is a multiple of CHUNK (`pack` pads it)
    noise = _noise(cfg, nwords, step, jnp.broadcast_to(jnp.arange(Mp), (T, Mp)))
    if caches is not None:
        caches = tuple(None if c is None else c.reshape(*c.shape[:3], C, CHUNK) for c in caches)
    return score_rows(cfg, d, free.reshape(P, T, R, C, CHUNK), inv.reshape(R, C, CHUNK), genomes,
                       noise.reshape(T, C, CHUNK), (None, None), (None, 0),
                       lambda s, policy: _pick(policy, s, none, chunked=True), chunked=True, encoded=True,
                       caches=caches)


def machine_caches(cfg, free, inv):
    """Each policy group's `Policy.cached` terms of every machine, f32[P_g, T, E, Mp] (None for a
    policy that keeps none), from free f32[P, T, R, Mp] and inv f32[R, Mp]; None if no policy keeps any."""
    R = free.shape[2]
    out = []
    for name, lo, hi in cfg.groups():
        policy = get_policy(name)
        if policy.cached is None:
            out.append(None)
            continue
        terms = policy.cached(tuple(free[lo:hi, :, x] for x in range(R)), tuple(inv[x][None, None] for x in range(R)))
        out.append(jnp.stack(terms, axis=2))
    return tuple(out) if any(c is not None for c in out) else None


def update_caches(cfg, caches, free, inv, j, none):
    """`machine_caches` after tasks land on machines j i32[P, T] (`none`: nowhere) of free, the
    state after placement: only those machines' terms are recomputed."""
    P, T, R, Mp = free.shape
    out = []
    for (name, lo, hi), c in zip(cfg.groups(), caches):
        if c is None:
            out.append(None)
            continue
        jg = j[lo:hi]
        at = jnp.minimum(jg, Mp - 1)[..., None]
        f_j = tuple(jnp.take_along_axis(free[lo:hi, :, x], at, axis=-1)[..., 0] for x in range(R))  # [P_g, T]
        terms = jnp.stack(get_policy(name).cached(f_j, tuple(inv[x][at[..., 0]] for x in range(R))), axis=2)
        flat = _row_major_at(jg, c.shape[2], Mp, none, c.size)
        out.append(c.reshape(-1).at[flat.reshape(-1)].set(terms.reshape(-1), mode="drop",
                                                         unique_indices=True).reshape(c.shape))
    return tuple(out)


def _sampled(cfg, free, d, inv, genomes, idx, nwords, step, none, fallback, bound=None, rows=None, lanes=None):
    """Power-of-K choice per (row, trial) among machines idx i32[T, K]: (i32[P, T], rows).

    free f32[P, T, R, Mp] and inv f32[R, Mp], or free machine-major complex64[T, C, Mp, P]
    (`to_state`) and inv complex64[C, Mp] (`to_pairs`). With `fallback`, rows whose K draws
    are all infeasible get a full scan (`_fallback`, which reads `rows`: the same state
    row-major, f32[P, T, R, Mp] or complex64[P, T, C, Mp]), unless `bound` (a `FitBound`)
    shows that the task fits no machine; without it they get `none` and the caller must
    redo the block with the fallback on. `rows` comes back unchanged (the caller must use
    the returned one: it goes through the fallback's loops so that XLA does not copy it).
    A machine-major state of several rows is scored rows last (`_score_rows_last`), with the
    rows' genomes and demands given as `lanes` (a `RowsLast`, needed only there).
    """
    C, Mp = inv.shape
    R = d.shape[-1]
    at = jnp.arange(C, dtype=jnp.int32).reshape(1, C, 1) * Mp + idx[:, None, :]  # [T, C, K]
    noise = _noise(cfg, nwords, step, idx)
    paired = jnp.iscomplexobj(free)
    if paired:
        T, P = free.shape[0], free.shape[-1]
        trial_at = jnp.arange(T, dtype=jnp.int32).reshape(T, 1, 1) * (C * Mp) + at
        inv_s = pair_rows(_take(inv.reshape(-1), at), R)  # R x [T, K]
    if paired and P > 1:  # scored as gathered, rows last
        drawn = pair_rows(_take(free.reshape(T * C * Mp, P), trial_at), R, axis=1)  # R x [T, K, P]
        j = _score_rows_last(cfg, lanes, drawn, inv_s, noise,
                             lambda s, _: _lowest_best(s, idx[..., None], none, axis=1).T)
    else:
        if paired:  # one row: a 1-D gather is cheaper than slices of one element
            free_s = pair_rows(_take(free.reshape(-1), trial_at)[None], R)  # R x [1, T, K]
        else:
            P, T = free.shape[:2]
            row = jnp.arange(P * T, dtype=jnp.int32).reshape(P, T, 1, 1) * (C * Mp)
            dims = lambda g: tuple(g[..., x, :] for x in range(R))
            free_s, inv_s = dims(_take(free.reshape(-1), row + at[None])), dims(_take(inv.reshape(-1), at))
        j = score_rows(cfg, d, free_s, inv_s, genomes, noise, (None, 0), (None, 0),
                        lambda s, _: _lowest_best(s, idx[None], none), encoded=True)
    if not fallback:
        return j, rows
    missing = j == none
    if bound is not None:
        missing = missing & may_fit(bound, d)
    # Most steps miss nothing: one test then skips the fallback's loops.
    return when(jnp.any(missing), lambda c: _fallback(cfg, c[1], d, inv, genomes, nwords, step, none, missing, c[0]),
                (j, rows))


def _fallback(cfg, free, d, inv, genomes, nwords, step, none, missing, j):
    """(j with a full scan for the (row, trial) pairs in `missing`: i32[P, T], free).

    free: the state row-major, f32[P, T, R, Mp] or complex64[P, T, C, Mp] (`to_pairs`);
    inv as `_sampled` takes it. In a big batch a few rows miss at a step, so only those are
    scanned, one at a time, in a while loop that runs while some are left. The row's state
    is sliced out as R contiguous rows (no gather, and no stacked copy of the pairs); a row
    whose task fits no machine at all skips the scoring; the others score all their
    machines in one vectorized pass and take the lowest index among the top scores, as a
    full scan does. Policies that draw noise (per trial) scan all their rows with
    `_full_scan`. The state goes through the loops' carry (a lax.cond or loop that only
    read it would make XLA copy it every step) and comes back.
    """
    P, T = missing.shape
    C, Mp = inv.shape
    R = d.shape[-1]
    paired = jnp.iscomplexobj(free)
    rows_of = (lambda z: pair_rows(z, R)) if paired else (lambda z: tuple(z[x] for x in range(R)))
    inv_rows = rows_of(inv)

    def row_state(fr, p, t):  # R x f32[Mp]
        return rows_of(lax.dynamic_slice(fr, (p, t, 0, 0), (1, 1, C, Mp))[0, 0])

    out = []
    for name, lo, hi in cfg.groups():
        sub = dataclasses.replace(cfg, policies=(name,) * (hi - lo))
        miss, j_g = missing[lo:hi], j[lo:hi]
        if sub.uses_noise:
            def noisy(c, sub=sub, lo=lo, hi=hi, miss=miss):
                fr = c[1]
                if paired:
                    rows_free, rows_inv = from_pairs(fr[lo:hi], R), from_pairs(inv, R)
                else:
                    rows_free, rows_inv = fr[lo:hi], inv
                full = _full_scan(sub, rows_free, d[lo:hi], rows_inv, genomes[lo:hi], nwords, step, none)
                return jnp.where(miss, full, c[0]), fr
            j_g, free = when(jnp.any(miss), noisy, (j_g, free))
            out.append(j_g)
            continue
        G = (hi - lo) * T
        iota = jnp.arange(G, dtype=jnp.int32)
        first = lambda mask, iota=iota, G=G: jnp.min(jnp.where(mask, iota, G))
        policy = get_policy(name)

        def scan_row(state, lo=lo, policy=policy, first=first):
            r, mask, res, fr = state
            p, t = lo + r // T, r % T
            f_r = row_state(fr, p, t)
            d_r = d[p, t]

            def score():
                s = score_machines(policy, d_r, f_r, inv_rows, genomes[p], jnp.zeros(Mp, jnp.float32), cfg.slot,
                                   encoded=True)
                return _pick(policy, s, none)

            fits = feasible(tuple(d_r[x] for x in range(R)), f_r)
            mask = mask.at[r].set(False)
            return first(mask), mask, res.at[r].set(lax.cond(jnp.any(fits), score, lambda: none)), fr

        mask = miss.reshape(G)
        _, _, res, free = lax.while_loop(lambda state, G=G: state[0] < G, scan_row,
                                         (first(mask), mask, j_g.reshape(G), free))
        out.append(res.reshape(hi - lo, T))
    return (jnp.concatenate(out, axis=0) if len(out) > 1 else out[0]), free


def when(pred, fn, operand):
    """fn(operand) if pred else operand, as a while loop of at most one trip.

    A `lax.cond` that passes the carry through makes XLA copy all of it every step (the
    branches cannot alias their operands); a while loop updates its carry in place.
    """
    def body(c):
        return jnp.bool_(False), fn(c[1])

    return lax.while_loop(lambda c: c[0], body, (pred, operand))[1]


STAIRS = 4  # thresholds per dimension of `fit_bound`'s staircase
# Rows (P x T) from which a block uses the staircase: with fewer, a step is so short that
# testing it costs more than the scans it saves.
STAIR_MIN_ROWS = 8


class FitBound(NamedTuple):
    """Necessary conditions for a row's task to fit some machine, from the row's free
    capacity at the start of a block (free only shrinks while a snapshot packs).

    Besides each dimension's largest free value, a staircase of the first two dimensions:
    for thresholds `cut` on dimension x (0 or 1), the largest free value of the other
    dimension among the machines whose free x is at least the threshold. A task that needs
    more than that on the other dimension fits nowhere, although it passes `top`.
    """

    top: jax.Array  # f32[P, T, R]
    cut: jax.Array  # f32[2, P, T, S]: thresholds on dimension x
    other: jax.Array  # f32[2, P, T, S]: max free of dimension 1 - x where free x >= cut


def fit_bound(free, R: int, demand_blk, scale) -> FitBound:
    """The FitBound of each (row, trial) of free (either `to_state` form), with thresholds
    at quantiles of the block's demands demand_blk f32[block, T, R] times scale f32[P, T]."""
    top = row_bound(free, R)
    P, T = top.shape[:2]
    if R < 2 or P * T < STAIR_MIN_ROWS:
        empty = jnp.zeros((2, P, T, 0), jnp.float32)
        return FitBound(top, empty, empty)
    block = demand_blk.shape[0]
    picks = np.linspace(0, block - 1, STAIRS).round().astype(np.int32)
    q = jnp.sort(demand_blk[:, :, :2], axis=0)[picks]  # [S, T, 2]
    cuts = jnp.stack([q[None, :, :, x].transpose(0, 2, 1) * scale[..., None] for x in range(2)])  # [2, P, T, S]
    if jnp.iscomplexobj(free):
        # Machine-major [T, Mp, P] per dimension: the maxima run down the machine axis, P lanes at a
        # time (on CPU a reduction along the contiguous axis is much slower).
        dims = (jnp.real(free[:, 0]), jnp.imag(free[:, 0]))
        lay = lambda c: jnp.transpose(c, (1, 2, 0))[:, :, None, :]  # [P, T, S] -> [T, S, 1, P]
        others = [jnp.max(jnp.where(dims[x][:, None] >= lay(cuts[x]), dims[1 - x][:, None], -jnp.inf), axis=2)
                  for x in range(2)]  # [T, S, P]
        others = [jnp.transpose(o, (2, 0, 1)) for o in others]
    else:  # one threshold at a time: no [P, T, S, Mp] intermediate even with every trial in one group
        dims = (free[:, :, 0], free[:, :, 1])  # [P, T, Mp]
        others = [jnp.stack([jnp.max(jnp.where(dims[x] >= cuts[x][..., k, None], dims[1 - x], -jnp.inf), axis=-1)
                             for k in range(cuts.shape[-1])], axis=-1) for x in range(2)]
    return FitBound(top, cuts, jnp.stack(others))


def may_fit(bound: FitBound, d):
    """False where `bound` shows that the task d f32[P, T, R] of a row fits no machine: bool[P, T].

    Feasibility is d_x <= f_x + tol. Where cut + tol < d_x (in float32), a machine with
    free x below the cut is infeasible, so a feasible one is among those the staircase
    step counts, and its free 1 - x is at most `other`.
    """
    ok = jnp.all(d <= bound.top + FEASIBILITY_TOL, axis=-1)
    for x in range(2 if bound.cut.shape[-1] else 0):  # no thresholds: the maxima only
        step = bound.cut[x] + FEASIBILITY_TOL < d[..., x, None]  # [P, T, S]
        limit = jnp.min(jnp.where(step, bound.other[x], jnp.inf), axis=-1)
        ok = ok & (d[..., 1 - x] <= limit + FEASIBILITY_TOL)
    return ok


def row_bound(free, R: int):
    """Each (row, trial)'s largest free value per dimension, f32[P, T, R] (free in either `to_state` form)."""
    if not jnp.iscomplexobj(free):
        return jnp.max(free, axis=-1)
    T, C, _, P = free.shape
    top = jnp.stack([jnp.max(free.real, axis=2), jnp.max(free.imag, axis=2)], axis=2)  # [T, C, 2, P]
    return jnp.transpose(top.reshape(T, 2 * C, P)[:, :R], (2, 0, 1))


def _lowest_best(s, machines, none, axis=-1):
    """The lowest of `machines` (broadcast against s) with the top score along `axis`, `none` if all are -inf."""
    best = jnp.max(s, axis=axis, keepdims=True)
    tied = (s == best) & (best > -jnp.inf)
    return jnp.min(jnp.where(tied, machines, none), axis=axis).astype(jnp.int32)


def _pick(policy, s, none, chunked=False):
    """A full scan's pick from scores s f32[..., X] (chunked: f32[..., C, CHUNK]): `first_feasible`
    where the policy scores every feasible machine alike (first_fit), else `first_best`."""
    if policy.uniform:
        return first_feasible(s.reshape(*s.shape[:-2], -1) if chunked else s, none)
    return first_best_chunked(s, none) if chunked else first_best(s, none)


def first_feasible(s, none):
    """The first position along the last axis of s f32[..., X] that is not -inf, `none` if
    there is none: i32[...]. `first_best` where every finite score is equal, in one
    reduction (first_fit: a third less time a step than `first_best`, whose two-level
    reductions XLA fuses with a constant score by computing it three times)."""
    X = s.shape[-1]
    return jnp.min(jnp.where(s > -jnp.inf, jnp.arange(X, dtype=jnp.int32), none), axis=-1).astype(jnp.int32)


def _max_last(m):
    """The maximum over the last axis of m (kept as an axis of 1), as elementwise maxima of halves."""
    while m.shape[-1] > 1:
        h = m.shape[-1] // 2
        top = jnp.maximum(m[..., :h], m[..., h:2 * h])
        m = jnp.concatenate([top, m[..., 2 * h:]], axis=-1) if m.shape[-1] % 2 else top
    return m


def first_best(s, none):
    """The first position of the top score along the last axis of s f32[..., X] (ties to the
    lowest), `none` where every score is -inf: i32[...].

    Plain reductions in two levels over CHUNK-wide chunks (the chunk maxima in one pass,
    then the first chunk that holds the top score, then the first lane of that chunk that
    does): cheaper than the top score and then the lowest position holding it over all X
    (a second full pass), and than a one-pass variadic argmax on CPU.
    """
    *lead, X = s.shape
    if X % CHUNK:
        return _lowest_best(s, jnp.arange(X, dtype=jnp.int32), none)
    s = s.reshape(*lead, X // CHUNK, CHUNK)
    chunk_max = jnp.max(s, axis=-1)
    return _first_holding(s, chunk_max, jnp.max(chunk_max, axis=-1, keepdims=True), none)


def first_best_chunked(s, none):
    """`first_best` of scores computed in chunks, s f32[..., C, CHUNK] (positions count along
    both axes). The top score is the maximum of the chunk maxima taken elementwise
    (`_max_last`): as a reduction, XLA merges it with the chunk maxima' into a second pass
    over s, one more kernel a step per policy."""
    chunk_max = jnp.max(s, axis=-1)
    return _first_holding(s, chunk_max, _max_last(chunk_max), none)


def _first_holding(s, chunk_max, best, none):
    """The first position of chunked scores s f32[..., C, W] holding the top score best
    f32[..., 1] (chunk maxima chunk_max f32[..., C]): the first chunk whose maximum it is,
    then the first lane of that chunk; `none` where best is -inf."""
    C, W = s.shape[-2:]
    chunk = jnp.min(jnp.where(chunk_max == best, jnp.arange(C, dtype=jnp.int32), C - 1), axis=-1)
    lanes = jnp.take_along_axis(s, chunk[..., None, None], axis=-2)[..., 0, :]
    lane = jnp.min(jnp.where(lanes == best, jnp.arange(W, dtype=jnp.int32), W), axis=-1)
    return jnp.where(best[..., 0] > -jnp.inf, chunk * W + lane, none).astype(jnp.int32)


def _place(free, j, d, none, machine_major=None):
    """free[p, t, :, j[p, t]] -= d[p, t] in place, skipping unplaced rows.

    free is f32[P, T, R, Mp], or complex64 pairs: machine-major [T, C, Mp, P] (`to_state`;
    the default for pairs) or row-major [P, T, C, Mp] (machine_major=False).
    """
    P, T = j.shape
    delta = to_pairs(-d[..., None])[..., 0] if jnp.iscomplexobj(free) else -d  # [P, T, C]
    if machine_major is None:
        machine_major = jnp.iscomplexobj(free)
    if machine_major:
        _, C, Mp, _ = free.shape
        plane = jnp.arange(T * C, dtype=jnp.int32).reshape(1, T, C)  # (trial, pair) planes of Mp x P
        flat = (plane * Mp + j[..., None]) * P + jnp.arange(P, dtype=jnp.int32).reshape(P, 1, 1)
        flat = jnp.where((j == none)[..., None], free.size, flat)  # out of range: dropped
    else:
        flat = _row_major_at(j, free.shape[2], free.shape[3], none, free.size)
    out = free.reshape(-1).at[flat.reshape(-1)].add(delta.reshape(-1), mode="drop", unique_indices=True)
    return out.reshape(free.shape)


def _row_major_at(j, planes: int, Mp: int, none, size: int):
    """Flat indices of machine j i32[P, T] in each of the `planes` rows of Mp machines that a
    (row, trial) has in a row-major state [P, T, planes, Mp]: i32[P, T, planes]; `size`, out
    of range (a dropped update), where j is `none`."""
    P, T = j.shape
    plane = jnp.arange(P * T * planes, dtype=jnp.int32).reshape(P, T, planes)
    return jnp.where((j == none)[..., None], size, plane * Mp + j[..., None])


def _pack_block(free, inv, demand, order, start, num_tasks, num_machines, genomes, swords, nwords, scale, limit,
                *, cfg: PackConfig, fallback: bool):
    """Place tasks start..start+block-1 of every trial's order.

    scale f32[P, T] multiplies each row's demands; a row packs only tasks of index < limit i32[P, T].

    Returns (free, machine i32[block, P, T], missed: whether some sampled placement
    found no feasible draw; only possible, and then meaningless, without `fallback`).
    free is in `to_state` form and inv in `to_pairs` form when `uses_pairs(cfg)`.
    """
    Mp = inv.shape[-1]
    none = jnp.int32(Mp)
    steps = start + jnp.arange(cfg.block, dtype=jnp.int32)
    d_blk = jnp.moveaxis(demand[order], 0, 1)  # order [T, block] -> [block, T, R]

    # The block's sample draws in one vectorized pass, [block, T, K], shared by all rows.
    draw = lambda step: rng.sample_machines(swords, step, max(cfg.sample_k, 1), num_machines)
    idx_blk = jax.vmap(draw)(steps) if cfg.sample_k > 0 else jnp.zeros((cfg.block, 0), jnp.int32)

    # Free capacity only shrinks while a snapshot packs, so the block's first state bounds it throughout.
    bound = fit_bound(free, demand.shape[-1], d_blk, scale) if cfg.sample_k > 0 and fallback else None

    # The fallback scans single rows of the state, row-major. A machine-major state of several
    # rows keeps them strided (reading one costs more than scoring it), so blocks with the
    # fallback also keep it row-major: a transposed copy, updated at each placement. With one
    # row, the machine-major state is row-major already: the fallback gets a reshape of it.
    paired = jnp.iscomplexobj(free)
    twin = paired and fallback and free.shape[-1] > 1
    rows = jnp.transpose(free, (3, 0, 1, 2)) if twin else None  # [P, T, C, Mp]
    as_rows = (lambda z: z.reshape(1, *z.shape[:3])) if paired and fallback and not twin else (lambda z: z)

    # `_score_rows_last`'s layouts of the genomes and of the row scales (for a machine-major state
    # of several rows, which `_sampled` scores rows last), transposed before the scan.
    rows_last = paired and free.shape[-1] > 1
    genome_cols, scale_cols = (genomes.T, scale.T) if rows_last else (None, None)

    # The step's demands come in the carry, a step ahead, rather than as the scan's slice at the
    # step: fused into a rows-last scoring, that slice is reloaded at every element and the loop
    # does not vectorize.
    # Full scan: the policies' `cached` terms of every machine, updated where a task lands.
    caches = machine_caches(cfg, free, inv) if cfg.sample_k == 0 else None

    def body(carry, x):
        free, rows, d_t, caches = carry
        d_next, step, idx, task = x
        d = d_t[None] * scale[..., None]  # [P, T, R]
        if cfg.sample_k > 0:
            lanes = None
            if rows_last:
                lanes = RowsLast(genome_cols, tuple(d_t[:, x, None] * scale_cols for x in range(d_t.shape[-1])))
            if twin:
                j, rows = _sampled(cfg, free, d, inv, genomes, idx, nwords, step, none, fallback, bound, rows,
                                   lanes)
            else:  # the state itself, passed through the fallback
                j, view = _sampled(cfg, free, d, inv, genomes, idx, nwords, step, none, fallback, bound,
                                   as_rows(free), lanes)
                free = view.reshape(free.shape)
        else:
            j = _full_scan(cfg, free, d, inv, genomes, nwords, step, none, caches)
        live = (step < num_tasks) & (task[None, :] < limit)
        missed = jnp.any(live & (j == none)) if cfg.sample_k > 0 and not fallback else jnp.bool_(False)
        j = jnp.where(live, j, none)
        free = _place(free, j, d, none)
        if twin:
            rows = _place(rows, j, d, none, machine_major=False)
        if caches is not None:
            caches = update_caches(cfg, caches, free, inv, j, none)
        return (free, rows, d_next, caches), (j, missed)

    d_next = jnp.concatenate([d_blk[1:], d_blk[:1]])
    (free, _, _, _), (j, missed) = lax.scan(body, (free, rows, d_blk[0], caches), (d_next, steps, idx_blk, order.T))
    return free, j, jnp.any(missed)


# A lax.cond that reads the carry makes XLA copy the whole carry every step, so sampled
# blocks first run without the fallback branch, from a kept copy of the state, and are
# redone with it only when some draw found nothing feasible. The results are the same either way.
_pack_block_fast = jax.jit(_pack_block, static_argnames=("cfg", "fallback"))
_pack_block_donating = jax.jit(_pack_block, static_argnames=("cfg", "fallback"), donate_argnames=("free",))


_T1, _T0, _REP = PartitionSpec(None, "trials"), PartitionSpec("trials"), PartitionSpec()
# Specs of (free, inv, demand, order, start, num_tasks, num_machines, genomes, swords, nwords, scale, limit)
# and of the outputs (free, machine, missed), split over trials.
_BLOCK_SPECS = ((_T1, _REP, _REP, _T0, _REP, _REP, _REP, _REP, _T0, _T0, _T1, _T1),
                (_T1, PartitionSpec(None, None, "trials"), _T0))


def _block_specs(cfg: PackConfig):
    """(in_specs, out_specs) of a block split over trials, for the state form of cfg (the
    machine-major form of `to_state` has the trials first)."""
    ins, outs = _BLOCK_SPECS
    if uses_pairs(cfg):
        ins, outs = (_T0, *ins[1:]), (_T0, *outs[1:])
    return ins, outs


def _mesh(devices: tuple) -> Mesh:
    """The 1-D mesh a packing's trials are split over."""
    return Mesh(np.asarray(devices), ("trials",))


@functools.lru_cache(maxsize=64)
def _sharded_block(cfg: PackConfig, fallback: bool, devices: tuple, donate: bool):
    """`_pack_block` with the trial axis split over `devices`.

    shard_map over a 1-D mesh: trials are independent, so each device packs its share
    with the unchanged code: results are bit-identical to one device. `missed` comes
    back per device.
    """
    mesh = _mesh(devices)

    def local(free, inv, demand, order, start, num_tasks, num_machines, genomes, swords, nwords, scale, limit):
        free, j, missed = _pack_block(free, inv, demand, order, start, num_tasks, num_machines, genomes, swords,
                                      nwords, scale, limit, cfg=cfg, fallback=fallback)
        return free, j, missed[None]

    in_specs, out_specs = _block_specs(cfg)
    fn = jax.shard_map(local, mesh=mesh, check_vma=False, in_specs=in_specs, out_specs=out_specs)
    return jax.jit(fn, donate_argnums=(0,) if donate else ()), mesh


def _global(x, mesh, spec):
    """x (the same full value on every process) as a global array sharded by `spec` over `mesh`."""
    if isinstance(x, jax.Array) and not x.is_fully_addressable:
        return x  # already global: the carry of the previous block
    full = np.asarray(x)
    return jax.make_array_from_callback(full.shape, NamedSharding(mesh, spec), lambda index: full[index])


def to_host(x) -> np.ndarray:
    """A result as a numpy array on this process, gathered from every host when it spans several."""
    if isinstance(x, jax.Array) and not x.is_fully_addressable:
        return np.asarray(multihost_utils.process_allgather(x, tiled=True))
    return np.asarray(x)


def _run_block(free, args, cfg, fallback, donate, devices):
    """One block on one device, or with its trials sharded over several (on one host or many).

    `missed` comes back as a device array (one flag per device), read only where needed:
    reading it waits for the block, so blocks run with the fallback are left to queue."""
    if len(devices) > 1:  # the arguments are already placed (`_placer`)
        fn, _ = _sharded_block(cfg, fallback, devices, donate)
        return fn(free, *args)
    block = _pack_block_donating if donate else _pack_block_fast
    return block(free, *args, cfg=cfg, fallback=fallback)


def _placer(cfg, devices):
    """place(i, x): argument i of `_pack_block` (0: free) as `_run_block` takes it, on the
    devices it is split over (as a global array); unchanged on one device. Arguments that
    stay the same from block to block are placed once: passing single-device arrays to a
    sharded program makes JAX copy them over at every call."""
    if len(devices) < 2:
        return lambda i, x: x
    mesh = _mesh(devices)
    specs = _block_specs(cfg)[0]
    return lambda i, x: _global(x, mesh, specs[i])


def shard_devices(trials: int) -> tuple:
    """The devices the trial axis is split over: every device of every process when
    jax.distributed runs several, else all local devices when there are several trials."""
    if jax.process_count() > 1:
        return tuple(jax.devices())
    devices = tuple(jax.local_devices())
    return devices if trials > 1 and len(devices) > 1 else devices[:1]


# On a CPU, trials beyond what keeps the state this small run as sequential groups: the
# scan then works out of cache instead of streaming the state from memory every step.
CPU_STATE_BUDGET = 4 << 20


def _trial_groups(trials: int, bytes_per_trial: int, num_devices: int = 1) -> list[np.ndarray]:
    """Balanced consecutive groups of trial indices, one group off CPU or when it fits
    (the budget is per device when the trials are sharded)."""
    if jax.default_backend() != "cpu":
        return [np.arange(trials)]
    size = max(1, CPU_STATE_BUDGET // max(bytes_per_trial, 1)) * num_devices
    n_groups = -(-trials // size)
    return np.array_split(np.arange(trials), n_groups)


@dataclasses.dataclass(frozen=True)
class RowVariants:
    """Per-(row, trial) variations of one packing, for compaction and inflation.

    Each field is optional; a row without it packs the whole workload on the whole cluster.
    """

    machine_rank: np.ndarray | None = None  # i32[T, M]: machine m's place in trial t's random machine order
    prefix: np.ndarray | None = None  # i32[P, T]: the row's cluster is the machines of rank < prefix
    demand_scale: np.ndarray | None = None  # f32[P, T]: every demand of the row times this
    task_limit: np.ndarray | None = None  # i32[P, T]: the row packs only the tasks of index < limit


def _variant_arrays(v: RowVariants | None, P: int, T: int, M: int, Mp: int, N: int):
    """(rank i32[T, Mp], prefix i32[P, T], scale f32[P, T], limit i32[P, T]) with the defaults filled in."""
    v = v or RowVariants()
    rank = np.full((T, Mp), Mp, np.int32)  # padding machines are never in a prefix
    rank[:, :M] = np.arange(M) if v.machine_rank is None else v.machine_rank
    fields = ((v.prefix, Mp, np.int32), (v.demand_scale, 1.0, np.float32), (v.task_limit, N, np.int32))
    out = []
    for value, default, dtype in fields:
        arr = np.full((P, T), default, dtype) if value is None else np.asarray(value, dtype)
        if arr.shape != (P, T):
            raise InputError(f"row variants must have shape ({P}, {T}), got {arr.shape}")
        out.append(arr)
    if v.prefix is not None and v.machine_rank is None:
        raise InputError("a machine prefix needs the machine_rank it is a prefix of")
    return (rank, *out)


def _pack_trials(cfg, cap_t, inv_t, demand, padded, N, M, genomes, swords, nwords, variants, progress,
                 devices=()):
    """Pack one group of trials block by block: (free f32[P, T, R, Mp] as the state holds it
    (`encode_free`), machine i32[N_pad, P, T])."""
    P, T = len(cfg.policies), padded.shape[0]
    R, Mp = cap_t.shape
    block = cfg.block
    rank, prefix, scale, limit = (jnp.asarray(a) for a in variants)
    in_prefix = rank[None, :, None, :] < prefix[:, :, None, None]  # [P, T, 1, Mp]
    free = jnp.where(in_prefix, encode_free(cap_t, inv_t)[None, None], PAD_CAPACITY)
    if uses_pairs(cfg):
        free, inv_t = to_state(free, cfg), to_pairs(inv_t)
    place = _placer(cfg, devices)
    free = place(0, free)
    inv_t, demand, num_tasks, num_machines, genomes, swords, nwords, scale, limit = (
        place(i, x) for i, x in ((1, inv_t), (2, demand), (5, jnp.int32(N)), (6, jnp.int32(M)), (7, genomes),
                                 (8, swords), (9, nwords), (10, scale), (11, limit)))
    chosen = []
    optimistic = cfg.sample_k > 0  # until a block needs the full-scan fallback
    for start in range(0, padded.shape[1], block):
        args = (inv_t, demand, place(3, jnp.asarray(padded[:, start:start + block])), place(4, jnp.int32(start)),
                num_tasks, num_machines, genomes, swords, nwords, scale, limit)
        if optimistic:
            new_free, j, missed = _run_block(free, args, cfg, False, False, devices)
            if bool(np.any(to_host(missed))):
                optimistic = False  # a filling cluster keeps missing: stay on the slow path
            else:
                free = new_free
        if not optimistic:
            free, j, _ = _run_block(free, args, cfg, cfg.sample_k > 0, True, devices)
        chosen.append(j)
        if progress is not None:
            progress(min(start + block, N), N)
    if uses_pairs(cfg):
        free = _unpair_state(free, R)
    return to_host(free), np.concatenate([to_host(j) for j in chosen], axis=0)


def _decode_free(free, cap_t, zero_capacity) -> np.ndarray:
    """A packing state's free capacity f32[P, T, R, Mp] as users read it. A dimension of zero
    capacity (bool[R, Mp]; `encode_free`) took only zero demands: its free capacity is its
    capacity (padding and machines outside a prefix keep PAD_CAPACITY)."""
    return np.where(zero_capacity & (free == ZERO_CAPACITY_FREE), cap_t, free)


_unpair_state = jax.jit(from_state, static_argnums=1)


def _block_size(cfg_block: int, num_tasks: int) -> int:
    return int(min(cfg_block, max(64, -(-num_tasks // 64) * 64)))


def policy_shares(cfg: PackConfig) -> list[tuple[int, int]]:
    """Row ranges of whole policies, one per local device, when the rows hold at least as many
    policies as there are devices (one process); else []. Shares are balanced by cost: rows
    times their policy's `cost` (the policies' full-scan steps differ severalfold in time)."""
    devices = jax.local_devices()
    groups = cfg.groups()
    if jax.process_count() > 1 or len(devices) < 2 or len(groups) < len(devices):
        return []
    n = len(devices)
    upto = np.cumsum([(hi - lo) * get_policy(name).cost for name, lo, hi in groups])  # cost of groups[:g + 1]
    ends = []  # ends[k]: groups in the first k + 1 shares
    for k in range(1, n):
        first, last = (ends[-1] if ends else 0) + 1, len(groups) - (n - k)  # every share keeps a group
        ends.append(min(range(first, last + 1), key=lambda g: abs(upto[g - 1] - k * upto[-1] / n)))
    cuts = [0] + [groups[g - 1][2] for g in ends] + [len(cfg.policies)]
    return list(zip(cuts[:-1], cuts[1:]))


def genome_shares(cfg: PackConfig, trials: int) -> list[tuple[int, int]]:
    """Row ranges of nearly equal size, one per local device (at most one per row), for one
    trial of several rows of one policy (a population of genomes) in one process; else [].
    (Several trials of one policy split their trials instead.)"""
    devices = jax.local_devices()
    P = len(cfg.policies)
    if trials != 1 or P < 2 or len(cfg.groups()) != 1 or len(devices) < 2 or jax.process_count() > 1:
        return []
    cuts = np.linspace(0, P, min(len(devices), P) + 1).round().astype(int)
    return [(int(a), int(b)) for a, b in zip(cuts[:-1], cuts[1:])]


def pack(cluster: Cluster, workload: Workload, cfg: PackConfig, keys: jax.Array,
         genomes=None, orders=None, progress: Callable[[int, int], None] | None = None,
         variants: RowVariants | None = None, device=None) -> PackState:
    """Pack the workload for every policy row of `cfg` and every trial key.

    Args:
        cluster: the machines.
        workload: the tasks.
        cfg: one policy per row, the picker, the slot.
        keys: the T trial keys (`rng.trial_keys`).
        genomes: f32[P, 8] for `family` rows (default alpha_evolve's point).
        orders: i32[T, N] task orders (default: each trial's shuffle).
        progress: progress(done, total) after each block of tasks.
        variants: per-(row, trial) machine subsets, demand scales and task counts.
        device: run on that one device only (default: spread over every device, see the
            module notes).

    Returns:
        The PackState: free capacity f32[P, T, M, R] and placement i32[P, T, N] (-1 unplaced).

    Raises:
        InputError: genomes of the wrong shape or a negative sample_k.
    """
    P, T = len(cfg.policies), int(keys.shape[0])
    N = int(np.shape(workload.demand)[0])
    if genomes is None:
        genomes = row_genomes(cfg.policies)
    genomes = np.asarray(genomes, np.float32)
    if genomes.shape != (P, genome_width(cfg.policies)):
        raise InputError(f"genomes must have shape ({P}, {genome_width(cfg.policies)}), got {genomes.shape}")
    orders = np.asarray(rng.trial_orders(keys, N) if orders is None else orders, np.int32)
    shares = (policy_shares(cfg) or genome_shares(cfg, T)) if device is None else []
    if len(shares) > 1:
        return _pack_policy_shares(cluster, workload, cfg, keys, genomes, orders, progress, variants, shares)
    cap = np.asarray(cluster.capacity, np.float32)
    demand = jnp.asarray(workload.demand, jnp.float32)
    M, R = cap.shape
    slot = slot_vector(cfg.slot, R)
    block = _block_size(cfg.block, N)
    cfg = dataclasses.replace(cfg, slot=slot, block=block)
    if cfg.sample_k < 0:
        raise InputError(f"sample_k must be >= 0, got {cfg.sample_k}")

    Mp = -(-M // CHUNK) * CHUNK
    cap_np = np.full((R, Mp), PAD_CAPACITY, np.float32)
    cap_np[:, :M] = cap.T
    cap_t = jnp.asarray(cap_np)
    inv_t = safe_inverse(cap_t)
    genomes = jnp.asarray(genomes)
    n_blocks = max(1, -(-N // block))
    padded = np.zeros((T, n_blocks * block), np.int32)
    padded[:, :N] = orders
    swords = rng.hash_words(keys, rng.STREAM_SAMPLE)
    nwords = rng.hash_words(keys, rng.STREAM_NOISE)
    rank, prefix, scale, limit = _variant_arrays(variants, P, T, M, Mp, N)

    devices = (device,) if device is not None else shard_devices(T)
    groups = _trial_groups(T, P * R * Mp * 4, len(devices))
    total = N * len(groups)
    frees, chosen = [], []
    for g, trials in enumerate(groups):
        report = None if progress is None else (lambda done, _n, g=g: progress(g * N + done, total))
        n = len(trials)
        # With several devices, pad the group to a multiple of the device count with copies of
        # its last trial, whose results are dropped.
        trials = np.concatenate([trials, np.repeat(trials[-1:], -n % len(devices))])
        group_variants = (rank[trials], prefix[:, trials], scale[:, trials], limit[:, trials])
        free, steps = _pack_trials(cfg, cap_t, inv_t, demand, padded[trials], N, M, genomes,
                                   swords[trials], nwords[trials], group_variants, report, devices)
        frees.append(free[:, :n])
        chosen.append(steps[:, :, :n])
    free = _decode_free(np.concatenate(frees, axis=1), cap_np, np.asarray(inv_t) == 0)
    return _pack_state(free, np.concatenate(chosen, axis=2)[:N], orders, M)


def _pack_policy_shares(cluster, workload, cfg, keys, genomes, orders, progress, variants, shares) -> PackState:
    """`pack` with its rows split over the local devices (`shares`, row ranges: whole policies,
    `policy_shares`, or a population's genomes, `genome_shares`): each share is its own
    program (its own rows, all trials) on its own device, driven from its own thread.
    XLA:CPU runs a step's small kernels on one thread, so this keeps every core busy without
    the padding of a trial split, and each share leaves its optimistic sampled blocks
    (`_pack_trials`) when its own rows need the fallback; rows are independent, so results
    are identical. genomes and orders are pack's, already filled in."""
    slowest = SlowestShare(progress, len(shares), int(np.shape(workload.demand)[0]))

    def run(i, device):
        lo, hi = shares[i]
        sub_variants = None
        if variants is not None:
            rows = lambda a: None if a is None else np.asarray(a)[lo:hi]
            sub_variants = RowVariants(machine_rank=variants.machine_rank, prefix=rows(variants.prefix),
                                       demand_scale=rows(variants.demand_scale), task_limit=rows(variants.task_limit))
        return pack(cluster, workload, dataclasses.replace(cfg, policies=cfg.policies[lo:hi]), keys, genomes[lo:hi],
                    orders, slowest.reporter(i), sub_variants, device=device)

    parts = on_devices(run, len(shares))
    return PackState(free=np.concatenate([p.free for p in parts]),
                     placement=np.concatenate([p.placement for p in parts]))


def _pack_state(free, steps, orders, M) -> PackState:
    """The PackState of free f32[P, T, R, Mp] and machines steps i32[N, P, T] in each trial's order."""
    P, T = free.shape[:2]
    machine = np.where(steps >= M, -1, steps).transpose(1, 2, 0)  # [P, T, N]
    placement = np.empty_like(machine)
    for t in range(T):  # each trial's steps back in task order, all rows at once
        placement[:, t, orders[t]] = machine[:, t]
    free_mr = free[..., :M].transpose(0, 1, 3, 2)  # [P, T, M, R]
    return PackState(free=free_mr, placement=placement)
