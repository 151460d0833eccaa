"""A differentiable relaxation of full-scan packing, and gradient tuning of family genomes with optax.

The relaxation replaces each hard step of the sequential packing (argmax over feasible
machines, place the whole task there) by an expected step:

- a softmax choice pi_j over the machines the task fits on the expected state (masked
  scores) with logits (s_j - max s) / (temperature x spread), where s_j is the family
  score on machine j and spread the standard deviation of the feasible scores, so the
  temperature is relative and a genome's relaxed objective, like its hard one, does not
  change when its weights are scaled (its gradient is orthogonal to the weights); where
  the task fits nowhere, the choice goes to nearly fitting machines in proportion to q;
- soft feasibility q_j = prod_x sigmoid(slack_jx / sharpness + 3) over the dimensions the
  task uses (slack = f - d; 0.95 at an exact fit, tending to 1 with room);
- the task is placed with mass m = sum_j pi_j q_j (the chance that the chosen machine
  fits), and each machine's free capacity drops by d pi_j q_j.

The relaxed objective is the mass-weighted share of demand placed, sum_i w_i m_i /
sum_i w_i with w_i = sum_x d_ix, the smooth counterpart of `placed_weighted`. As the
temperature and sharpness go to 0 it tends to the hard packing's value. The
gradient reaches the genome through each step's choice; by default (`detach_scores`)
not back through the history of earlier choices that shaped the state the scores see,
a path along which the gradient explodes like a long recurrent network's. The family's
powers use exp(p log x) throughout, so the gradient with respect to p1 and p2 is
defined at p = 1 too. The scan over tasks is cut into `block`-task segments under
`jax.checkpoint`, so memory grows with N / block carries instead of N.
"""

from __future__ import annotations

import dataclasses
import functools
from typing import Callable

import jax
import jax.numpy as jnp
import numpy as np
import optax
from jax import lax

from . import rng
from .errors import InputError
from .evolve import EXPERIMENT_HELDOUT, EXPERIMENT_TRAIN, POWER_MAX, POWER_MIN, Problem, canonical, fitness
from .policies import FEASIBILITY_TOL, GENOME_SIZE, get_policy, dsum, feasible, machine_terms, safe_inverse
from .types import validate

SCORE_CLIP = 1e6
SOFT_MARGIN = 3.0  # q = sigmoid(slack / sharpness + 3): 0.95 at an exact fit


@dataclasses.dataclass(frozen=True)
class RelaxConfig:
    """Static settings of the relaxation."""

    temperature: float = 0.1  # softmax temperature, in units of the score spread
    sharpness: float = 0.01  # width of the feasibility sigmoid, in normalized resource units
    block: int = 256  # tasks per checkpointed segment of the scan
    detach_scores: bool = True  # no gradient from the state through scores and masks, only through masses
    policy: str = "family"  # the parameterized policy tuned: the family, or a user policy (its own score)

    def check(self) -> None:
        """Raise InputError naming the first bad setting."""
        for name in ("temperature", "sharpness"):
            if not getattr(self, name) > 0:
                raise InputError(f"{name} must be > 0, got {getattr(self, name)}")
        if self.block < 1:
            raise InputError(f"block must be >= 1, got {self.block}")


def smooth_family(t, g) -> jax.Array:
    """The family score with every power as exp(p log x), clipped to +-1e6 (smooth in the genome)."""
    la, lb = jnp.log(t.a), jnp.log(t.b)
    s = g[0] * jnp.exp(g[6] * la) + g[1] * jnp.exp(g[6] * lb)
    s = s + g[2] * jnp.exp(g[7] * (lb - la)) + g[3] * jnp.exp(g[7] * (la - lb))
    s = s + g[4] * t.fit + g[5] * jnp.abs(t.rho[0] - t.rho[1])
    return jnp.clip(-s, -SCORE_CLIP, SCORE_CLIP)


def _step(cfg: RelaxConfig, genome, inv, free, d):
    """One expected placement: (new free f32[R, M], placed mass f32[])."""
    R = free.shape[0]
    f = tuple(free[x] for x in range(R))
    dd = tuple(d[x] for x in range(R))
    ic = tuple(inv[x] for x in range(R))
    # Scores see the state without its gradient: differentiating the choice through the
    # whole history makes the gradient explode like a long recurrent network's.
    f_seen = tuple(lax.stop_gradient(fx) for fx in f) if cfg.detach_scores else f
    t = machine_terms(dd, f_seen, ic, jnp.zeros_like(f[0]), (0.05,) * R)
    s = smooth_family(t, genome) if cfg.policy == "family" else jnp.clip(
        get_policy(cfg.policy).score(t, genome), -SCORE_CLIP, SCORE_CLIP)
    # Hard feasibility on the expected state picks where the softmax looks; the soft q (about
    # 0.95 at an exact fit, 1 with room to spare) is the mass a placement there carries.
    used = tuple((dx > 0) for dx in dd)
    slack = tuple(fx + FEASIBILITY_TOL - dx for dx, fx in zip(dd, f))
    fits = feasible(dd, f_seen, ic)
    log_q = dsum(tuple(jnp.where(u, jax.nn.log_sigmoid(sl / cfg.sharpness + SOFT_MARGIN), 0.0)
                       + jnp.where(u & (ix <= 0), -1e4, 0.0) for u, sl, ix in zip(used, slack, ic)))
    q = jnp.exp(log_q)
    n_fit = jnp.sum(fits, dtype=s.dtype) + 1e-30
    s_fit = jnp.where(fits, s, 0.0)
    mean = jnp.sum(s_fit) / n_fit
    top = lax.stop_gradient(jnp.max(jnp.where(fits, s, -SCORE_CLIP)))
    var = jnp.sum(jnp.where(fits, jnp.square(s - mean), 0.0)) / n_fit
    std = jnp.where(var > 0, jnp.sqrt(jnp.where(var > 0, var, 1.0)), 0.0)  # sqrt without a NaN gradient at 0
    # Floored at a 1e-3 share of the scores' size: near-equal scores must not make the logits explode.
    spread = jnp.maximum(std, 1e-3 * jnp.abs(top) + 1e-6)
    # Where nothing fits, the choice falls on the nearly fitting machines, in proportion to q.
    logits = jnp.where(fits, (s - top) / (cfg.temperature * spread), -1e4 + log_q)
    pi = jax.nn.softmax(logits)
    share = pi * q
    return free - d[:, None] * share[None, :], jnp.sum(share)


def _objective_one(cfg: RelaxConfig, genome, cap_t, demand, order):
    """Relaxed placed share of demand for one task order (order i32[Npad], -1 = padding)."""
    inv = safe_inverse(cap_t)
    valid = order >= 0
    d_all = jnp.where(valid[:, None], demand[jnp.maximum(order, 0)], 0.0)  # [Npad, R]
    w_all = jnp.sum(d_all, axis=1)

    @jax.checkpoint
    def segment(free, xs):
        def body(fr, x):
            d, w = x
            fr, mass = _step(cfg, genome, inv, fr, d)
            return fr, w * mass
        return lax.scan(body, free, xs)

    nb = order.shape[0] // cfg.block
    xs = (d_all.reshape(nb, cfg.block, -1), w_all.reshape(nb, cfg.block))
    _, placed = lax.scan(segment, cap_t, xs)
    return jnp.sum(placed) / jnp.maximum(jnp.sum(w_all), 1e-30)


@functools.partial(jax.jit, static_argnames=("cfg",))
def _objective(genome, cap_t, demand, orders, *, cfg):
    return jnp.mean(jax.vmap(lambda o: _objective_one(cfg, genome, cap_t, demand, o))(orders))


_value_and_grad = jax.jit(jax.value_and_grad(_objective.__wrapped__), static_argnames=("cfg",))


def _inputs(problem: Problem, trials: int, seed: int, block: int):
    validate(*problem)
    cap_t = jnp.asarray(np.asarray(problem.cluster.capacity, np.float32).T)
    demand = jnp.asarray(problem.workload.demand, jnp.float32)
    N = problem.workload.num_tasks
    keys = rng.trial_keys(seed, EXPERIMENT_TRAIN, trials)  # the task orders of the hard objective
    orders = np.asarray(rng.trial_orders(keys, N), np.int32)
    npad = -(-N // block) * block
    padded = np.full((trials, npad), -1, np.int32)
    padded[:, :N] = orders
    return cap_t, demand, jnp.asarray(padded)


def relaxed_objective(problem: Problem, genome, trials: int = 1, seed: int = 1,
                      cfg: RelaxConfig = RelaxConfig(), grad: bool = False):
    """The relaxed objective of `genome` averaged over `trials` task orders (and its gradient if `grad`)."""
    cfg.check()
    args = _inputs(problem, trials, seed, cfg.block)
    g = jnp.asarray(genome, jnp.float32)
    size = GENOME_SIZE if cfg.policy == "family" else len(get_policy(cfg.policy).params)
    if g.shape != (size,):
        raise InputError(f"genome must have {size} entries, got shape {g.shape}")
    if grad:
        value, gradient = _value_and_grad(g, *args, cfg=cfg)
        return float(value), np.asarray(gradient, np.float64)
    return float(_objective(g, *args, cfg=cfg))


@dataclasses.dataclass(frozen=True)
class TuneStep:
    """One optimizer step: relaxed objective, hard objective (what counts) and the genome."""

    index: int
    relaxed: float
    hard: float
    genome: tuple[float, ...]


@dataclasses.dataclass(frozen=True)
class TuneResult:
    """The genome with the best hard objective over all steps, and the history."""

    best: tuple[float, ...]
    hard: float
    heldout: float
    start_hard: float
    start_heldout: float
    history: list[TuneStep]

    def to_json(self) -> dict:
        """JSON-ready record."""
        return {"best": {"genome": list(self.best), "hard": self.hard, "heldout": self.heldout},
                "start": {"hard": self.start_hard, "heldout": self.start_heldout},
                "history": [dataclasses.asdict(h) | {"genome": list(h.genome)} for h in self.history]}


def tune(train: Problem, heldout: Problem, start, steps: int = 20, learning_rate: float = 0.05,
         trials: int = 1, seed: int = 1, sample_k: int = 0, slot=None, cfg: RelaxConfig = RelaxConfig(),
         on_step: Callable[[TuneStep], None] | None = None) -> TuneResult:
    """Gradient ascent (optax Adam) on the relaxed objective from genome `start`.

    Every step also packs the current genome for real (hard objective, picker
    `sample_k`, same trials as `jaxsched evolve`); the best hard genome is returned
    with its held-out fitness. Powers are optimized in log space and kept in
    [POWER_MIN, POWER_MAX].

    Args:
        train: the snapshot the relaxation is differentiated on.
        heldout: the snapshot the result is reported on.
        start: f32[8], the family genome to start from; for a user policy (`cfg.policy`), its
            parameters, or None for its registered ones.
        steps: optimizer steps.
        learning_rate: Adam's learning rate.
        trials: shuffled task orders.
        seed: the trials' seed.
        sample_k: the picker of the hard objective (0: full scan).
        slot: the standard slot per dimension.
        cfg: the relaxation's temperature, sharpness and block size.
        on_step: on_step(s) after each step.

    Returns:
        The TuneResult: every step, and the best hard genome with its held-out fitness.
    """
    cfg.check()
    if steps < 0:
        raise InputError(f"steps must be >= 0, got {steps}")
    if not learning_rate > 0:
        raise InputError(f"learning rate must be > 0, got {learning_rate}")
    args = _inputs(train, trials, seed, cfg.block)
    if cfg.policy == "family":
        g0 = canonical(np.asarray(start, np.float32))[0]
        params = jnp.concatenate([jnp.asarray(g0[:6]), jnp.log(jnp.asarray(g0[6:]))])
        to_genome = lambda p: jnp.concatenate([p[:6], jnp.clip(jnp.exp(p[6:]), POWER_MIN, POWER_MAX)])
        log_lo, log_hi = np.float32(np.log(POWER_MIN)), np.float32(np.log(POWER_MAX))
        project = lambda p: p.at[6:].set(jnp.clip(p[6:], log_lo, log_hi))
    else:  # a user policy: its parameters themselves, inside their bounds
        p = get_policy(cfg.policy)
        if not p.params:
            raise InputError(f"policy {cfg.policy!r} has no parameters to tune")
        lo, hi = p.box()
        params = jnp.asarray(np.clip(np.asarray(p.params if start is None else start, np.float32), lo, hi))
        if params.shape != (len(p.params),):
            raise InputError(f"start must have {len(p.params)} entries for {cfg.policy!r}, got shape {params.shape}")
        to_genome = lambda q: q
        project = lambda q: jnp.clip(q, lo, hi)
    opt = optax.adam(learning_rate)
    state = opt.init(params)
    loss = jax.jit(jax.value_and_grad(lambda p: -_objective.__wrapped__(to_genome(p), *args, cfg=cfg)))
    fit = lambda prob, g, exp: float(fitness(prob, g, trials, seed, sample_k, slot, exp, policy=cfg.policy).mean())
    history = []
    for i in range(steps + 1):
        genome = np.asarray(to_genome(params), np.float32)
        value, grads = loss(params)
        record = TuneStep(index=i, relaxed=float(-value), hard=fit(train, genome, EXPERIMENT_TRAIN),
                          genome=tuple(float(x) for x in genome))
        history.append(record)
        if on_step is not None:
            on_step(record)
        if i < steps:
            with jax.numpy_dtype_promotion("standard"):  # optax mixes its int32 step count with floats
                updates, state = opt.update(grads, state, params)
            params = project(optax.apply_updates(params, updates))
    best = max(history, key=lambda h: (h.hard, -h.index))
    held = lambda g: fit(heldout, g, EXPERIMENT_HELDOUT)
    return TuneResult(best=best.genome, hard=best.hard, heldout=held(best.genome), start_hard=history[0].hard,
                      start_heldout=held(history[0].genome), history=history)
