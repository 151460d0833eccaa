"""A workload prepared for replay: tasks in arrival order, integer ticks, priority bands,
the victim order of preemption and the demand classes of the queue's certificates."""

from __future__ import annotations

import dataclasses

import numpy as np

from ..errors import InputError
from ..types import Workload

INF = 2**31 - 1  # "never": end tick of a task not running
TICK_LIMIT = 2**30
TICKS_S = (1e-3, 1e-2, 1e-1, 1.0)
PRODUCTION = 9  # priority of the production band and up
BANDS = 3  # free (0-1), middle (2-8), production (>= 9)


def band_of(priority: np.ndarray) -> np.ndarray:
    """Band of each priority: 0 free (0-1), 1 middle (2-8), 2 production (>= 9)."""
    p = np.asarray(priority)
    return np.where(p >= PRODUCTION, 2, np.where(p >= 2, 1, 0)).astype(np.int32)


@dataclasses.dataclass(frozen=True)
class EventInputs:
    """A workload prepared for replay: tasks in arrival order, times in ticks."""

    order: np.ndarray  # i64[N]: workload index of task number n
    demand: np.ndarray  # f32[N, R]
    arrival: np.ndarray  # i32[N] ticks
    duration: np.ndarray  # i32[N] ticks
    band: np.ndarray  # i32[N]
    evict_rank: np.ndarray  # i32[N]: place in the victim order, INF where not evictable
    tick_s: float

    @property
    def num_tasks(self) -> int:
        return int(self.demand.shape[0])


def choose_tick(arrival: np.ndarray, duration: np.ndarray) -> float:
    """The finest tick of TICKS_S under which every arrival + duration stays below 2^30 ticks.

    Raises:
        InputError: the workload spans more than 2^30 seconds.
    """
    span = float(np.max(arrival + duration)) if arrival.size else 0.0
    for tick in TICKS_S:
        if span / tick < TICK_LIMIT:
            return tick
    raise InputError(f"the workload spans {span:.0f} s, more than event mode's {TICK_LIMIT} s")


def prepare(workload: Workload, preempt: bool) -> EventInputs:
    """Sort tasks by arrival, convert times to ticks, rank eviction victims.

    Args:
        workload: the tasks, with arrival times and durations in seconds.
        preempt: whether priorities form bands (else every task is in band 0).

    Returns:
        The EventInputs of the replay.

    Raises:
        InputError: a negative or non-finite time, naming the task.
    """
    arrival_s = np.asarray(workload.arrival, np.float64)
    duration_s = np.asarray(workload.duration, np.float64)
    if np.any(~np.isfinite(arrival_s)) or np.any(arrival_s < 0):
        raise InputError(f"task {int(np.argmax(~np.isfinite(arrival_s) | (arrival_s < 0)))} has a bad arrival time")
    if np.any(~np.isfinite(duration_s)) or np.any(duration_s < 0):
        raise InputError(f"task {int(np.argmax(~np.isfinite(duration_s) | (duration_s < 0)))} has a bad duration")
    order = np.argsort(arrival_s, kind="stable")
    tick = choose_tick(arrival_s, duration_s)
    demand = np.asarray(workload.demand, np.float32)[order]
    priority = np.asarray(workload.priority)[order]
    band = band_of(priority) if preempt else np.zeros(len(order), np.int32)
    # Victim order: lowest priority, then largest total demand, then lowest task number.
    size = demand.astype(np.float64).sum(axis=1)
    victims = np.lexsort((np.arange(len(order)), -size, priority))
    rank = np.empty(len(order), np.int64)
    rank[victims] = np.arange(len(order))
    rank = np.where(priority < PRODUCTION, rank, INF).astype(np.int32)
    return EventInputs(
        order=order, demand=demand,
        arrival=np.rint(arrival_s[order] / tick).astype(np.int32),
        duration=np.rint(duration_s[order] / tick).astype(np.int32),
        band=band, evict_rank=rank, tick_s=tick)


def demand_classes(demand: np.ndarray, labels: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The class of each task (i32[N]) and each class's demand (f32[C, R]): tasks of one
    demand and the same labels (i32[N], a band, or i32[N, L]) share a class."""
    demand = np.ascontiguousarray(demand, np.float32)
    key = np.concatenate([demand.view(np.int32), np.asarray(labels, np.int32).reshape(len(demand), -1)], axis=1)
    _, first, cls = np.unique(key, axis=0, return_index=True, return_inverse=True)
    return cls.reshape(-1).astype(np.int32), demand[first]
