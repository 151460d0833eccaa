"""CvxCluster end to end: shapes, stage-1 prices, stage-2 greedy placement, timed."""

from __future__ import annotations

import dataclasses
import time

import jax
import numpy as np

from .. import rng
from .greedy import place
from .prices import PriceConfig, Prices, price_inputs, solve_prices
from .problem import CvxProblem, aggregate, objective

EXPERIMENT = "cvxcluster"


@dataclasses.dataclass(frozen=True)
class Allocation:
    """One CvxCluster round: where each task went, at what prices, how fast."""

    placement: np.ndarray  # i32[N], server of each task, -1 unplaced
    objective: float  # sum of u_i over placed tasks
    prices: Prices
    shapes: int
    price_seconds: float
    place_seconds: float

    @property
    def seconds(self) -> float:
        return self.price_seconds + self.place_seconds


def allocate(problem: CvxProblem, seed: int = 1, trial: int = 0, cfg: PriceConfig = PriceConfig(),
             warm=None) -> Allocation:
    """Place `problem`'s tasks with CvxCluster; draws keyed by (seed, trial).

    Args:
        problem: servers and tasks.
        seed: the run's seed.
        trial: which of the seed's random server draws.
        cfg: stage 1's settings.
        warm: a previous round's `Prices.theta`, to start stage 1 from.

    Returns:
        The Allocation: each task's server, the objective, the prices and both stages' times.
    """
    t0 = time.perf_counter()
    shapes = aggregate(problem)
    prices = solve_prices(problem, shapes, cfg, warm)
    jax.block_until_ready(prices)
    t1 = time.perf_counter()
    key = rng.trial_keys(seed, EXPERIMENT, trial + 1)[trial]
    if problem.num_tasks == 0:  # nothing to place (a round with an empty queue)
        placement = np.zeros(0, np.int32)
    else:
        placement, _ = place(problem, shapes, price_inputs(problem, shapes), prices.lam, prices.mu, key)
    t2 = time.perf_counter()
    return Allocation(placement=placement, objective=objective(problem, placement), prices=prices,
                      shapes=len(shapes.count), price_seconds=t1 - t0, place_seconds=t2 - t1)


def summarize(problem: CvxProblem, allocations: list[Allocation], gap_tol: float) -> dict:
    """Stage 1's convergence and stage 2's objectives of allocations of one problem, as JSON.

    Args:
        problem: the problem allocated.
        allocations: its allocations (the trials); stage 1 is the first one's.
        gap_tol: the duality-gap tolerance per task that stage 1 was to reach.

    Returns:
        dual and primal bounds, iterations, whether stage 1 converged, and per allocation its
        times, objective, tasks placed and objective over the dual bound.
    """
    first = allocations[0]
    dual, primal = float(first.prices.dual), float(first.prices.primal)
    objs = [a.objective for a in allocations]
    return {
        "dual": dual, "primal": primal, "iterations": int(first.prices.iterations),
        "converged": bool((dual - primal) / max(problem.num_tasks, 1) <= gap_tol),
        "price_seconds": [a.price_seconds for a in allocations], "place_seconds": [a.place_seconds for a in allocations],
        "objective": objs, "placed": [int(np.sum(a.placement >= 0)) for a in allocations],
        "objective_over_dual": [o / dual if dual > 0 else float("nan") for o in objs],
    }
