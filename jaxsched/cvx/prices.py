"""Stage 1 of CvxCluster: shadow prices of the aggregated LP by first-order dual descent in JAX.

The LP over shapes k (servers aggregated by capacity and type):

    max  sum_ik u_i x_ik   s.t.  sum_k x_ik <= 1,  sum_i d_ir x_ik <= B_kr,
                                 sum_{i in g} x_ik <= A_kg,  x >= 0,  x_ik = 0 unless allowed

has the dual  min_{lam, mu >= 0}  D = lam . B + mu . A + sum_i max(0, max_k v_ik)  with the net
utility v_ik = u_i - lam_k . d_i - mu_{k, g(i)}. We minimize the entropy-smoothed dual, the
max replaced by tau * log(1 + sum_k exp(v_ik / tau)), with optax Adam, projecting the
prices onto >= 0 after each step, while tau and the step size decay geometrically.
Every CHECK steps the exact dual D (an upper bound on the LP optimum) and a primal lower
bound are evaluated: the softmax weights p_ik of the smoothed dual, scaled down per shape
until they fit its budgets, are a feasible x. Descent stops when the best dual minus the
best primal, per task, is at most `gap_tol` (utility units), or after `max_iters` steps.

Prices are kept in scaled units (lam_kr = theta_kr * mean u / mean d_r) so one step size
suits every resource. Smoothing also breaks the LP's degenerate ties: its optimum is
unique and spreads prices across shapes that exact LP duals would leave equal.
"""

from __future__ import annotations

import dataclasses
import functools
from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np
import optax
from jax import lax

from .problem import CvxProblem, Shapes, aggregate, allowed, shape_budgets

CHECK = 50


@dataclasses.dataclass(frozen=True)
class PriceConfig:
    """Static settings of the dual descent."""

    gap_tol: float = 2e-3  # stop when (best dual - best primal) / tasks <= this (utility units)
    max_iters: int = 1000
    anneal_iters: int = 500  # steps over which tau and the step size decay to their floors
    tau0: float = 0.1  # initial smoothing, relative to the mean utility
    tau_min: float = 3e-4
    lr0: float = 0.1
    lr_min: float = 1e-3


class PriceInputs(NamedTuple):
    """One round's LP data (host arrays, taken by the compiled stages; N tasks, K shapes, R
    resources, G groups)."""

    demand: jax.Array  # f32[N, R]
    weight: jax.Array  # f32[N]
    allowed: jax.Array  # bool[N, K]
    group: jax.Array  # i32[N], G for no group
    budget: jax.Array  # f32[K, R], aggregated free capacity
    allowance: jax.Array  # f32[K, G + 1], aggregated group allowance (last column unused)
    scale: jax.Array  # f32[R + 1], price units of each resource and of the groups


class Prices(NamedTuple):
    """Result of the dual descent."""

    lam: jax.Array  # f32[K, R], price of each resource on each shape
    mu: jax.Array  # f32[K, G], price of each anti-affinity group on each shape
    dual: jax.Array  # f32[], best exact dual objective (upper bound on the LP optimum)
    primal: jax.Array  # f32[], best primal objective found (lower bound)
    iterations: jax.Array  # i32[]
    theta: jax.Array  # f32[K, R + G], scaled prices, to warm-start the next round

    @property
    def converged_gap(self) -> float:
        return float(self.dual - self.primal)


def price_inputs(problem: CvxProblem, shapes: Shapes) -> PriceInputs:
    """The JAX arrays of stage 1 for `problem`."""
    B, A = shape_budgets(problem, shapes)
    G = problem.num_groups
    d = problem.demand.astype(np.float64)
    mean_u = float(problem.weight.mean()) if problem.num_tasks else 1.0
    mean_u = mean_u if mean_u > 0 else 1.0
    scale = []
    for r in range(d.shape[1]):
        pos = d[:, r][d[:, r] > 0]
        scale.append(mean_u / pos.mean() if pos.size else 1.0)
    scale.append(mean_u)
    group = np.where(problem.group >= 0, problem.group, G).astype(np.int32)
    return PriceInputs(demand=np.asarray(problem.demand, np.float32), weight=np.asarray(problem.weight, np.float32),
                       allowed=allowed(problem, shapes), group=group, budget=B.astype(np.float32),
                       allowance=np.concatenate([A, np.zeros((A.shape[0], 1))], 1).astype(np.float32),
                       scale=np.asarray(scale, np.float32))


def _unscale(theta, inp: PriceInputs):
    R = inp.demand.shape[1]
    lam = theta[:, :R] * inp.scale[None, :R]
    mu = theta[:, R:] * inp.scale[R]
    return lam, jnp.concatenate([mu, jnp.zeros((mu.shape[0], 1), mu.dtype)], axis=1)


def net_utility(lam, mu_ext, inp: PriceInputs):
    """v_ik = u_i - lam_k . d_i - mu_{k, g(i)}, -inf where not allowed: f32[N, K]."""
    v = inp.weight[:, None] - inp.demand @ lam.T - mu_ext.T[inp.group]
    return jnp.where(inp.allowed, v, -jnp.inf)


def _with_zero(v):
    return jnp.concatenate([jnp.zeros((v.shape[0], 1), v.dtype), v], axis=1)


def _smoothed(theta, tau, inp):
    lam, mu = _unscale(theta, inp)
    v = net_utility(lam, mu, inp)
    soft = tau * jax.nn.logsumexp(_with_zero(v) / tau, axis=1)
    return jnp.sum(lam * inp.budget) + jnp.sum(mu * inp.allowance) + jnp.sum(soft)


def _bounds(theta, tau, inp):
    """Exact dual D and the primal value of the scaled softmax assignment."""
    lam, mu = _unscale(theta, inp)
    v = net_utility(lam, mu, inp)
    dual = jnp.sum(lam * inp.budget) + jnp.sum(mu * inp.allowance) + jnp.sum(jnp.max(_with_zero(v), axis=1))
    p = jax.nn.softmax(_with_zero(v) / tau, axis=1)[:, 1:]  # f32[N, K]
    load = p.T @ inp.demand  # [K, R]
    fit = jnp.where(load > inp.budget, inp.budget / jnp.maximum(load, 1e-30), 1.0)
    gload = jax.ops.segment_sum(p, inp.group, num_segments=inp.allowance.shape[1]).T  # [K, G + 1]
    gfit = jnp.where(gload[:, :-1] > inp.allowance[:, :-1],
                     inp.allowance[:, :-1] / jnp.maximum(gload[:, :-1], 1e-30), 1.0)
    s = jnp.minimum(jnp.min(fit, axis=1), jnp.min(gfit, axis=1, initial=1.0))
    primal = jnp.sum(inp.weight[:, None] * p * s[None, :])
    return dual, primal


@functools.partial(jax.jit, static_argnames=("cfg",))
def _descend(theta0, inp: PriceInputs, cfg: PriceConfig):
    mean_u = inp.scale[-1]
    n = jnp.float32(max(inp.demand.shape[0], 1))
    decay = lambda hi, lo, t: hi * (lo / hi) ** jnp.minimum(t / cfg.anneal_iters, 1.0)
    # Adam with a geometrically decaying step size (minimizing: the step is negated).
    opt = optax.chain(optax.scale_by_adam(),
                      optax.scale_by_schedule(lambda c: -decay(cfg.lr0, cfg.lr_min, c.astype(jnp.float32))))
    grad = jax.grad(_smoothed)

    def step(t, carry):
        theta, st = carry
        tau = decay(cfg.tau0, cfg.tau_min, t.astype(jnp.float32)) * mean_u
        with jax.numpy_dtype_promotion("standard"):  # optax mixes its int32 step count with floats
            upd, st = opt.update(grad(theta, tau, inp), st, theta)
        return jnp.maximum(optax.apply_updates(theta, upd), 0.0), st

    def chunk(c):
        theta, st, t, best_d, best_p, best_theta = c
        theta, st = lax.fori_loop(t, t + CHECK, step, (theta, st))
        t = t + CHECK
        tau = decay(cfg.tau0, cfg.tau_min, t.astype(jnp.float32)) * mean_u
        d, p = _bounds(theta, tau, inp)
        better = d < best_d
        return (theta, st, t, jnp.where(better, d, best_d), jnp.maximum(p, best_p),
                jnp.where(better, theta, best_theta))

    def going(c):
        _, _, t, best_d, best_p, _ = c
        return (t < cfg.max_iters) & ((best_d - best_p) / n > cfg.gap_tol)

    d0, p0 = _bounds(theta0, cfg.tau_min * mean_u, inp)
    init = (theta0, opt.init(theta0), jnp.int32(0), d0, p0, theta0)
    theta, _, t, best_d, best_p, best_theta = lax.while_loop(going, chunk, init)
    lam, mu = _unscale(best_theta, inp)
    return Prices(lam=lam, mu=mu[:, :-1], dual=best_d, primal=best_p, iterations=t, theta=best_theta)


def solve_prices(problem: CvxProblem, shapes: Shapes | None = None, cfg: PriceConfig = PriceConfig(),
                 warm: jax.Array | None = None, inputs: PriceInputs | None = None) -> Prices:
    """Shadow prices of `problem`'s aggregated LP; `warm`: a previous round's Prices.theta;
    `inputs`: `price_inputs(problem, shapes)` if at hand."""
    shapes = aggregate(problem) if shapes is None else shapes
    inp = price_inputs(problem, shapes) if inputs is None else inputs
    K, R, G = len(shapes.count), problem.demand.shape[1], problem.num_groups
    theta0 = jnp.zeros((K, R + G), jnp.float32) if warm is None else jnp.asarray(warm, jnp.float32)
    if theta0.shape != (K, R + G):
        theta0 = jnp.zeros((K, R + G), jnp.float32)
    return _descend(theta0, inp, cfg)
