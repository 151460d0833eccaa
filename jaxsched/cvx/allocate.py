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
    """Place `problem`'s tasks with CvxCluster; draws keyed by (seed, trial)."""
    t0 = time.perf_counter()
    shapes = aggregate(problem)
    prices = solve_prices(problem, shapes, cfg, warm)
    jax.block_until_ready(prices)
    t1 = time.perf_counter()
    key = rng.trial_keys(seed, EXPERIMENT, trial + 1)[trial]
    placement, _ = place(problem, shapes, price_inputs(problem, shapes), prices.lam, prices.mu, key)
    t2 = time.perf_counter()
    return Allocation(placement=placement, objective=objective(problem, placement), prices=prices,
                      shapes=len(shapes.count), price_seconds=t1 - t0, place_seconds=t2 - t1)
