"""The picker one task at a time, in JAX: the oracle the multi-task engines must match bit for bit.

docs/spec/POLICIES.md's picker written as plainly as it reads: a scan over the trial's order,
one task a step; sample_k draws scored with the policy's own float32 functions, ties to the
lowest machine index, and where none of them fits, a full scan of every machine (computed
at every step and selected, without any skipping); the full scan's argmax with ties to the
lowest index. It shares the scoring functions with jaxsched (so the float32 values are the
same) but none of the packing code: no windows, stamps, bounds, memos, chunks or caches.
"""

from __future__ import annotations

import functools

import jax
import jax.numpy as jnp
import numpy as np
from jax import lax

from jaxsched import rng
from jaxsched.policies import (ZERO_CAPACITY_FREE, encode_free, get_policy, row_genomes, safe_inverse, score_terms,
                               slot_vector)


def _argmax_lowest(s, machines, none):
    best = jnp.max(s)
    hit = jnp.where((s == best) & (best > -jnp.inf), machines, none)
    return jnp.min(hit)


@functools.partial(jax.jit, static_argnames=("name", "sample_k", "slot", "M"))
def _pack_row(free, inv, demand, order, genome, swords, nwords, scale, limit, *, name, sample_k, slot, M):
    """One (row, trial): free f32[R, Mp] (encoded), order i32[N] -> (free, machine i32[N], Mp: none)."""
    policy = get_policy(name)
    R, Mp = free.shape
    none = jnp.int32(Mp)
    all_machines = jnp.arange(Mp, dtype=jnp.int32)

    def scores(d, f, ic, noise):
        return score_terms(policy, tuple(d[x] for x in range(R)), tuple(f[x] for x in range(R)),
                           tuple(ic[x] for x in range(R)), genome, noise, slot, encoded=True)

    def step(free, x):
        i, task = x
        d = demand[task] * scale
        full_noise = rng.uniform_noise(nwords[None], i, all_machines)[0]
        j_full = _argmax_lowest(scores(d, free, inv, full_noise), all_machines, none)
        if sample_k > 0:
            draws = rng.sample_machines(swords[None], i, sample_k, M)[0]
            noise = rng.uniform_noise(nwords[None], i, draws)[0]
            j = _argmax_lowest(scores(d, free[:, draws], inv[:, draws], noise), draws, none)
            j = jnp.where(j == none, j_full, j)
        else:
            j = j_full
        j = jnp.where(task < limit, j, none)
        free = jnp.where((all_machines == j)[None, :], free - d[:, None], free)
        return free, j

    return lax.scan(step, free, (jnp.arange(order.shape[0], dtype=jnp.int32), order))


def pack(capacity, demand, policies, sample_k, keys, orders=None, genomes=None, slot=None, free0=None,
         scale=None, limit=None):
    """(placement i32[P, T, N] (-1 unplaced), free f32[P, T, M, R]) of the picker, as `jaxsched.pack` gives them.

    capacity f32[M, R]; demand f32[N, R]; free0 f32[P, T, M, R]: a starting free capacity (default
    the capacity; -1 marks machines a row may not use); scale f32[P, T], limit i32[P, T]: pack.RowVariants'.
    """
    capacity = np.asarray(capacity, np.float32)
    demand = np.asarray(demand, np.float32)
    M, R = capacity.shape
    N, P, T = demand.shape[0], len(policies), int(keys.shape[0])
    Mp = max(128, -(-M // 128) * 128)
    cap = np.full((R, Mp), -1.0, np.float32)
    cap[:, :M] = capacity.T
    inv = safe_inverse(jnp.asarray(cap))
    start = np.asarray(encode_free(jnp.asarray(cap), inv))
    orders = np.asarray(rng.trial_orders(keys, N) if orders is None else orders, np.int32)
    genomes = row_genomes(policies) if genomes is None else np.asarray(genomes, np.float32)
    slot = slot_vector(slot, R)
    swords = np.asarray(rng.hash_words(keys, rng.STREAM_SAMPLE))
    nwords = np.asarray(rng.hash_words(keys, rng.STREAM_NOISE))
    placement = np.full((P, T, N), -1, np.int32)
    free_out = np.zeros((P, T, M, R), np.float32)
    for p, name in enumerate(policies):
        for t in range(T):
            f = start.copy()
            if free0 is not None:
                f[:, :M] = np.where(np.asarray(free0)[p, t].T < 0, -1.0, f[:, :M])
            sc = np.float32(1.0 if scale is None else scale[p, t])
            lim = np.int32(N if limit is None else limit[p, t])
            free, steps = _pack_row(jnp.asarray(f), inv, jnp.asarray(demand), jnp.asarray(orders[t]),
                                    jnp.asarray(genomes[p]), jnp.asarray(swords[t]), jnp.asarray(nwords[t]),
                                    sc, lim, name=name, sample_k=sample_k, slot=slot, M=M)
            steps = np.asarray(steps)
            placement[p, t, orders[t]] = np.where(steps >= M, -1, steps)
            free = np.asarray(free)[:, :M].T
            # As users read it: a dimension of zero capacity holds its capacity, not its encoding.
            free_out[p, t] = np.where((capacity == 0) & (free == ZERO_CAPACITY_FREE), capacity, free)
    return placement, free_out
