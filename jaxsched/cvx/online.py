"""CvxCluster online: rounds of allocation over an arriving task queue.

Arrivals are compressed by the arrival-rate multiplier (arrival / multiplier; durations
unchanged, so the offered load grows with it). Rounds fall on a grid of `round_s`
simulated seconds from the first arrival, skipping grid points where nothing arrived
and (with a queue) nothing ended: tasks that ended release their resources, the arrivals
since the last round join the FIFO queue, and CvxCluster allocates the whole queue on
the free capacity (prices warm-started from the previous round); what it cannot place
stays queued. Each round's wall time (stage 1 + stage 2) is measured. Round inputs are
padded to a power of two of tasks (at least 64) so that the compiled stages are reused;
rounds that still compiled something are flagged and left out of the timings.
"""

from __future__ import annotations

import dataclasses
import time
from typing import Callable

import jax
import numpy as np

from ..errors import InputError
from .. import rng
from .allocation import EXPERIMENT
from .greedy import group_sizes, place, pow2
from .prices import PriceConfig, price_inputs, solve_prices
from .problem import CvxProblem, aggregate

MIN_BUCKET = 64
UNRUNNABLE_TYPE = 2**30  # machine type of padding tasks: allowed nowhere


@dataclasses.dataclass(frozen=True)
class OnlineResult:
    """Per-round records and totals of an online run."""

    rate_multiplier: float
    round_s: float
    rounds: int
    queue: np.ndarray  # i32[rounds], queue length at the start of each round (after arrivals)
    placed: np.ndarray  # i32[rounds], tasks placed in each round
    seconds: np.ndarray  # f64[rounds], wall time of each round's allocation
    compiled: np.ndarray  # bool[rounds], the round compiled a stage (its time includes compilation)
    time_s: np.ndarray  # f64[rounds], simulated time of each round
    start: np.ndarray  # f64[N], simulated start of each task, nan if never placed
    arrival: np.ndarray  # f64[N], compressed arrival
    stop_reason: str

    def summary(self) -> dict:
        """Totals for reports: tasks/s over the allocation wall time, solve times, latency, queue.

        Rounds that compiled a stage (a new padded size) are left out of tasks/s and solve times.
        """
        steady = ~self.compiled
        placed = int(self.placed[steady].sum())
        busy = float(self.seconds[steady].sum())
        lat = (self.start - self.arrival)[np.isfinite(self.start)]
        pct = lambda q: float(np.percentile(lat, q)) if lat.size else float("nan")
        return {
            "rate_multiplier": self.rate_multiplier, "round_s": self.round_s, "rounds": self.rounds,
            "tasks": int(len(self.arrival)), "placed": int(self.placed.sum()),
            "never_placed": int(np.sum(~np.isfinite(self.start))),
            "tasks_per_s": placed / busy if busy > 0 else float("nan"),
            "compile_rounds": int(self.compiled.sum()),
            "solve_s_mean": float(self.seconds[steady].mean()) if steady.any() else float("nan"),
            "solve_s_max": float(self.seconds[steady].max()) if steady.any() else float("nan"),
            "queue_mean": float(self.queue.mean()) if self.rounds else 0.0,
            "queue_max": int(self.queue.max()) if self.rounds else 0,
            "latency_s_p50": pct(50), "latency_s_p99": pct(99), "stop_reason": self.stop_reason,
        }


# JAX reports every lowering of a program to MLIR (on a miss of its in-memory cache of compiled
# programs, before any compilation or persistent-cache read) as this monitoring event.
LOWERING_EVENT = "/jax/core/compile/jaxpr_to_mlir_module_duration"
_lowerings = [0]
_listening = []


def _count(event: str, duration: float, **kwargs) -> None:
    if event == LOWERING_EVENT:
        _lowerings[0] += 1


def _compiled_programs() -> int:
    """How many programs this process has lowered so far (a round that adds one compiled something)."""
    if not _listening:
        jax.monitoring.register_event_duration_secs_listener(_count)
        _listening.append(True)
    return _lowerings[0]


def _bucket(n: int) -> int:
    return max(MIN_BUCKET, pow2(n))


def _padded(problem: CvxProblem, queue: np.ndarray, size: int) -> CvxProblem:
    sub = problem.tasks(queue)
    extra = size - len(queue)
    if extra == 0:
        return sub
    R = problem.demand.shape[1]
    return dataclasses.replace(
        sub, demand=np.concatenate([sub.demand, np.zeros((extra, R), np.float32)]),
        weight=np.concatenate([sub.weight, np.zeros(extra, np.float32)]),
        task_type=np.concatenate([sub.task_type, np.full(extra, UNRUNNABLE_TYPE, np.int32)]),
        group=np.concatenate([sub.group, np.full(extra, -1, np.int32)]))


def allocate_round(problem: CvxProblem, queue: np.ndarray, shapes, cfg: PriceConfig, warm, key, window: int,
                   min_slots: int):
    """One round's allocation of the tasks `queue` on the problem's free capacity, padded to a
    bucket of tasks: (server of each queued task or -1, the round's Prices (their theta
    warm-starts the next round), wall seconds, whether it compiled)."""
    sub = _padded(problem, queue, _bucket(len(queue)))
    compiles = _compiled_programs()
    t0 = time.perf_counter()
    pinp = price_inputs(sub, shapes)
    prices = solve_prices(sub, shapes, cfg, warm, pinp)
    placement, _ = place(sub, shapes, pinp, prices.lam, prices.mu, key, window, min_slots)
    seconds = time.perf_counter() - t0
    return placement[:len(queue)], prices, seconds, _compiled_programs() > compiles


def run_online(problem: CvxProblem, arrival, duration, rate_multiplier: float = 1.0, round_s: float = 1.0,
               seed: int = 1, cfg: PriceConfig = PriceConfig(), max_rounds: int | None = None,
               progress: Callable[[int, int], None] | None = None) -> OnlineResult:
    """Replay `problem`'s tasks arriving at `arrival` (seconds) for `duration` seconds in rounds.

    Args:
        problem: servers and tasks.
        arrival: f64[N] arrival times in seconds (divided by `rate_multiplier`).
        duration: f64[N] run times in seconds.
        rate_multiplier: arrival-rate multiplier.
        round_s: simulated seconds between rounds.
        seed: the run's seed.
        cfg: stage 1's settings.
        max_rounds: stop after this many rounds (said in the result).
        progress: progress(arrived, N) after each round.

    Returns:
        The OnlineResult: per-round queue, placements and times; why the run stopped.

    Raises:
        InputError: a non-positive multiplier or round, or arrays of the wrong length.
    """
    if rate_multiplier <= 0 or round_s <= 0:
        raise InputError("rate_multiplier and round_s must be > 0")
    N = problem.num_tasks
    arrival = np.asarray(arrival, np.float64) / rate_multiplier
    duration = np.asarray(duration, np.float64)
    if arrival.shape != (N,) or duration.shape != (N,):
        raise InputError(f"arrival and duration need {N} entries")
    order = np.argsort(arrival, kind="stable")
    shapes = aggregate(problem)
    # Every round's group members are among the whole problem's: size stage 2's group slots for
    # all of them once, so that only the task count changes the compiled shapes.
    sizes = group_sizes(problem)
    window = pow2(max(int(sizes.max(initial=0)), 1))
    min_slots = pow2(int(sizes.sum()) + window + 1)
    key = rng.trial_keys(seed, EXPERIMENT + "/online", 1)[0]
    free = problem.free.astype(np.float32).copy()
    held = {}  # running grouped task -> (group, server), kept as the problem's held pairs
    start = np.full(N, np.nan)
    server_of = np.full(N, -1, np.int64)
    running_end = np.empty(0)
    running = np.empty(0, np.int64)
    queue = np.empty(0, np.int64)
    nxt = 0
    t = float(arrival[order[0]]) if N else 0.0
    rec_q, rec_p, rec_s, rec_t, rec_c = [], [], [], [], []
    warm = None
    reason = "all tasks placed"
    while True:
        done = running_end <= t
        if done.any():
            ended = running[done]
            np.add.at(free, server_of[ended], problem.demand[ended])
            for task in ended[problem.group[ended] >= 0]:
                held.pop(int(task))
            running, running_end = running[~done], running_end[~done]
        hi = np.searchsorted(arrival[order], t, side="right")
        queue = np.concatenate([queue, order[nxt:hi]])
        nxt = hi
        if queue.size:
            pairs = np.asarray(list(held.values()), np.int32).reshape(-1, 2)
            now = dataclasses.replace(problem, free=free, held_group=pairs[:, 0], held_server=pairs[:, 1])
            placement, prices, seconds, compiled = allocate_round(now, queue, shapes, cfg, warm,
                                                                  jax.random.fold_in(key, len(rec_q)), window,
                                                                  min_slots)
            warm = prices.theta
            rec_c.append(compiled)
            ok = placement >= 0
            placed = queue[ok]
            server_of[placed] = placement[ok]
            np.subtract.at(free, placement[ok], problem.demand[placed])
            for task, server in zip(placed, placement[ok]):
                if problem.group[task] >= 0:
                    held[int(task)] = (int(problem.group[task]), int(server))
            start[placed] = t
            running = np.concatenate([running, placed])
            running_end = np.concatenate([running_end, t + duration[placed]])
            rec_q.append(len(queue))
            rec_p.append(int(ok.sum()))
            rec_s.append(seconds)
            rec_t.append(t)
            queue = queue[~ok]
            if progress is not None:
                progress(nxt, N)
        if max_rounds is not None and len(rec_q) >= max_rounds:
            reason = f"stopped after max_rounds={max_rounds}"
            break
        upcoming = [arrival[order[nxt]]] if nxt < N else []
        if queue.size and running_end.size:
            upcoming.append(running_end.min())
        if not upcoming:
            reason = "all tasks placed" if not queue.size else f"{len(queue)} queued tasks fit nowhere and nothing is left to end"
            break
        t = t + round_s * max(1.0, np.ceil((min(upcoming) - t) / round_s))  # the next round on the grid
    return OnlineResult(rate_multiplier=float(rate_multiplier), round_s=float(round_s), rounds=len(rec_q),
                        queue=np.asarray(rec_q, np.int32), placed=np.asarray(rec_p, np.int32),
                        seconds=np.asarray(rec_s), compiled=np.asarray(rec_c, bool), time_s=np.asarray(rec_t), start=start, arrival=arrival,
                        stop_reason=reason)
