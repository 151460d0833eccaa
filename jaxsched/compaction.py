"""Compaction and inflation of docs/spec/POLICIES.md ("Snapshot metrics"), every search batched.

- compaction: trial t orders the machines at random (its key's STREAM_MACHINES); its
  value is L / M for the smallest prefix length L (binary search) such that the
  workload, in trial t's task order, packs 100% onto the first L machines of that
  order (kept in their index order, so ties still go to the lowest machine index).
  1.0, flagged as at its ceiling, where even all M machines do not pack everything.
- inflation: the largest multiplier lambda = 0.005 k (binary search over k >= 1) at
  which the workload still packs 100%.
  `scale`: every demand times lambda; lambda is capped at the largest machine capacity
  over the largest task demand in the binding dimension (flagged when reached).
  `clone`: floor(lambda N) tasks, the N originals first, then copies drawn with
  replacement from them (one draw sequence per experiment, from trial 0's key),
  packed in a per-trial random order; lambda is capped where the total demand would
  exceed the cluster's total capacity. 0, flagged, where even lambda = 0.005 fails.

Every (policy, trial) search runs in the same batched packings: a round packs, for all
of them at once, the 2^depth - 1 candidates of their next `depth` binary-search steps
(`search.bisect`), so the answers are those of the sequential binary search. A round
packs nothing when every candidate in it asks for more total demand than the machines
hold (`overflows`): such a packing cannot place everything, whatever the policy.
"""

from __future__ import annotations

import dataclasses
from typing import Callable

import jax
import numpy as np

from . import rng
from .errors import InputError
from .packing import PackConfig, RowVariants, pack
from .policies import FEASIBILITY_TOL
from .search import bisect
from .types import Cluster, Workload

LAMBDA_STEP = 0.005
STEPS_PER_UNIT = 200  # 1 / LAMBDA_STEP, exactly
STREAM_CLONE_DRAWS = 5
INFLATE_MODES = ("scale", "clone")
ROUNDING = 1e-5  # relative slack for float32 rounding in `overflows`, far above what packing accumulates


def overflows(demand, capacity, machines, tasks, cap_max) -> np.ndarray:
    """Whether total demand f64[..., R] certainly cannot fit in total capacity f64[..., R]: bool[...].

    A placement may overrun a machine by the feasibility tolerance, and float32 free
    capacity drifts by rounding (at most a few units of 2^-24 of a capacity a task),
    so the test allows machines x 1e-6 and a generous ROUNDING slack beyond the capacity.
    """
    slack = np.asarray(machines * FEASIBILITY_TOL + tasks * cap_max * ROUNDING)[..., None]
    return np.any(demand * (1 - ROUNDING) > capacity * (1 + ROUNDING) + slack, axis=-1)


def surely_packs(capacity, total, largest) -> bool:
    """Whether tasks of total demand f64[R] and largest demand f64[R] per dimension surely all
    find a feasible machine among machines of capacity f32[M, R], in any order and whatever
    the policy picks.

    A machine refuses a task only where some dimension's load exceeds its capacity less the
    task's demand there. Machines whose capacity falls short of the largest demand may refuse
    from the start; on each other machine, a load of more than half the gap g_x (the least
    capacity less the largest demand) is needed, so at most 2 total_x / g_x machines refuse
    by dimension x. The half-gap margin is far beyond float32 rounding of free capacity.
    """
    cap = np.asarray(capacity, np.float64)
    largest = np.asarray(largest, np.float64) * (1 + ROUNDING)
    short = np.any(cap < largest + FEASIBILITY_TOL, axis=1)  # may refuse with no load at all
    if np.all(short):
        return False
    gap = np.min(cap[~short], axis=0) - largest  # > 0
    refusing = np.sum(short) + np.sum(2 * np.asarray(total, np.float64) * (1 + ROUNDING) / gap)
    return bool(refusing < cap.shape[0])


@dataclasses.dataclass(frozen=True)
class SearchResult:
    """One search metric for every (policy, trial)."""

    value: np.ndarray  # f64[P, T]
    ceiling: np.ndarray  # bool[P, T]: the value is a bound of the search, not a measurement
    reason: str  # what the ceiling means, for the report
    packings: int  # (row, trial) packings run, all rounds together


def machine_ranks(keys: jax.Array, num_machines: int) -> np.ndarray:
    """Each machine's place in each trial's random machine order: i32[T, M]."""
    order = np.asarray(rng.trial_permutations(keys, num_machines, rng.STREAM_MACHINES))
    rank = np.empty_like(order)
    rank[np.arange(order.shape[0])[:, None], order] = np.arange(num_machines, dtype=order.dtype)
    return rank


class _Batch:
    """Evaluates "packs 100%" for candidates of every (policy, trial) search in one packing."""

    def __init__(self, cluster, workload, cfg, keys, genomes, orders, variants_of, need_of):
        self.cluster, self.workload, self.cfg, self.keys = cluster, workload, cfg, keys
        self.genomes, self.orders = np.asarray(genomes, np.float32), orders
        self.variants_of, self.need_of = variants_of, need_of  # cands [P*C, T] -> RowVariants / tasks needed
        self.packings = 0

    def __call__(self, cands: np.ndarray) -> np.ndarray:
        """cands i64[P, T, C] -> bool[P, T, C]."""
        P, T, C = cands.shape
        rows = np.ascontiguousarray(cands.transpose(0, 2, 1).reshape(P * C, T))  # rows policy-major
        cfg = dataclasses.replace(self.cfg, policies=tuple(p for p in self.cfg.policies for _ in range(C)))
        state = pack(self.cluster, self.workload, cfg, self.keys, genomes=np.repeat(self.genomes, C, axis=0),
                     orders=self.orders, variants=self.variants_of(rows))
        self.packings += P * C * T
        ok = np.sum(state.placement >= 0, axis=-1) == self.need_of(rows)
        return ok.reshape(P, C, T).transpose(0, 2, 1)


def _searches(evaluate: _Batch, lo, hi, find, depth, shape, progress, known_false=None):
    """bisect over B = P x T searches with candidates reshaped for `evaluate`;
    known_false(cands i64[P, T, C]) -> bool[P, T, C] as bisect's, or None."""
    P, T = shape
    ev = lambda cands, needed: evaluate(cands.reshape(P, T, -1)).reshape(P * T, -1)
    kf = None if known_false is None else (lambda cands: known_false(cands.reshape(P, T, -1)).reshape(P * T, -1))
    return bisect(lo.reshape(-1), hi.reshape(-1), ev, find, depth, progress, kf).reshape(P, T)


def _totals(a) -> np.ndarray:
    """Per-dimension totals of an [n, R] array, in float64."""
    return np.sum(np.asarray(a, np.float64), axis=0)


COMPACTION_CEILING = "does not pack 100% even on all machines"
INFLATION_FLOOR = "; 0 where even lambda = 0.005 does not pack"
SCALE_CEILING = "capped by the largest task on the largest machine"


def _prefix_overflows(cluster: Cluster, workload: Workload, rank: np.ndarray):
    """too_few(L i64[P, T, C]) -> bool[...]: the workload surely overflows trial t's first L machines."""
    cap = np.asarray(cluster.capacity, np.float64)
    held = np.cumsum(cap[np.argsort(rank, axis=1)], axis=1)  # held[t, L - 1]: total capacity of trial t's first L
    demand, cap_max, T = _totals(workload.demand), float(np.max(cap, initial=0.0)), rank.shape[0]
    return lambda L: overflows(demand, held[np.arange(T)[None, :, None], L - 1], L, workload.num_tasks, cap_max)


def _scale_overflows(cluster: Cluster, workload: Workload):
    """too_big(k i64[...]) -> bool[...]: every demand times k / 200 surely overflows the cluster."""
    demand, held = _totals(workload.demand), _totals(cluster.capacity)
    cap_max = float(np.max(np.asarray(cluster.capacity, np.float64), initial=0.0))
    # The packing scales each float32 demand by the float32 multiplier.
    return lambda k: overflows(demand * (k / STEPS_PER_UNIT).astype(np.float32)[..., None], held,
                               cluster.num_machines, workload.num_tasks, cap_max)


def compaction(cluster: Cluster, workload: Workload, cfg: PackConfig, keys: jax.Array, genomes,
               packs_full: np.ndarray, depth: int = 1, orders=None,
               progress: Callable[[int], None] | None = None) -> SearchResult:
    """Compaction of every (policy row, trial), by batched binary search.

    Args:
        cluster: the machines.
        workload: the tasks.
        cfg: the packing of each row.
        keys: the T trial keys (each trial's machine order and task order).
        genomes: f32[P, 8] for `family` rows.
        packs_full: bool[P, T], all tasks placed on the whole cluster (else the value is 1.0).
        depth: binary-search levels per batched round.
        orders: i32[T, N] task orders (default: each trial's shuffle).
        progress: progress(round) after each round.

    Returns:
        The SearchResult: values f64[P, T] (share of machines) and which sit at a ceiling.
    """
    M, N = cluster.num_machines, workload.num_tasks
    P, T = len(cfg.policies), int(keys.shape[0])
    rank = machine_ranks(keys, M)
    live = np.flatnonzero(np.any(packs_full, axis=1))  # policies with something to search
    prefix = np.full((P, T), M, np.int64)
    packings = 0
    if live.size:
        sub = dataclasses.replace(cfg, policies=tuple(cfg.policies[p] for p in live))
        evaluate = _Batch(cluster, workload, sub, keys, np.asarray(genomes)[live], orders,
                          lambda rows: RowVariants(machine_rank=rank, prefix=rows), lambda rows: N)
        lo = np.where(packs_full[live], 1, M)
        too_few = _prefix_overflows(cluster, workload, rank)
        prefix[live] = _searches(evaluate, lo, np.full_like(lo, M), "first", depth, (live.size, T), progress,
                                 too_few)
        packings = evaluate.packings
    return SearchResult(value=np.where(packs_full, prefix / M, 1.0), ceiling=~packs_full,
                        reason=COMPACTION_CEILING, packings=packings)


def scale_cap(cluster: Cluster, workload: Workload) -> float:
    """The largest scale-mode multiplier: largest capacity / largest demand, binding dimension."""
    top_c = np.max(np.asarray(cluster.capacity, np.float64), axis=0)
    top_d = np.max(np.asarray(workload.demand, np.float64), axis=0)
    ratio = np.where(top_d > 0, top_c / np.where(top_d > 0, top_d, 1.0), np.inf)
    return float(np.min(ratio))


def clone_cap(cluster: Cluster, workload: Workload) -> float:
    """The largest clone-mode multiplier: total capacity / total demand, binding dimension."""
    cap, dem = _totals(cluster.capacity), _totals(workload.demand)
    return float(np.min(np.where(dem > 0, cap / np.where(dem > 0, dem, 1.0), np.inf)))


def _max_steps(cap: float) -> int:
    if not np.isfinite(cap):
        raise InputError("inflation is unbounded: the workload demands nothing")
    return max(1, int(np.floor(cap * STEPS_PER_UNIT + 1e-9)))


def clone_workload(workload: Workload, keys: jax.Array, steps: int) -> Workload:
    """The originals followed by copies drawn with replacement, floor(steps / 200 x N) tasks in all."""
    N = workload.num_tasks
    total = max(N, steps * N // STEPS_PER_UNIT)
    key = jax.random.fold_in(keys[0], STREAM_CLONE_DRAWS)
    extra = np.asarray(jax.random.randint(key, (total - N,), 0, N))
    return workload.take(np.concatenate([np.arange(N), extra]))


def inflation(cluster: Cluster, workload: Workload, cfg: PackConfig, keys: jax.Array, genomes,
              mode: str = "scale", depth: int = 1,
              progress: Callable[[int], None] | None = None) -> SearchResult:
    """Inflation of every (policy row, trial), by batched binary search.

    Args:
        cluster: the machines.
        workload: the tasks.
        cfg: the packing of each row.
        keys: the T trial keys.
        genomes: f32[P, 8] for `family` rows.
        mode: "scale" (every demand times the multiplier) or "clone" (copies of tasks added).
        depth: binary-search levels per batched round.
        progress: progress(round) after each round.

    Returns:
        The SearchResult: values f64[P, T] (the multiplier) and which sit at a ceiling.
    """
    if mode not in INFLATE_MODES:
        raise InputError(f"inflate mode must be one of {', '.join(INFLATE_MODES)}, got {mode!r}")
    N = workload.num_tasks
    P, T = len(cfg.policies), int(keys.shape[0])
    held = _totals(cluster.capacity)
    cap_max = float(np.max(np.asarray(cluster.capacity, np.float64), initial=0.0))
    M = cluster.num_machines
    if mode == "scale":
        K = _max_steps(scale_cap(cluster, workload))
        wl, orders = workload, None
        variants = lambda rows: RowVariants(demand_scale=(rows / STEPS_PER_UNIT).astype(np.float32))
        need = lambda rows: N
        too_big = _scale_overflows(cluster, workload)
        smallest_packs = _smallest_scale_packs(cluster, workload)
        reason = SCALE_CEILING
    else:
        K = _max_steps(clone_cap(cluster, workload))
        wl = clone_workload(workload, keys, K)
        orders = np.asarray(rng.trial_permutations(keys, wl.num_tasks, rng.STREAM_CLONE_ORDER))
        variants = lambda rows: RowVariants(task_limit=rows * N // STEPS_PER_UNIT)
        need = lambda rows: rows * N // STEPS_PER_UNIT
        # demand_upto[n]: total demand of the clone workload's first n tasks, the ones a row packs.
        demand_upto = np.concatenate([np.zeros((1, cluster.num_resources)),
                                      np.cumsum(np.asarray(wl.demand, np.float64), axis=0)])
        too_big = lambda k: overflows(demand_upto[k * N // STEPS_PER_UNIT], held, M, wl.num_tasks, cap_max)
        n1 = N // STEPS_PER_UNIT  # the tasks lambda = 0.005 packs
        smallest_packs = surely_packs(cluster.capacity, demand_upto[n1],
                                      np.max(np.asarray(wl.demand[:n1], np.float64), axis=0, initial=0.0))
        reason = "capped where total demand would exceed total capacity"
    evaluate = _Batch(cluster, wl, cfg, keys, genomes, orders, variants, need)
    # The bounds first, in one packing: the cap itself (unless it overflows), and the smallest multiplier
    # (unless it surely packs).
    at_cap, at_floor = _inflation_bounds(evaluate, too_big, smallest_packs, K, (P, T))
    # As the sequential search: the cap if it packs, else 0 if the smallest does not, else bisect [1, K-1].
    searched = ~at_cap & ~at_floor
    lo = np.where(at_cap, K, 1)
    steps = _searches(evaluate, lo, np.where(searched, K - 1, lo), "last", depth, (P, T), progress, too_big)
    value = np.where(at_cap | searched, steps / STEPS_PER_UNIT, 0.0)
    return SearchResult(value=value, ceiling=at_cap | at_floor,
                        reason=reason + INFLATION_FLOOR, packings=evaluate.packings)


def _smallest_scale_packs(cluster: Cluster, workload: Workload) -> bool:
    """Whether every demand times lambda = 0.005 surely packs (`surely_packs`), as the packing scales them."""
    scaled = np.asarray(workload.demand, np.float32) * np.float32(1 / STEPS_PER_UNIT)
    return surely_packs(cluster.capacity, _totals(scaled), np.max(scaled, axis=0, initial=0.0))


def _inflation_bounds(packs_at, too_big, smallest_packs: bool, K: int, shape):
    """(at_cap, at_floor) bool[P, T] of the inflation searches: the cap K packs; even k = 1 fails.
    packs_at(ks i64[P, T, C]) -> bool[P, T, C] packs the multipliers ks in one packing; a
    multiplier that surely overflows (too_big) or surely packs (smallest_packs, for k = 1)
    is not packed."""
    cap_over = bool(too_big(np.int64(K)))
    ks = ([] if cap_over else [K]) + ([] if smallest_packs else [1])
    got = packs_at(np.broadcast_to(np.array(ks, np.int64), (*shape, len(ks))).copy()) if ks else None
    at_cap = np.zeros(shape, bool) if cap_over else got[..., 0]
    at_floor = np.zeros(shape, bool) if smallest_packs else ~got[..., -1]
    return at_cap, at_floor


def compaction_and_inflation(cluster: Cluster, workload: Workload, cfg: PackConfig, keys: jax.Array, genomes,
                             packs_full: np.ndarray, depth: int = 1,
                             progress: Callable[[int], None] | None = None) -> tuple[SearchResult, SearchResult]:
    """`compaction` and scale-mode `inflation` of every (policy row, trial), the same answers, their
    searches advanced together: each round packs both searches' candidates in one packing.

    A packing of twice the rows costs less than two (the per-step work of a policy is
    shared by more rows). A round leaves out a metric's rows when none of its candidates
    is needed (all known to fail, or its searches are done).
    """
    M, N = cluster.num_machines, workload.num_tasks
    P, T = len(cfg.policies), int(keys.shape[0])
    genomes = np.asarray(genomes, np.float32)
    rank = machine_ranks(keys, M)
    too_few, too_big = _prefix_overflows(cluster, workload, rank), _scale_overflows(cluster, workload)
    K = _max_steps(scale_cap(cluster, workload))
    live = np.flatnonzero(np.any(packs_full, axis=1))  # policies whose compaction has something to search
    packings = {"compaction": 0, "inflation": 0}

    def packs(comp, infl, kinds):
        """Whether each candidate of the given kinds packs all tasks: {kind: bool[P, T, C]}.

        comp, infl i64[P, T, C]: prefix lengths and multipliers (steps); a compaction row packs
        its prefix at scale 1, an inflation row the whole cluster at its multiplier. Rows are
        policy-major, so that each policy's rows are one group of the packing.
        """
        rows = [(p, kind, c) for p in range(P) for kind in kinds if kind == "inflation" or p in live
                for c in range((comp if kind == "compaction" else infl).shape[2])]
        out = {kind: np.zeros((P, T, (comp if kind == "compaction" else infl).shape[2]), bool) for kind in kinds}
        if not rows:
            return out
        prefix = np.stack([comp[p, :, c] if kind == "compaction" else np.full(T, M) for p, kind, c in rows])
        k = np.stack([infl[p, :, c] if kind == "inflation" else np.full(T, STEPS_PER_UNIT) for p, kind, c in rows])
        state = pack(cluster, workload, dataclasses.replace(cfg, policies=tuple(cfg.policies[p] for p, _, _ in rows)),
                     keys, genomes=genomes[[p for p, _, _ in rows]],
                     variants=RowVariants(machine_rank=rank, prefix=prefix,
                                          demand_scale=(k / STEPS_PER_UNIT).astype(np.float32)))
        ok = np.sum(state.placement >= 0, axis=-1) == N
        for i, (p, kind, c) in enumerate(rows):
            out[kind][p, :, c] = ok[i]
            packings[kind] += T
        return out

    # Inflation's bounds first, as `inflation` does: the cap itself (unless it overflows), and k = 1
    # (unless it surely packs).
    at_cap, at_floor = _inflation_bounds(lambda ks: packs(None, ks, ["inflation"])["inflation"],
                                         too_big, _smallest_scale_packs(cluster, workload), K, (P, T))
    searched = ~at_cap & ~at_floor
    lo_i = np.where(at_cap, K, 1)
    hi_i = np.where(searched, K - 1, lo_i)
    lo_c = np.where(packs_full, 1, M)
    hi_c = np.full((P, T), M)

    B = P * T
    lo = np.concatenate([lo_c.reshape(-1), lo_i.reshape(-1)])
    hi = np.concatenate([hi_c.reshape(-1), hi_i.reshape(-1)])
    find = np.array(["first"] * B + ["last"] * B)

    def known_false(cands):
        C = cands.shape[1]
        return np.concatenate([too_few(cands[:B].reshape(P, T, C)).reshape(B, C),
                               too_big(cands[B:].reshape(P, T, C)).reshape(B, C)])

    def evaluate(cands, needed):
        C = cands.shape[1]
        kinds = [kind for kind, half in (("compaction", needed[:B]), ("inflation", needed[B:])) if np.any(half)]
        got = packs(cands[:B].reshape(P, T, C), cands[B:].reshape(P, T, C), kinds)
        return np.concatenate([got.get(kind, np.zeros((P, T, C), bool)).reshape(B, C)
                               for kind in ("compaction", "inflation")])

    steps = bisect(lo, hi, evaluate, find, depth, progress, known_false)
    prefix, k = steps[:B].reshape(P, T), steps[B:].reshape(P, T)
    comp = SearchResult(value=np.where(packs_full, prefix / M, 1.0), ceiling=~packs_full,
                        reason=COMPACTION_CEILING, packings=packings["compaction"])
    infl = SearchResult(value=np.where(at_cap | searched, k / STEPS_PER_UNIT, 0.0), ceiling=at_cap | at_floor,
                        reason=SCALE_CEILING + INFLATION_FLOOR, packings=packings["inflation"])
    return comp, infl
