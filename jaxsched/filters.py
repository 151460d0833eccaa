"""Workload filters and snapshot instants (docs/traces.md).

Filters compose in a fixed order: days, then min_priority, then max_task_dim, then
max_tasks. A snapshot is the set of tasks alive at an instant t, alive meaning
arrival <= t < arrival + duration; the busiest instant is the earliest instant at
which the most tasks are alive.
"""

from __future__ import annotations

import dataclasses

import numpy as np

from .errors import InputError
from .types import Workload

DAY_S = 86_400.0


class NoTaskAlive(InputError):
    """The snapshot instant has no task alive (the CLI blames --at)."""


@dataclasses.dataclass(frozen=True)
class Filters:
    """Which tasks of a workload to keep; None leaves that filter off."""

    days: float | None = None  # arrivals before window start + days x 86,400 s
    min_priority: int | None = None  # priority >= this (9 = production and monitoring)
    max_task_dim: float | None = None  # drop tasks with any request > this ("whales")
    max_tasks: int | None = None  # then keep the first this many by arrival

    def active(self) -> dict:
        """The filters that are on, by name."""
        return {k: v for k, v in dataclasses.asdict(self).items() if v is not None}


def apply_filters(workload: Workload, filters: Filters, window_start: float = 0.0
                  ) -> tuple[np.ndarray, dict[str, int]]:
    """Indices of the tasks kept (ascending) and, per active filter, how many it dropped.

    Args:
        workload: the trace's tasks.
        filters: the filters, applied in the order days, min_priority, max_task_dim, max_tasks.
        window_start: the trace window's start in seconds (`days` counts from it).

    Returns:
        (indices i64[K] of the tasks kept, {filter: tasks it dropped}).
    """
    keep = np.ones(workload.num_tasks, bool)
    dropped: dict[str, int] = {}

    def drop(name, mask):
        dropped[name] = int(np.sum(keep & ~mask))
        keep[:] &= mask

    arrival = np.asarray(workload.arrival, np.float64)
    if filters.days is not None:
        if not filters.days > 0:
            raise InputError(f"days must be > 0, got {filters.days}")
        drop("days", arrival < window_start + filters.days * DAY_S)
    if filters.min_priority is not None:
        drop("min_priority", np.asarray(workload.priority) >= filters.min_priority)
    if filters.max_task_dim is not None:
        if not filters.max_task_dim > 0:
            raise InputError(f"max_task_dim must be > 0, got {filters.max_task_dim}")
        drop("max_task_dim", np.all(np.asarray(workload.demand) <= filters.max_task_dim, axis=1))
    index = np.flatnonzero(keep)
    if filters.max_tasks is not None:
        if filters.max_tasks < 1:
            raise InputError(f"max_tasks must be >= 1, got {filters.max_tasks}")
        first = np.sort(index[np.argsort(arrival[index], kind="stable")[: filters.max_tasks]])
        dropped["max_tasks"] = int(index.size - first.size)
        index = first
    return index, dropped


def alive_at(workload: Workload, t: float) -> np.ndarray:
    """bool[N]: the tasks alive at instant t (arrival <= t < arrival + duration)."""
    arrival = np.asarray(workload.arrival, np.float64)
    return (arrival <= t) & (t < arrival + np.asarray(workload.duration, np.float64))


def busiest_instant(workload: Workload, within: tuple[float, float] | None = None) -> tuple[float, int]:
    """(earliest instant with the most alive tasks, that number of tasks).

    within=(lo, hi): only instants lo <= t < hi are candidates.
    """
    arrival = np.asarray(workload.arrival, np.float64)
    end = arrival + np.asarray(workload.duration, np.float64)
    live = end > arrival  # a zero-length task is never alive
    if not np.any(live):
        raise InputError("no task has a positive duration, so no task is ever alive")
    times = np.concatenate([end[live], arrival[live]])
    steps = np.concatenate([np.full(live.sum(), -1), np.full(live.sum(), 1)])
    order = np.lexsort((steps, times))  # at equal times, ends (-1) before arrivals: alive is half-open
    times, alive = times[order], np.cumsum(steps[order])
    if within is None:
        best = int(np.argmax(alive))
        return float(times[best]), int(alive[best])
    lo, hi = within
    if not lo < hi:
        raise InputError(f"empty time range [{lo:g}, {hi:g})")
    at_lo = int(np.sum(alive_at(workload, lo)))
    inside = np.flatnonzero((times > lo) & (times < hi))
    if inside.size == 0 or at_lo >= alive[inside].max():
        return float(lo), at_lo
    best = int(inside[np.argmax(alive[inside])])
    return float(times[best]), int(alive[best])


def snapshot_tasks(workload: Workload, filters: Filters, window_start: float = 0.0,
                   at: float | str = "busiest", within: tuple[float, float] | None = None
                   ) -> tuple[np.ndarray, dict]:
    """Indices of the filtered tasks in the snapshot, and what was chosen.

    Args:
        workload: the trace's tasks.
        filters: applied first (`apply_filters`).
        window_start: the trace window's start in seconds.
        at: "busiest" (the busiest instant, among lo <= t < hi if `within` is given), "all"
            (every filtered task, whatever its times: the whole list at once), or an instant
            in seconds.
        within: (lo, hi) seconds to look for the busiest instant in.

    Returns:
        (indices of the snapshot's tasks, a JSON-ready record of the instant and the filters).

    Raises:
        InputError: no task left by the filters; NoTaskAlive (an InputError): none alive at the instant.
    """
    index, dropped = apply_filters(workload, filters, window_start)
    if index.size == 0:
        raise InputError(f"the filters {filters.active()} leave no task")
    info = {"filters": filters.active(), "dropped": dropped, "tasks_after_filters": int(index.size)}
    if at == "all":
        return index, dict(info, instant="all", alive_tasks=int(index.size))
    kept = workload.take(index)
    if at == "busiest":
        t, _ = busiest_instant(kept, within)
    elif isinstance(at, (int, float)) and not isinstance(at, bool):
        t = float(at)
    else:
        raise InputError(f"snapshot instant must be 'busiest', 'all' or a time in seconds, got {at!r}")
    alive = alive_at(kept, t)
    if not np.any(alive):
        start, end = float(np.min(kept.arrival)), float(np.max(kept.arrival + kept.duration))
        raise NoTaskAlive(f"no task is alive at t = {t:g} s: the filtered tasks run between {start:g} and {end:g} s "
                         "from the trace start")
    out = dict(info, instant="busiest" if at == "busiest" else "given", instant_s=t, alive_tasks=int(alive.sum()))
    if within is not None and at == "busiest":
        out["within_s"] = [float(within[0]), float(within[1])]
    return index[alive], out
