"""CvxCluster rows of an event replay: allocation rounds on the event clock.

A CvxCluster row replays the same tasks, arrival and duration ticks as the scoring rows
(`inputs.prepare`) but places them in rounds (docs/event.md, "CvxCluster rows"):

- Rounds fall on the grid t0 + k * round_ticks, t0 the first arrival's tick. At a grid
  point t, every running task whose end tick is <= t ends (its resources and its
  anti-affinity slot come free), every task that arrived at or before t joins the queue,
  and a round allocates; what it places starts at t and ends its duration later.
- A round's candidates: for each class of queued tasks (one demand, one utility, one
  anti-affinity group), its earliest arrivals, as many as copies of its demand fit the
  free capacity server by server at t (a grouped class: at most group_limit less its running
  members per server). A task that no server can hold at t cannot be placed whatever the
  prices, and in the aggregated LP it would claim scraps of capacity that no server holds
  whole. A grid point without candidates runs no round.
- The round is CvxCluster (`jaxsched.cvx`) on the candidates and the free capacity:
  stage 1 warm-started from the previous round's prices, stage 2 keyed by the row's key
  and the round's number, u_i by priority band (the row's band weights). Candidates it
  does not place stay queued. Nothing is ever evicted, with --preempt too.
- The row ends when nothing is queued and nothing is left to arrive, or when tasks are
  queued while nothing runs and nothing is left to arrive (they are never placed).

Why counting copies only where tasks ended is exact: after a round, no queued class fits
any server (a candidate left unplaced fit nowhere at its turn, and free capacity only
shrinks within a round; a class whose candidates were all placed used up every copy it
had). So at the next grid point a queued class can fit only on servers where tasks ended
in between; a class with nothing queued is counted on every server.
"""

from __future__ import annotations

import collections
import dataclasses
import heapq
import time
from typing import Callable

import jax
import numpy as np

from .. import interrupt
from ..cvx.greedy import group_sizes, pow2
from ..cvx.online import allocate_round
from ..cvx.prices import PriceConfig
from ..cvx.problem import aggregate, anti_affinity_groups, band_weights, make_problem
from ..errors import InputError
from ..types import Cluster, Workload
from .inputs import EventInputs, demand_classes
from .state import S_TASK

METHOD = "cvxcluster"
EXPERIMENT = "event/cvxcluster"
FIT_TOL = 1e-6  # the greedy's feasibility tolerance, in the copy count
COUNT_CHUNK = 1 << 22  # class x server entries per block of the copy count


@dataclasses.dataclass(frozen=True)
class RoundLog:
    """The rounds of one CvxCluster row."""

    tick: np.ndarray  # i64[rounds], grid point of each round
    candidates: np.ndarray  # i32[rounds]
    placed: np.ndarray  # i32[rounds]
    queued: np.ndarray  # i32[rounds], tasks queued at the round (after arrivals)
    seconds: np.ndarray  # f64[rounds], wall time of stage 1 + stage 2
    compiled: np.ndarray  # bool[rounds], the round compiled a program (left out of the timings)

    def figures(self) -> dict:
        """What a seed determines: rounds run, candidates per round (mean, max)."""
        n = len(self.tick)
        return {"rounds": int(n), "candidates_mean": float(self.candidates.mean()) if n else 0.0,
                "candidates_max": int(self.candidates.max()) if n else 0}

    def timing(self) -> dict:
        """Wall-clock figures: tasks placed per second of allocation, round time mean / p99 / max
        (rounds that compiled a program left out, and counted), seconds allocating."""
        steady = ~self.compiled
        sec = self.seconds[steady]
        busy = float(sec.sum())
        return {
            "tasks_per_s": float(self.placed[steady].sum() / busy) if busy > 0 else float("nan"),
            "round_s_mean": float(sec.mean()) if sec.size else float("nan"),
            "round_s_p99": float(np.percentile(sec, 99)) if sec.size else float("nan"),
            "round_s_max": float(sec.max()) if sec.size else float("nan"),
            "compile_rounds": int(self.compiled.sum()), "allocation_s": float(self.seconds.sum()),
        }


@dataclasses.dataclass(frozen=True)
class RoundRow:
    """One CvxCluster row: its run segments and first starts (the scoring rows' form) and its rounds."""

    segments: np.ndarray  # i64[S, 4] (workload task, machine, start tick, end tick), in start order
    first_start: np.ndarray  # i64[N] by workload task, -1 never placed
    log: RoundLog


def check_settings(round_s: float, weightings, tick_s: float | None = None) -> None:
    """Raise InputError for a round that is not > 0 (or shorter than the replay's tick) or a
    weighting that is not 3 numbers >= 0, not all 0."""
    if not (np.isfinite(round_s) and round_s > 0):
        raise InputError(f"cvx_round_s must be > 0, got {round_s}")
    if tick_s is not None and round(round_s / tick_s) < 1:
        raise InputError(f"cvx_round_s {round_s:g} is shorter than the replay's tick ({tick_s:g} s)")
    for w in weightings:
        w = tuple(w)
        if len(w) != 3 or not all(np.isfinite(x) and x >= 0 for x in w) or not any(x > 0 for x in w):
            raise InputError(f"band weights must be 3 numbers >= 0 (free, middle, production), not all 0; "
                             f"got {','.join(f'{x:g}' for x in w)}")


def row_name(weights, several: bool) -> str:
    """The name of a CvxCluster row: 'cvxcluster', or with several weightings 'cvxcluster_w1-4-16'."""
    return f"{METHOD}_w{'-'.join(f'{x:g}' for x in weights)}" if several else METHOD


def copies(demand: np.ndarray, free: np.ndarray) -> np.ndarray:
    """i64[C, S]: copies of each class's demand (f64[C, R]) that fit each server's free f64[S, R]
    on its own: the least over resources with d_r > 0 of floor((free_r + FIT_TOL) / d_r), at
    least 0 (a zero demand: 2^31)."""
    C, S = demand.shape[0], free.shape[0]
    out = np.empty((C, S), np.int64)
    step = max(1, COUNT_CHUNK // max(S * demand.shape[1], 1))
    for lo in range(0, C, step):
        d = demand[lo:lo + step, None, :]
        with np.errstate(divide="ignore", invalid="ignore"):
            q = np.where(d > 0, np.floor((free[None, :, :] + FIT_TOL) / np.where(d > 0, d, 1.0)), np.inf)
        out[lo:lo + step] = np.clip(q.min(axis=2), 0, 2**31)
    return out


def replay_rounds(cluster: Cluster, workload: Workload, inputs: EventInputs, weights, key: jax.Array,
                  round_s: float = 1.0, cfg: PriceConfig = PriceConfig(),
                  progress: Callable[[int, int], None] | None = None,
                  record: Callable[[dict], None] | None = None) -> RoundRow:
    """Replay `inputs` through CvxCluster rounds every `round_s` simulated seconds.

    Args:
        cluster: the machines (one machine type; GPUs are a resource).
        workload: the tasks (priorities, jobs and the different-machines flag).
        inputs: `workload` prepared for replay (its tasks in arrival order, ticks).
        weights: utility of the free, middle and production bands.
        key: the row's key (rounds fold in their number).
        round_s: simulated seconds between grid points.
        cfg: stage 1's settings.
        progress: progress(arrived + finished, 2 N) at grid points.
        record: record(round) with each round's tick, candidates (task numbers), placement, prices
            and stage-1 steps.

    Returns:
        The RoundRow: run segments, first starts and the rounds' log.

    Raises:
        InputError: a round shorter than one tick, or bad band weights.
    """
    check_settings(round_s, [weights], inputs.tick_s)
    step = int(round(round_s / inputs.tick_s))
    N = inputs.num_tasks
    cap = np.asarray(cluster.capacity, np.float32)
    M, R = cap.shape
    order = inputs.order
    demand = inputs.demand.astype(np.float64)
    weight = band_weights(np.asarray(workload.priority)[order], tuple(weights))
    group = anti_affinity_groups(workload)[order]
    # Classes: one demand, one utility, one group (the weight's bits label it exactly).
    labels = np.stack([weight.astype(np.float32).view(np.int32), group], 1)
    cls, class_demand = demand_classes(inputs.demand, labels)
    class_demand = class_demand.astype(np.float64)
    class_group = np.empty(len(class_demand), np.int32)
    class_group[cls] = group
    base = make_problem(cap, inputs.demand, weight=weight, group=group, resources=cluster.resources)
    G = base.num_groups
    shapes = aggregate(base)
    sizes = group_sizes(base)  # every round's members are among the whole replay's
    window = pow2(max(int(sizes.max(initial=0)), 1))
    min_slots = pow2(int(sizes.sum()) + window + 1)
    limit = base.group_limit

    free = cap.astype(np.float64)
    held = np.zeros((G, M), np.int32)  # running members of each group on each server
    queues = [collections.deque() for _ in range(len(class_demand))]
    queued = set()  # classes with queued tasks, none of which fits any server (the invariant)
    fresh = set()  # classes that became non-empty since the last grid point
    touched = set()  # servers where tasks ended since the last grid point
    running: list[tuple[int, int]] = []  # heap of (end tick, task)
    start = np.full(N, -1, np.int64)
    server = np.full(N, -1, np.int64)
    seg = []
    log = collections.defaultdict(list)
    warm = None
    finished = nxt = n_queued = 0
    t = int(inputs.arrival[0]) if N else 0
    t0 = t
    while N:
        interrupt.checkpoint()
        while running and running[0][0] <= t:
            _, task = heapq.heappop(running)
            j = int(server[task])
            free[j] += demand[task]
            if group[task] >= 0:
                held[group[task], j] -= 1
            touched.add(j)
            finished += 1
        hi = int(np.searchsorted(inputs.arrival, t, side="right"))
        for task in range(nxt, hi):
            c = int(cls[task])
            if not queues[c] and c not in fresh:
                fresh.add(c)
            queues[c].append(task)
        n_queued += hi - nxt
        nxt = hi
        cand = _candidates(queues, queued, fresh, touched, class_demand, class_group, free, held, limit)
        for c in fresh:
            queued.add(c)
        fresh.clear()
        touched.clear()
        if cand.size:
            gids = np.unique(group[cand][group[cand] >= 0])  # running members of the candidates' groups
            sub = held[gids]
            pairs = np.argwhere(sub > 0)
            count = sub[pairs[:, 0], pairs[:, 1]]
            hg = np.repeat(gids[pairs[:, 0]], count).astype(np.int32)
            hs = np.repeat(pairs[:, 1], count).astype(np.int32)
            now = dataclasses.replace(base, free=free.astype(np.float32), held_group=hg, held_server=hs)
            k = len(log["tick"])
            placement, prices, seconds, compiled = allocate_round(now, cand, shapes, cfg, warm,
                                                                  jax.random.fold_in(key, k), window, min_slots)
            warm = prices.theta
            ok = placement >= 0
            if record is not None:
                record({"tick": t, "candidates": cand.copy(), "placement": placement.copy(),
                        "lam": np.asarray(prices.lam), "mu": np.asarray(prices.mu),
                        "iterations": int(prices.iterations)})
            for task, j in zip(cand[ok], placement[ok]):
                free[j] -= demand[task]
                if group[task] >= 0:
                    held[group[task], j] += 1
                server[task] = j
                start[task] = t
                heapq.heappush(running, (t + int(inputs.duration[task]), int(task)))
                seg.append((task, j, t, t + int(inputs.duration[task])))
                c = int(cls[task])
                if queues[c][0] == task:
                    queues[c].popleft()
                else:  # an earlier candidate of its class stayed queued (its group was full)
                    queues[c].remove(task)
                if not queues[c]:
                    queued.discard(c)
            n_placed = int(ok.sum())
            for name, v in (("tick", t), ("candidates", cand.size), ("placed", n_placed), ("queued", n_queued),
                            ("seconds", seconds), ("compiled", compiled)):
                log[name].append(v)
            n_queued -= n_placed
        if progress is not None:
            progress(nxt + finished, 2 * N)
        upcoming = [int(inputs.arrival[nxt])] if nxt < N else []
        if n_queued and running:
            upcoming.append(running[0][0])
        if not upcoming:
            break
        t = max(t + step, t0 + step * -(-(min(upcoming) - t0) // step))  # the next grid point due
    first = np.full(N, -1, np.int64)
    first[order] = start
    segments = np.asarray(seg, np.int64).reshape(-1, 4)
    if len(segments):
        segments[:, S_TASK] = order[segments[:, S_TASK]]
    rl = RoundLog(tick=np.asarray(log["tick"], np.int64), candidates=np.asarray(log["candidates"], np.int32),
                  placed=np.asarray(log["placed"], np.int32), queued=np.asarray(log["queued"], np.int32),
                  seconds=np.asarray(log["seconds"], np.float64), compiled=np.asarray(log["compiled"], bool))
    return RoundRow(segments=segments, first_start=first, log=rl)


def _candidates(queues, queued, fresh, touched, class_demand, class_group, free, held, limit) -> np.ndarray:
    """Task numbers of a round's candidates, ascending: per class, its earliest queued tasks, as many
    as copies of its demand fit (queued classes counted on the touched servers, fresh ones on all)."""
    out = []
    for classes, servers in ((sorted(queued), sorted(touched)), (sorted(fresh), None)):
        if not classes or (servers is not None and not servers):
            continue
        cs = np.asarray(classes, np.int64)
        sv = np.arange(free.shape[0]) if servers is None else np.asarray(servers, np.int64)
        n = copies(class_demand[cs], free[sv])
        g = class_group[cs]
        grouped = np.flatnonzero(g >= 0)
        if grouped.size:
            n[grouped] = np.minimum(n[grouped], limit - held[g[grouped]][:, sv])
        total = np.clip(n, 0, None).sum(axis=1)
        for c, k in zip(cs[total > 0], total[total > 0]):
            q = queues[c]
            out.extend(q[x] for x in range(min(int(k), len(q))))
    return np.sort(np.asarray(out, np.int64))
