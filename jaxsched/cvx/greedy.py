"""Stage 2 of CvxCluster: price-driven greedy placement (Nnorom, Boyd, Levis 2026, Fig. 1).

With the prices of stage 1, each task's net utility on shape k is v_ik = u_i - lam_k . d_i
- mu_{k, g(i)}. Tasks are placed one at a time in descending order of their best net
utility (ties: lowest task number). A task tries its allowed shapes in descending v_ik
(ties: the shape with the larger share of its capacity still free at the start of the
round, then the lowest shape number) and goes on a feasible server of the first shape
that has one, drawn uniformly at random among that shape's feasible servers. Tasks that
fit no allowed shape stay unplaced.

The uniform draw is exact and cheap: SAMPLES servers of the shape are drawn uniformly
(with replacement) and the first feasible one is taken (rejection sampling, which is
uniform over the feasible ones); if none is feasible, all servers of the shape are
scanned and the feasible one with the smallest hash of (task, server) is taken. A
per-shape upper bound on the free capacity (the exact maximum, refreshed whenever a
scan finds the shape full for a task) skips shapes that cannot fit a task, and so does a
memo of the last FAILURES demands that a scan of the shape found no room for (a task
without anti-affinity): free capacity only shrinks during a round, so a task demanding
at least as much in every resource cannot fit either. Neither shortcut changes a result.

Feasible: every resource d_ir <= free_jr + 1e-6, the task's type allowed on the server,
and fewer than group_limit tasks of the task's anti-affinity group on the server.
"""

from __future__ import annotations

import functools
from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np
from jax import lax

from .. import rng
from ..policies import FEASIBILITY_TOL
from .prices import PriceInputs, net_utility
from .problem import CvxProblem, Shapes, shape_sums

SAMPLES = 16
FAILURES = 16


class GreedyInputs(NamedTuple):
    """Stage 2 arrays (host arrays, taken by the compiled stage), servers in shape order
    (position p holds server members[p]).

    Anti-affinity: group g owns slots[gstart[g] : gstart[g] + gsize[g]], one per member (running
    members first, holding their server's position; then this round's tasks, -1 until placed).
    """

    free: jax.Array  # f32[R, M]
    server: jax.Array  # i32[M], original index of the server at each position
    start: jax.Array  # i32[K]
    count: jax.Array  # i32[K]
    share: jax.Array  # f32[K], free share of the shape at the start of the round (tie-break)
    slots: jax.Array  # i32[>= S + window + 1]
    gstart: jax.Array  # i32[G + 1], row G: tasks without a group (no slots)
    gsize: jax.Array  # i32[G + 1]
    task_slot: jax.Array  # i32[N], a task's slot (ungrouped: the last, unused slot)
    limit: jax.Array  # i32[], tasks of one group per server


def pow2(n: int) -> int:
    """The smallest power of two >= n (1 for n <= 1)."""
    return 1 << max(0, n - 1).bit_length()


def _ranks(sorted_keys: np.ndarray) -> np.ndarray:
    """Rank of each entry among equal keys of a sorted array."""
    return np.arange(len(sorted_keys)) - np.searchsorted(sorted_keys, sorted_keys, side="left")


def group_sizes(problem: CvxProblem) -> np.ndarray:
    """Members of each anti-affinity group: running ones plus this problem's tasks, i64[G]."""
    G = problem.num_groups
    return np.bincount(problem.held_group, minlength=G) + np.bincount(problem.group[problem.group >= 0], minlength=G)


def greedy_inputs(problem: CvxProblem, shapes: Shapes, min_window: int = 1,
                  min_slots: int = 0) -> tuple[GreedyInputs, int]:
    """The stage-2 arrays of `problem` and the (static) width of a group's slot window.

    min_window, min_slots: floors on the window and the slot array, so that rounds of an
    online run, whose group membership changes, keep one compiled shape.
    """
    m = shapes.members
    free = problem.free[m].T
    G, N = problem.num_groups, problem.num_tasks
    tot, left = shapes.capacity_sum, shape_sums(shapes, problem.free)
    with np.errstate(invalid="ignore", divide="ignore"):
        share = np.where(tot > 0, left / np.where(tot > 0, tot, 1.0), np.inf).min(axis=1)
    share = np.where(np.isfinite(share), share, 1.0)
    pos_of = np.empty(len(m), np.int32)
    pos_of[m] = np.arange(len(m), dtype=np.int32)
    hg, hs, tg = problem.held_group, problem.held_server, problem.group
    held_n = np.bincount(hg, minlength=G)
    size = group_sizes(problem)
    gstart = np.concatenate([[0], np.cumsum(size)[:-1]]).astype(np.int64)
    S = int(size.sum())
    window = max(pow2(max(int(size.max(initial=0)), 1)), min_window)
    slots = np.full(max(pow2(S + window + 1), min_slots), -1, np.int32)
    oh = np.argsort(hg, kind="stable")
    slots[gstart[hg[oh]] + _ranks(hg[oh])] = pos_of[hs[oh]]
    grouped = np.flatnonzero(tg >= 0)
    ot = grouped[np.argsort(tg[grouped], kind="stable")]
    task_slot = np.full(N, S + window, np.int32)
    task_slot[ot] = gstart[tg[ot]] + held_n[tg[ot]] + _ranks(tg[ot])
    # Host arrays: the compiled stage takes them in one transfer (a device_put each would cost more
    # than a small round's placement).
    inputs = GreedyInputs(free=np.ascontiguousarray(free, np.float32), server=m.astype(np.int32),
                          start=shapes.start.astype(np.int32), count=shapes.count.astype(np.int32),
                          share=share.astype(np.float32), slots=slots, gstart=np.append(gstart, 0).astype(np.int32),
                          gsize=np.append(size, 0).astype(np.int32), task_slot=task_slot,
                          limit=np.int32(problem.group_limit))
    return inputs, window


def task_order(v: jax.Array):
    """Processing order of the tasks: best net utility descending, ties lowest number: i32[N]."""
    best = jnp.max(v, axis=1)
    return jnp.lexsort((jnp.arange(v.shape[0]), -best)).astype(jnp.int32)


def shape_order(v: jax.Array, share: jax.Array):
    """Each task's shapes by preference (v desc, share desc, number): i32[N, K], and how many are allowed."""
    N, K = v.shape
    k = jnp.broadcast_to(jnp.arange(K), (N, K))
    sh = jnp.broadcast_to(share, (N, K))
    order = jnp.lexsort((k, -sh, -v), axis=1).astype(jnp.int32)
    return order, jnp.sum(v > -jnp.inf, axis=1).astype(jnp.int32)


def _shape_max(free, pos_shape, k):
    """Exact max free per resource over the servers of shape k: f32[R]."""
    return jnp.max(jnp.where(pos_shape[None, :] == k, free, -jnp.inf), axis=1)


@functools.partial(jax.jit, static_argnames=("window",))
def _place(lam, mu, pinp: PriceInputs, ginp: GreedyInputs, words, window: int):
    """Stage 2 as one compiled scan over the tasks by net utility: (server i32[N] or -1, order i32[N]).

    A task tries its allowed shapes in order of preference: SAMPLES draws among the shape's
    servers, then a scan of the shape, skipped where the shape's exact bound or its record of
    failed demands shows that the task cannot fit. (One function: the step and its helpers are
    closures over the same inputs, and splitting them out would pass a dozen arrays around.)
    """
    v = net_utility(lam, jnp.concatenate([mu, jnp.zeros((mu.shape[0], 1), mu.dtype)], axis=1), pinp)
    order = task_order(v)
    prefs, n_allowed = shape_order(v, ginp.share)
    R, M = ginp.free.shape
    K = ginp.start.shape[0]
    pos = jnp.arange(M, dtype=jnp.int32)
    pos_shape = jnp.searchsorted(ginp.start, pos, side="right").astype(jnp.int32) - 1
    # Empty shapes do not occur (every shape has a server), so pos_shape is exact.
    bound0 = jax.vmap(lambda k: _shape_max(ginp.free, pos_shape, k))(jnp.arange(K)).astype(jnp.float32)  # [K, R]
    sample_words, scan_words = words[0:1], words[1:2]

    no_group = ginp.gstart.shape[0] - 1

    def members(slots, g):
        w = lax.dynamic_slice(slots, (ginp.gstart[g],), (window,))
        return w, jnp.arange(window) < ginp.gsize[g]

    def group_ok(slots, g, p):
        """Server positions p [L] may take one more task of group g."""
        def check(_):
            w, valid = members(slots, g)
            return jnp.sum((w[None, :] == p[:, None]) & valid[None, :], axis=1) < ginp.limit
        return lax.cond(g == no_group, lambda _: jnp.ones(p.shape, bool), check, None)

    def group_ok_all(slots, g):
        """Every server position may take one more task of group g: bool[M]."""
        def check(_):
            w, valid = members(slots, g)
            held = jnp.zeros(M, jnp.int32).at[jnp.where(valid, w, M)].add(1, mode="drop")
            return held < ginp.limit
        return lax.cond(g == no_group, lambda _: jnp.ones(M, bool), check, None)

    def fits(free, d, p):
        return jnp.all(d[:, None] <= free[:, p] + FEASIBILITY_TOL, axis=0)

    def step(carry, i):
        free, slots, memo = carry
        d = pinp.demand[i]
        g = pinp.group[i]

        def try_shape(c):
            t, _, memo = c
            k = prefs[i, t]
            start, count = ginp.start[k], ginp.count[k]

            def look(memo):
                lanes = k * SAMPLES + jnp.arange(SAMPLES, dtype=jnp.int32)
                bits = rng.counter_bits(sample_words, i, lanes)[0]
                p = start + (bits % count.astype(jnp.uint32)).astype(jnp.int32)
                ok = fits(free, d, p) & group_ok(slots, g, p)

                def scan(memo):
                    bound, failed, nfail = memo
                    inside = pos_shape == k
                    feas = inside & fits(free, d, pos) & group_ok_all(slots, g)
                    h = rng.counter_bits(scan_words, i, ginp.server)[0]
                    # Smallest hash among feasible servers, ties to the lowest position.
                    best = jnp.argmin(jnp.where(feas, h, jnp.uint32(0xFFFFFFFF)))
                    found = jnp.any(feas)
                    best = jnp.where(found & feas[best], best, jnp.argmax(feas))
                    tight = bound.at[k].set(_shape_max(free, pos_shape, k))
                    record = ~found & (g == no_group)
                    slot = nfail[k] % FAILURES
                    failed = failed.at[k, slot].set(jnp.where(record, d, failed[k, slot]))
                    nfail = nfail.at[k].add(record.astype(jnp.int32))
                    return (jnp.where(found, best, -1).astype(jnp.int32),
                            (jnp.where(found, bound, tight), failed, nfail))

                return lax.cond(jnp.any(ok), lambda m: (p[jnp.argmax(ok)], m), scan, memo)

            bound, failed, _ = memo
            dominated = jnp.any(jnp.all(d[None, :] >= failed[k], axis=1))
            maybe = jnp.all(d <= bound[k] + FEASIBILITY_TOL) & ~dominated
            chosen, memo = lax.cond(maybe, look, lambda m: (jnp.int32(-1), m), memo)
            return t + 1, chosen, memo

        def going(c):
            t, chosen, _ = c
            return (chosen < 0) & (t < n_allowed[i])

        _, chosen, memo = lax.while_loop(going, try_shape, (jnp.int32(0), jnp.int32(-1), memo))
        placed = chosen >= 0
        p = jnp.maximum(chosen, 0)
        free = free.at[:, p].add(jnp.where(placed, -d, 0.0))
        slots = slots.at[ginp.task_slot[i]].set(jnp.where(placed, p, -1))
        return (free, slots, memo), chosen

    memo0 = (bound0, jnp.full((K, FAILURES, R), jnp.inf, jnp.float32), jnp.zeros(K, jnp.int32))
    (free, _, _), chosen = lax.scan(step, (ginp.free, ginp.slots, memo0), order)
    server = jnp.where(chosen >= 0, ginp.server[jnp.maximum(chosen, 0)], -1)
    placement = jnp.full(order.shape, -1, jnp.int32).at[order].set(server)
    return placement, order


def draw_words(key: jax.Array) -> jax.Array:
    """The counter-hash words of the sampled draws (row 0) and of the scan pick (row 1): u32[2, 2]."""
    return jnp.concatenate([rng.hash_words(key[None], rng.STREAM_CVX_SAMPLE),
                            rng.hash_words(key[None], rng.STREAM_CVX_SCAN)], axis=0)


def place(problem: CvxProblem, shapes: Shapes, pinp: PriceInputs, lam, mu, key, min_window: int = 1,
          min_slots: int = 0) -> tuple[np.ndarray, np.ndarray]:
    """Stage 2 placement of every task: (server of each task i32[N] or -1, processing order i32[N])."""
    ginp, window = greedy_inputs(problem, shapes, min_window, min_slots)
    words = draw_words(key)
    placement, order = _place(jnp.asarray(lam, jnp.float32), jnp.asarray(mu, jnp.float32), pinp, ginp, words,
                              window)
    return np.asarray(placement), np.asarray(order)
