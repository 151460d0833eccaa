"""The allocation problem of CvxCluster (Nnorom, Boyd, Levis 2026) and its server shapes.

A problem is a set of servers (capacity, free capacity, machine type), a set of tasks
(demand, utility weight, required machine type, anti-affinity group) and the
anti-affinity allowance left on each server. Anti-affinity is the paper's capacity
form kept sparse: a group g is an indicator column of the demand matrix and a limit
column of the capacity matrix. Here each task names its group, every server takes at
most `group_limit` tasks of a group, and the tasks already running there are listed as
(group, server) pairs, so nothing of size groups x servers is ever built (17,920 groups
on 100,480 servers would be 7 GB dense).

Shapes aggregate servers with identical capacity and machine type (free capacity may
differ); shape k's aggregated free capacity is the sum over its servers.
"""

from __future__ import annotations

import dataclasses
from typing import TYPE_CHECKING

import numpy as np

from ..errors import InputError

if TYPE_CHECKING:  # JAX's types; the module itself loads without JAX
    from ..types import Cluster, Workload

ANY_TYPE = -1  # task_type of a task that may run on any machine type
NO_GROUP = -1  # group of a task without anti-affinity
# Utility weight u_i of a task by trace priority band: free (0-1), batch (2-8), production and
# monitoring (9-11). The LP maximizes the weighted count of placed tasks.
BAND_WEIGHTS = (1.0, 2.0, 4.0)


@dataclasses.dataclass(frozen=True)
class CvxProblem:
    """Servers, tasks and constraints of one allocation round (host numpy arrays)."""

    capacity: np.ndarray  # f32[M, R], total capacity (shapes are keyed by it)
    free: np.ndarray  # f32[M, R], capacity left after running tasks
    server_type: np.ndarray  # i32[M], machine type 0..
    demand: np.ndarray  # f32[N, R]
    weight: np.ndarray  # f32[N], utility u_i of placing task i
    task_type: np.ndarray  # i32[N], required machine type, ANY_TYPE for any
    group: np.ndarray  # i32[N], anti-affinity group 0..G-1, NO_GROUP for none
    num_groups: int  # G; groups are 0..G-1
    group_limit: int = 1  # tasks of one group a server may hold
    held_group: np.ndarray = dataclasses.field(default_factory=lambda: np.zeros(0, np.int32))  # i32[H]
    held_server: np.ndarray = dataclasses.field(default_factory=lambda: np.zeros(0, np.int32))  # i32[H]
    resources: tuple[str, ...] = ("cpu", "mem")

    @property
    def num_servers(self) -> int:
        return int(self.capacity.shape[0])

    @property
    def num_tasks(self) -> int:
        return int(self.demand.shape[0])

    def group_counts(self, placement=None) -> dict[tuple[int, int], int]:
        """{(group, server): tasks} of the running tasks, plus those of `placement` if given."""
        g, j = self.held_group, self.held_server
        if placement is not None:
            on = (np.asarray(placement) >= 0) & (self.group >= 0)
            g, j = np.concatenate([g, self.group[on]]), np.concatenate([j, np.asarray(placement)[on]])
        keys, counts = np.unique(np.stack([g, j], 1), axis=0, return_counts=True) if len(g) else ([], [])
        return {(int(a), int(b)): int(c) for (a, b), c in zip(keys, counts)}

    def allowance(self) -> np.ndarray:
        """Dense i32[G, M] allowance left per group and server (small problems only: exact references)."""
        out = np.full((self.num_groups, self.num_servers), self.group_limit, np.int32)
        np.add.at(out, (self.held_group, self.held_server), -1)
        return out

    def tasks(self, index) -> "CvxProblem":
        """The same servers with only the tasks at `index`."""
        index = np.asarray(index)
        return dataclasses.replace(self, demand=self.demand[index], weight=self.weight[index],
                                   task_type=self.task_type[index], group=self.group[index])


def make_problem(capacity, demand, weight=None, free=None, server_type=None, task_type=None, group=None,
                 group_limit: int = 1, resources=None) -> CvxProblem:
    """A checked CvxProblem; omitted fields default to: free = capacity, one machine type,
    weight 1, any type, no anti-affinity, `group_limit` tasks of a group per server."""
    cap = np.asarray(capacity, np.float32)
    dem = np.asarray(demand, np.float32)
    if cap.ndim != 2 or dem.ndim != 2 or cap.shape[1] != dem.shape[1]:
        raise InputError(f"capacity [M, R] and demand [N, R] must agree in R, got {cap.shape} and {dem.shape}")
    M, R = cap.shape
    N = dem.shape[0]
    if M == 0:
        raise InputError("the cluster has no servers")
    fr = cap.copy() if free is None else np.asarray(free, np.float32)
    w = np.ones(N, np.float32) if weight is None else np.asarray(weight, np.float32)
    st = np.zeros(M, np.int32) if server_type is None else np.asarray(server_type, np.int32)
    tt = np.full(N, ANY_TYPE, np.int32) if task_type is None else np.asarray(task_type, np.int32)
    g = np.full(N, NO_GROUP, np.int32) if group is None else np.asarray(group, np.int32)
    for name, arr, shape in (("free", fr, (M, R)), ("weight", w, (N,)), ("server_type", st, (M,)),
                             ("task_type", tt, (N,)), ("group", g, (N,))):
        if arr.shape != shape:
            raise InputError(f"{name} has shape {arr.shape}, expected {shape}")
    for name, arr in (("capacity", cap), ("free", fr), ("demand", dem), ("weight", w)):
        if not np.all(np.isfinite(arr)):
            raise InputError(f"{name} row {int(np.argwhere(~np.isfinite(arr))[0][0])} is not finite")
        if np.any(arr < 0):
            raise InputError(f"{name} row {int(np.argwhere(arr < 0)[0][0])} is negative")
    if np.any(fr > cap + 1e-6):
        raise InputError(f"free exceeds capacity on server {int(np.argwhere(fr > cap + 1e-6)[0][0])}")
    if np.any(st < 0):
        raise InputError("server_type must be >= 0")
    if np.any(tt < ANY_TYPE) or np.any(g < NO_GROUP):
        raise InputError("task_type and group must be >= -1 (-1: any type / no group)")
    if group_limit < 1:
        raise InputError(f"group_limit must be >= 1, got {group_limit}")
    G = int(g.max()) + 1 if N else 0
    res = tuple(resources) if resources is not None else (("cpu", "mem", "gpu")[:R] if R <= 3 else
                                                          tuple(f"r{x}" for x in range(R)))
    return CvxProblem(capacity=cap, free=fr, server_type=st, demand=dem, weight=w, task_type=tt, group=g,
                      num_groups=G, group_limit=int(group_limit), resources=res)


def band_weights(priority, weights=BAND_WEIGHTS) -> np.ndarray:
    """u_i from trace priorities: weights[0] for 0-1, [1] for 2-8, [2] for 9-11."""
    p = np.asarray(priority)
    band = np.where(p >= 9, 2, np.where(p >= 2, 1, 0))
    return np.asarray(weights, np.float32)[band]


def anti_affinity_groups(workload: Workload) -> np.ndarray:
    """i32[N]: each task's anti-affinity group from the trace's different-machines flag (one group
    per flagged job, numbered by job), NO_GROUP for the others."""
    group = np.full(workload.num_tasks, NO_GROUP, np.int32)
    if workload.different_machines is not None and workload.job is not None:
        flagged = np.asarray(workload.different_machines, bool)
        _, dense = np.unique(np.asarray(workload.job)[flagged], return_inverse=True)
        group[flagged] = dense.reshape(-1)
    return group


def from_snapshot(cluster: Cluster, workload: Workload, weights=BAND_WEIGHTS) -> CvxProblem:
    """The problem of packing a snapshot: one machine type, u_i by priority band, and
    anti-affinity from the trace's different-machines flag (one group per flagged job)."""
    from ..types import validate  # here, not at import: the HiGHS child processes start without JAX

    validate(cluster, workload)
    return make_problem(cluster.capacity, workload.demand, weight=band_weights(workload.priority, weights),
                        group=anti_affinity_groups(workload), resources=cluster.resources)


@dataclasses.dataclass(frozen=True)
class Shapes:
    """Servers grouped by (capacity, type); servers of shape k are members[start[k]:start[k]+count[k]]."""

    capacity: np.ndarray  # f32[K, R], a server's capacity
    server_type: np.ndarray  # i32[K]
    count: np.ndarray  # i32[K], servers
    start: np.ndarray  # i32[K], first position in `members`
    members: np.ndarray  # i32[M], server indices sorted by shape, then index
    shape_of: np.ndarray  # i32[M], shape of each server
    capacity_sum: np.ndarray  # f64[K, R], total capacity of each shape's servers


def aggregate(problem: CvxProblem) -> Shapes:
    """Group the servers into shapes, in lexicographic order of (type, capacity)."""
    key = np.concatenate([problem.server_type[:, None].astype(np.float64),
                          problem.capacity.astype(np.float64)], axis=1)
    uniq, shape_of = np.unique(key, axis=0, return_inverse=True)
    shape_of = shape_of.reshape(-1).astype(np.int32)
    members = np.argsort(shape_of, kind="stable").astype(np.int32)
    count = np.bincount(shape_of, minlength=len(uniq)).astype(np.int32)
    start = (np.cumsum(count) - count).astype(np.int32)
    total = np.add.reduceat(problem.capacity.astype(np.float64)[members], start, axis=0)
    return Shapes(capacity=uniq[:, 1:].astype(np.float32), server_type=uniq[:, 0].astype(np.int32), count=count,
                  start=start, members=members, shape_of=shape_of, capacity_sum=total)


def allowed(problem: CvxProblem, shapes: Shapes) -> np.ndarray:
    """bool[N, K]: task i may run on shape k (type matches and it fits one empty server)."""
    type_ok = (problem.task_type[:, None] == ANY_TYPE) | (problem.task_type[:, None] == shapes.server_type[None, :])
    fits = np.all(problem.demand[:, None, :] <= shapes.capacity[None, :, :] + 1e-6, axis=2)
    return type_ok & fits


def shape_sums(shapes: Shapes, x: np.ndarray) -> np.ndarray:
    """Sum of the rows x[M, R] over each shape's servers: f64[K, R]."""
    return np.add.reduceat(np.asarray(x, np.float64)[shapes.members], shapes.start, axis=0)


def shape_budgets(problem: CvxProblem, shapes: Shapes) -> tuple[np.ndarray, np.ndarray]:
    """Aggregated free capacity B f64[K, R] and group allowance A f64[K, G] of each shape."""
    B = shape_sums(shapes, problem.free)
    A = np.repeat((problem.group_limit * shapes.count.astype(np.float64))[:, None], problem.num_groups, axis=1)
    np.add.at(A, (shapes.shape_of[problem.held_server], problem.held_group), -1.0)
    return B, A


def objective(problem: CvxProblem, placement: np.ndarray) -> float:
    """Sum of u_i over placed tasks (placement i32[N], -1 unplaced)."""
    return float(np.sum(problem.weight.astype(np.float64)[np.asarray(placement) >= 0]))


def check_placement(problem: CvxProblem, placement: np.ndarray, tol: float = 1e-5) -> None:
    """Raise AssertionError naming the first violated constraint of `placement`."""
    placement = np.asarray(placement)
    on = placement >= 0
    used = np.zeros_like(problem.free, dtype=np.float64)
    np.add.at(used, placement[on], problem.demand[on].astype(np.float64))
    over = used > problem.free.astype(np.float64) + tol
    if over.any():
        j, r = np.argwhere(over)[0]
        raise AssertionError(f"server {j} over capacity in {problem.resources[r]}")
    tt = problem.task_type[on]
    bad = (tt != ANY_TYPE) & (tt != problem.server_type[placement[on]])
    if bad.any():
        raise AssertionError(f"task {np.flatnonzero(on)[np.argmax(bad)]} on a server of the wrong type")
    for (g, j), count in problem.group_counts(placement).items():
        if count > problem.group_limit:
            raise AssertionError(f"anti-affinity group {g} over its limit on server {j}")
