"""Synthetic cluster and workload, deterministic in the seed (numpy PCG64).

Units are normalized as in the Google 2011 trace: the largest machine has 1.0 of each
resource. The machine mix follows the trace's platform classes; task shapes are a
mix of small, CPU-heavy, memory-heavy and large requests. Tasks are drawn until the
load of the binding dimension, max_x sum_i d_ix / sum_j c_jx, first reaches `rho`.
"""

from __future__ import annotations

import numpy as np

from .errors import InputError

from .types import Cluster, Workload

# (cpu, mem, share): Google-2011-like capacity classes.
MACHINE_CLASSES = (
    (0.50, 0.50, 0.53),
    (0.50, 0.25, 0.31),
    (0.50, 0.75, 0.08),
    (1.00, 1.00, 0.06),
    (0.25, 0.25, 0.02),
)

# (name, share): how each task's (cpu, mem) request is drawn, see `_task_shapes`.
TASK_SHAPES = (
    ("small", 0.60),  # cpu log-uniform [0.005, 0.05], mem = cpu x lognormal(0, 0.5)
    ("cpu_heavy", 0.15),  # cpu log-uniform [0.02, 0.10], mem = cpu x U[0.1, 0.5]
    ("mem_heavy", 0.15),  # mem log-uniform [0.02, 0.10], cpu = mem x U[0.1, 0.5]
    ("large", 0.10),  # cpu, mem each U[0.05, 0.20]
)

# Trace priority bands: free (0-1), batch (2-8), production (9-10), monitoring (11).
PRIORITY_MIX = ((0, 0.15), (1, 0.10), (4, 0.35), (8, 0.20), (9, 0.15), (10, 0.03), (11, 0.02))

MIN_REQUEST, MAX_REQUEST = 0.001, 0.5
HORIZON_S = 86_400.0  # arrivals spread over one day, for event mode


def _apportion(total: int, shares) -> np.ndarray:
    """Integer counts summing to `total` in proportion to `shares` (largest remainder)."""
    shares = np.asarray(shares, float) / np.sum(shares)
    raw = shares * total
    counts = np.floor(raw).astype(int)
    for i in np.argsort(-(raw - counts), kind="stable")[: total - counts.sum()]:
        counts[i] += 1
    return counts


def synthetic_cluster(machines: int, seed: int) -> Cluster:
    """`machines` machines of the MACHINE_CLASSES mix in a seeded random order."""
    if machines < 1:
        raise InputError(f"machines must be >= 1, got {machines}")
    rng = np.random.default_rng([seed, 0])
    counts = _apportion(machines, [c[2] for c in MACHINE_CLASSES])
    cap = np.repeat(np.asarray([c[:2] for c in MACHINE_CLASSES], np.float32), counts, axis=0)
    return Cluster(capacity=cap[rng.permutation(machines)])


def _task_shapes(rng: np.random.Generator, n: int) -> np.ndarray:
    kind = rng.choice(len(TASK_SHAPES), size=n, p=[s for _, s in TASK_SHAPES])
    logu = lambda lo, hi: np.exp(rng.uniform(np.log(lo), np.log(hi), n))
    small_c = logu(0.005, 0.05)
    small_m = small_c * rng.lognormal(0.0, 0.5, n)
    heavy = logu(0.02, 0.10)
    light = heavy * rng.uniform(0.1, 0.5, n)
    large_c, large_m = rng.uniform(0.05, 0.20, n), rng.uniform(0.05, 0.20, n)
    cpu = np.select([kind == 0, kind == 1, kind == 2], [small_c, heavy, light], large_c)
    mem = np.select([kind == 0, kind == 1, kind == 2], [small_m, light, heavy], large_m)
    return np.clip(np.stack([cpu, mem], 1), MIN_REQUEST, MAX_REQUEST).astype(np.float32)


# Mean task duration of the lognormal(log 1800 s, 1.5) draw: 1800 exp(1.5^2 / 2) s.
MEAN_DURATION_S = 1800.0 * float(np.exp(1.125))


def synthetic_workload(cluster: Cluster, rho: float, seed: int) -> Workload:
    """Tasks drawn until the binding dimension's load reaches `rho` of the cluster."""
    if not 0 < rho <= 10:
        raise InputError(f"rho must be in (0, 10], got {rho}")
    return _draw_workload(cluster, rho, seed)


def synthetic_event_workload(cluster: Cluster, rho: float, seed: int) -> Workload:
    """Tasks drawn until the offered load reaches `rho`, for event mode.

    Offered load: total demand x mean duration / arrival horizon, over the cluster's
    capacity, in the binding dimension: about the utilization the arrivals would give in
    steady state if every task were placed on arrival.
    """
    if not 0 < rho <= 10:
        raise InputError(f"rho must be in (0, 10], got {rho}")
    return _draw_workload(cluster, rho * HORIZON_S / MEAN_DURATION_S, seed)


def _draw_workload(cluster: Cluster, rho: float, seed: int) -> Workload:
    rng = np.random.default_rng([seed, 1])
    total = np.asarray(cluster.capacity, np.float64).sum(axis=0)
    parts, load = [], np.zeros(2)
    while True:
        batch = _task_shapes(rng, 4096)
        cum = load + np.cumsum(batch, axis=0, dtype=np.float64)
        reached = np.nonzero(np.max(cum / total, axis=1) >= rho)[0]
        if reached.size:
            parts.append(batch[: reached[0] + 1])
            break
        parts.append(batch)
        load = cum[-1]
    demand = np.concatenate(parts)
    n = demand.shape[0]
    prio_values, prio_p = zip(*PRIORITY_MIX)
    priority = rng.choice(np.asarray(prio_values, np.int32), size=n, p=np.asarray(prio_p) / sum(prio_p))
    arrival = np.sort(rng.uniform(0.0, HORIZON_S, n))
    duration = np.clip(rng.lognormal(np.log(1800.0), 1.5, n), 1.0, 30 * HORIZON_S)
    return Workload(demand=demand, priority=priority.astype(np.int32), arrival=arrival, duration=duration)


def synthetic_instance(machines: int, rho: float, seed: int, event: bool = False) -> tuple[Cluster, Workload]:
    """The synthetic cluster and its workload at load `rho` (offered load with `event`).

    Args:
        machines: cluster size.
        rho: snapshot load (the binding dimension's total demand over capacity), or with
            `event` the offered load of a one-day arrival stream.
        seed: everything is a function of it.
        event: draw arrival times and durations for event mode.

    Returns:
        (cluster, workload).
    """
    cluster = synthetic_cluster(machines, seed)
    return cluster, (synthetic_event_workload if event else synthetic_workload)(cluster, rho, seed)
