"""Synthetic CvxCluster problems with machine types, GPU servers and anti-affinity.

Built on the synthetic cluster and workload of jaxsched.synthetic (CPU, memory), with:
- machine types: the two memory-rich classes ((0.5, 0.75) and (1, 1)) are type 1, the
  rest type 0; TYPED_SHARE of the tasks require type 0 and as many type 1;
- GPUs: a third dimension; GPU_SERVER_SHARE of the servers (drawn at random, at least
  one) have 1.0 (8 GPUs); GPU_TASK_SHARE of the tasks request 1, 2 or 4 of them (0.125, 0.25, 0.5);
- anti-affinity: GROUPED_SHARE of the tasks form jobs of 2 to 16 tasks whose tasks must
  run on distinct servers (limit 1 per server);
- utility: BAND_WEIGHTS by the task's priority band.
"""

from __future__ import annotations

import dataclasses

import numpy as np

from ..synthetic import synthetic_instance
from .problem import ANY_TYPE, NO_GROUP, CvxProblem, band_weights, make_problem

TYPE1_CLASSES = ((0.50, 0.75), (1.00, 1.00))
TYPED_SHARE = 0.05
GPU_SERVER_SHARE = 0.10
GPU_TASK_SHARE = 0.05
GROUPED_SHARE = 0.10


def synthetic_problem(machines: int, rho: float, seed: int, gpus: bool = True, types: bool = True,
                      anti_affinity: bool = True, event: bool = False):
    """A CvxProblem on `machines` synthetic servers at load `rho`, and its Workload.

    event: draw the workload at offered load rho (arrivals over a day), for online rounds.
    """
    cluster, workload = synthetic_instance(machines, rho, seed, event=event)
    rng = np.random.default_rng([seed, 7])
    cap = np.asarray(cluster.capacity, np.float32)
    dem = np.asarray(workload.demand, np.float32)
    M, N = cap.shape[0], dem.shape[0]
    server_type = np.zeros(M, np.int32)
    task_type = np.full(N, ANY_TYPE, np.int32)
    if types:
        for c, m in TYPE1_CLASSES:
            server_type[(cap[:, 0] == c) & (cap[:, 1] == m)] = 1
        u = rng.random(N)
        task_type[u < TYPED_SHARE] = 0
        task_type[(u >= TYPED_SHARE) & (u < 2 * TYPED_SHARE)] = 1
    resources = ("cpu", "mem")
    if gpus:
        gpu_cap = np.zeros((M, 1), np.float32)
        gpu_cap[rng.random(M) < GPU_SERVER_SHARE] = 1.0
        if not gpu_cap.any():
            gpu_cap[rng.integers(M)] = 1.0  # at least one GPU server
        gpu_dem = np.zeros((N, 1), np.float32)
        wants = rng.random(N) < GPU_TASK_SHARE
        gpu_dem[wants, 0] = rng.choice(np.asarray([0.125, 0.25, 0.5], np.float32), size=int(wants.sum()))
        cap = np.concatenate([cap, gpu_cap], axis=1)
        dem = np.concatenate([dem, gpu_dem], axis=1)
        resources = ("cpu", "mem", "gpu")
    group = np.full(N, NO_GROUP, np.int32)
    if anti_affinity:
        pos, g = 0, 0
        grouped = np.flatnonzero(rng.random(N) < GROUPED_SHARE)
        while pos < len(grouped):
            size = int(rng.integers(2, 17))
            group[grouped[pos:pos + size]] = g
            pos, g = pos + size, g + 1
    problem = make_problem(cap, dem, weight=band_weights(workload.priority), server_type=server_type,
                           task_type=task_type, group=group, resources=resources)
    return problem, workload


def replicate(problem: CvxProblem, copies: int) -> CvxProblem:
    """`copies` disjoint copies of the problem side by side (proportional growth): servers,
    tasks and anti-affinity groups repeated, each copy's groups distinct."""
    G, M = problem.num_groups, problem.num_servers
    shift = lambda a, step: np.concatenate([np.where(a >= 0, a + c * step, a) for c in range(copies)]).astype(np.int32)
    tile = lambda a: np.concatenate([a] * copies)
    return dataclasses.replace(problem, capacity=tile(problem.capacity), free=tile(problem.free),
                               server_type=tile(problem.server_type), demand=tile(problem.demand),
                               weight=tile(problem.weight), task_type=tile(problem.task_type),
                               group=shift(problem.group, G), num_groups=G * copies,
                               held_group=shift(problem.held_group, G), held_server=shift(problem.held_server, M))
