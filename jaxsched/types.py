"""The problem's data as frozen pytrees: cluster, workload and packing state.

Array fields are traced leaves; everything else (names, resource labels) is static
metadata, so any of these can cross `jax.jit` and `jax.vmap` boundaries.
"""

from __future__ import annotations

import dataclasses

import jax
import numpy as np

from .errors import InputError

DEFAULT_RESOURCES = ("cpu", "mem")


def _pytree(data_fields, meta_fields):
    def wrap(cls):
        return jax.tree_util.register_dataclass(cls, data_fields=data_fields, meta_fields=meta_fields)

    return wrap


@_pytree(data_fields=["capacity"], meta_fields=["resources"])
@dataclasses.dataclass(frozen=True)
class Cluster:
    """Machines of a cluster, in normalized units (largest machine = 1 per dimension)."""

    capacity: jax.Array  # f32[M, R]
    resources: tuple[str, ...] = DEFAULT_RESOURCES

    @property
    def num_machines(self) -> int:
        return int(self.capacity.shape[0])

    @property
    def num_resources(self) -> int:
        return int(self.capacity.shape[1])


@_pytree(data_fields=["demand", "priority", "arrival", "duration", "sched_class", "different_machines", "job"],
         meta_fields=["resources"])
@dataclasses.dataclass(frozen=True)
class Workload:
    """Tasks to place: resource requests plus the fields the trace gives each task.

    Times are host-side float64 seconds from the start of the trace (0 = before the
    trace window). The last three fields are optional (None: not known), as the
    synthetic generator does not model them.
    """

    demand: jax.Array  # f32[N, R]
    priority: jax.Array  # i32[N], trace priority 0..11
    arrival: jax.Array  # f64[N], seconds
    duration: jax.Array  # f64[N], seconds
    resources: tuple[str, ...] = DEFAULT_RESOURCES
    sched_class: jax.Array | None = None  # i32[N], trace scheduling class 0..3
    different_machines: jax.Array | None = None  # bool[N], the job's tasks must run on distinct machines
    job: jax.Array | None = None  # i32[N], dense job number (0..J-1) of each task

    @property
    def num_tasks(self) -> int:
        return int(self.demand.shape[0])

    def take(self, index) -> "Workload":
        """The tasks at `index` (an integer array or boolean mask), every field alike."""
        index = np.asarray(index)
        return jax.tree_util.tree_map(lambda a: np.asarray(a)[index], self)

    def tile(self, copies: int) -> "Workload":
        """The tasks repeated `copies` times, one copy after the other, every field alike."""
        return jax.tree_util.tree_map(lambda a: np.concatenate([np.asarray(a)] * copies), self)


@_pytree(data_fields=["free", "placement"], meta_fields=[])
@dataclasses.dataclass(frozen=True)
class PackState:
    """Result of packing a batch of (policy row, trial) pairs."""

    free: jax.Array  # f32[P, T, M, R], free capacity after packing
    placement: jax.Array  # i32[P, T, N], machine of each task (original numbering), -1 unplaced


def validate(cluster: Cluster, workload: Workload) -> None:
    """Raise ValueError naming the fault if the cluster or workload is malformed."""
    cap = np.asarray(cluster.capacity)
    dem = np.asarray(workload.demand)
    if cap.ndim != 2 or dem.ndim != 2:
        raise InputError(f"capacity and demand must be 2-D, got {cap.shape} and {dem.shape}")
    if cap.shape[1] != dem.shape[1]:
        raise InputError(f"capacity has {cap.shape[1]} resource dimensions but demand has {dem.shape[1]}")
    if cap.shape[1] < 2:
        raise InputError("at least two resource dimensions (CPU, memory) are required")
    if cap.shape[0] == 0:
        raise InputError("the cluster has no machines")
    for name, arr in (("capacity", cap), ("demand", dem)):
        if not np.all(np.isfinite(arr)):
            row = int(np.argwhere(~np.isfinite(arr))[0][0])
            raise InputError(f"{name} row {row} is not finite")
        if np.any(arr < 0):
            row = int(np.argwhere(arr < 0)[0][0])
            raise InputError(f"{name} row {row} is negative")
    for name in ("priority", "arrival", "duration", "sched_class", "different_machines", "job"):
        value = getattr(workload, name)
        if value is not None and len(value) != dem.shape[0]:
            n = len(value)
            raise InputError(f"workload.{name} has {n} rows but demand has {dem.shape[0]}")
