"""Evolutionary search over the parameterized scoring family of docs/spec/POLICIES.md.

A (mu + lambda) search: each generation mutates and recombines the mu parents into
lambda children, packs all children in one batched packing (one `family` row per
genome, every trial in the same program), and keeps the mu best of parents and
children. Fitness is the demand-weighted placed fraction, averaged over trials, on
the training snapshot; every genome sees the same task orders and random draws
(common random numbers), so fitness is a deterministic function of the genome and
parents keep theirs. A held-out snapshot is scored for the best genome of every
generation and never used to select.

Genomes are kept in a canonical form: the placements of a genome do not change when
its weights w0..w5 are multiplied by a positive constant, so weights are scaled to
max |w| = 1; powers p1, p2 stay in [POWER_MIN, POWER_MAX].
"""

from __future__ import annotations

import dataclasses
import zlib
from typing import Callable, NamedTuple

import numpy as np

from . import rng
from .errors import InputError
from .packing import PackConfig, pack
from .policies import ALPHA_EVOLVE_GENOME, GENOME_NAMES, GENOME_SIZE, get_policy, row_genomes, slot_vector
from .types import Cluster, Workload, validate

POWER_MIN, POWER_MAX = 0.25, 4.0
EXPERIMENT_TRAIN = "evolve"
EXPERIMENT_HELDOUT = "evolve-heldout"

# Named points of the family that seed the first generation beside mutants of alpha_evolve.
SEED_GENOMES = {
    "alpha_evolve": ALPHA_EVOLVE_GENOME,
    "best_fit": (0, 0, 0, 0, -1, 0, 1, 1),
    "ae_shape": (0, 0, 1, 1, 0, 0, 1, 1),
    "ae_pow": (1, 1, 1, 1, 0, 0, 1, 2),
    "balance": (0, 0, 0, 0, 0, 1, 1, 1),
}


STRATEGIES = ("mu_lambda", "cma_es", "snes", "open_es")


@dataclasses.dataclass(frozen=True)
class EvolveConfig:
    """Settings of one evolutionary search (all static)."""

    generations: int = 20
    population: int = 64  # lambda: children per generation, packed together
    parents: int = 16  # mu: survivors of each generation
    sigma: float = 0.3  # mutation scale, on canonical weights and on log powers
    crossover: float = 0.5  # chance a child mixes two parents coordinate by coordinate
    trials: int = 2  # shuffled task orders per genome (common random numbers)
    sample_k: int = 64  # picker of the fitness packing (0: full scan)
    seed: int = 1
    slot: tuple[float, ...] | None = None
    # "mu_lambda" (this module's), or an evosax evolution strategy: "cma_es", "snes", "open_es"
    strategy: str = "mu_lambda"
    # The parameterized policy searched: the family, or a user policy with finite bounds on every parameter
    policy: str = "family"

    def check(self) -> None:
        """Raise InputError naming the first bad setting."""
        for name in ("generations", "population", "parents", "trials"):
            if getattr(self, name) < 1:
                raise InputError(f"{name} must be >= 1, got {getattr(self, name)}")
        if self.strategy == "mu_lambda" and self.parents > self.population:
            raise InputError(f"parents ({self.parents}) must not exceed population ({self.population})")
        if not self.sigma > 0:
            raise InputError(f"sigma must be > 0, got {self.sigma}")
        if not 0 <= self.crossover <= 1:
            raise InputError(f"crossover must be in [0, 1], got {self.crossover}")
        if self.sample_k < 0:
            raise InputError(f"sample_k must be >= 0, got {self.sample_k}")
        space(self.policy)
        if self.strategy not in STRATEGIES:
            raise InputError(f"strategy must be one of {', '.join(STRATEGIES)}, got {self.strategy!r}")


class Problem(NamedTuple):
    """One packing problem that genomes are scored on."""

    cluster: Cluster
    workload: Workload


def canonical(genomes: np.ndarray) -> np.ndarray:
    """Genomes with weights scaled to max |w| = 1 and powers clipped to [POWER_MIN, POWER_MAX]."""
    g = np.array(genomes, np.float64, ndmin=2)
    scale = np.max(np.abs(g[:, :6]), axis=1, keepdims=True)
    g[:, :6] /= np.where(scale > 0, scale, 1.0)
    g[:, 6:] = np.clip(g[:, 6:], POWER_MIN, POWER_MAX)
    return g.astype(np.float32)


class Space(NamedTuple):
    """What is searched: the start point, the box and the normal form of a policy's parameters."""

    policy: str
    start: np.ndarray  # f32[D]: alpha_evolve's point for the family, a user policy's defaults
    low: np.ndarray  # f32[D]
    high: np.ndarray  # f32[D]
    names: tuple[str, ...]
    seeds: np.ndarray | None = None  # f32[S, D]: named points the first generation starts with (start first)

    def normal(self, g) -> np.ndarray:
        """The family's canonical genomes, a user policy's clipped to its bounds."""
        if self.policy == "family":
            return canonical(g)
        return np.clip(np.array(g, np.float64, ndmin=2), self.low, self.high).astype(np.float32)


def space(policy: str = "family") -> Space:
    """The search space of `policy`: the family, or a parameterized user policy with finite bounds.

    Raises:
        InputError: an unknown policy, one without parameters, or a parameter without finite bounds.
    """
    if policy == "family":
        return Space("family", canonical(np.array([ALPHA_EVOLVE_GENOME]))[0], np.full(GENOME_SIZE, -np.inf),
                     np.full(GENOME_SIZE, np.inf), GENOME_NAMES)
    try:
        p = get_policy(policy)
    except KeyError as e:
        raise InputError(e.args[0]) from None
    if not p.params:
        raise InputError(f"policy {policy!r} has no parameters to search (the family or a parameterized user policy)")
    unbounded = [n for n, (lo, hi) in zip(p.param_names, p.bounds) if not (np.isfinite(lo) and np.isfinite(hi))]
    if unbounded:
        raise InputError(f"policy {policy!r}: give finite bounds to search parameter {unbounded[0]!r} "
                         f"(jaxsched.policy(..., bounds={{...}}))")
    lo, hi = p.box()
    return Space(policy, np.clip(np.array(p.params, np.float32), lo, hi), lo, hi, p.param_names)


def fitness(problem: Problem, genomes: np.ndarray, trials: int, seed: int, sample_k: int = 0, slot=None,
            experiment: str = EXPERIMENT_TRAIN, progress: Callable[[int, int], None] | None = None,
            policy: str = "family") -> np.ndarray:
    """Demand-weighted placed fraction (`placed_weighted`) of each genome in each trial.

    All genomes and trials run as one batched packing.

    Args:
        problem: the snapshot.
        genomes: f32[P, D] genomes of `policy` (D = 8 for the family).
        trials: shuffled task orders, the same for every genome.
        seed: the trials' seed.
        sample_k: the picker (0: full scan).
        slot: the standard slot per dimension.
        experiment: the name of the trials' random stream.
        progress: progress(done, total) during the packing.
        policy: the parameterized policy the genomes are of.

    Returns:
        f64[P, T].
    """
    d = GENOME_SIZE if policy == "family" else len(get_policy(policy).params)
    genomes = np.asarray(genomes, np.float32).reshape(-1, d)
    names = (policy,) * len(genomes)
    rows = row_genomes(names)
    rows[:, :d] = genomes
    genomes = rows
    cluster, workload = problem
    slot = slot_vector(slot, cluster.num_resources)
    cfg = PackConfig(policies=names, sample_k=sample_k, slot=slot)
    keys = rng.trial_keys(seed, experiment, trials)
    state = pack(cluster, workload, cfg, keys, genomes=genomes, progress=progress)
    # placed_weighted of metrics.py, in float64 on the host: the same bits however genomes are batched.
    weight = np.sum(np.asarray(workload.demand, np.float64), axis=1)
    total = weight.sum()
    return (np.asarray(state.placement) >= 0) @ weight / (total if total > 0 else 1.0)


def initial_population(size: int, gen: np.random.Generator, sigma: float, sp: Space | None = None) -> np.ndarray:
    """The named seed genomes (as many as fit), then mutants of alpha_evolve; for another space its
    seeds (or its start point), then mutants of its start point."""
    if sp is not None and sp.policy != "family":
        named = sp.start[None] if sp.seeds is None else np.asarray(sp.seeds, np.float32)
        named = named[:size]
        base = np.repeat(sp.start[None], size - len(named), axis=0)
        return np.concatenate([named, mutate(base, gen, sigma, sp)]) if len(base) else named
    seeds = canonical(np.array(list(SEED_GENOMES.values()), np.float32))[:size]
    base = np.repeat(canonical(np.array([ALPHA_EVOLVE_GENOME]))[None, 0], size - len(seeds), axis=0)
    return np.concatenate([seeds, mutate(base, gen, sigma)], axis=0) if size > len(seeds) else seeds


def mutate(genomes: np.ndarray, gen: np.random.Generator, sigma: float, sp: Space | None = None) -> np.ndarray:
    """Gaussian steps on the weights (a weight is zeroed with chance 0.1) and log-normal steps on the powers;
    for a user policy, Gaussian steps of sigma x (high - low) per parameter, clipped to its bounds."""
    g = np.array(genomes, np.float64)
    if sp is not None and sp.policy != "family":
        return sp.normal(g + sigma * (sp.high - sp.low) * gen.standard_normal(g.shape))
    g[:, :6] += sigma * gen.standard_normal(g[:, :6].shape)
    g[:, :6] *= gen.random(g[:, :6].shape) >= 0.1
    g[:, 6:] *= np.exp(sigma * gen.standard_normal(g[:, 6:].shape))
    return canonical(g)


def children(parents: np.ndarray, count: int, gen: np.random.Generator, cfg: EvolveConfig,
             sp: Space | None = None) -> np.ndarray:
    """`count` children: a uniformly drawn parent, with chance `crossover` mixed with a second one, mutated."""
    a = parents[gen.integers(0, len(parents), count)]
    b = parents[gen.integers(0, len(parents), count)]
    mix = (gen.random(count) < cfg.crossover)[:, None] & (gen.random(a.shape) < 0.5)
    return mutate(np.where(mix, b, a), gen, cfg.sigma, sp or space(cfg.policy))


@dataclasses.dataclass(frozen=True)
class Generation:
    """What one generation found: fitness of its best genome so far and of its children."""

    index: int
    best: float  # training fitness of the best genome kept so far
    median: float  # median training fitness of this generation's newly evaluated genomes
    heldout: float  # held-out fitness of the best genome kept so far
    genome: tuple[float, ...]  # that best genome


@dataclasses.dataclass(frozen=True)
class EvolveResult:
    """The champion, the baseline alpha_evolve, and the per-generation history."""

    champion: tuple[float, ...]
    train: float
    heldout: float
    baseline_train: float  # alpha_evolve on the same snapshots, trials and draws
    baseline_heldout: float
    history: list[Generation]
    evaluations: int  # genomes packed on the training snapshot (each over every trial)
    policy: str = "family"  # the policy searched; its start point is the baseline
    names: tuple[str, ...] = GENOME_NAMES  # the genome's coordinates

    def to_json(self) -> dict:
        """JSON-ready: genomes by coordinate name, history as a list of records."""
        named = lambda g: dict(zip(self.names, (float(x) for x in g)))
        return {"policy": self.policy,
            "champion": {"genome": [float(x) for x in self.champion], "named": named(self.champion),
                         "train": self.train, "heldout": self.heldout},
            "alpha_evolve": {"train": self.baseline_train, "heldout": self.baseline_heldout},
            "evaluations": self.evaluations,
            "history": [dataclasses.asdict(h) | {"genome": [float(x) for x in h.genome]} for h in self.history],
        }


def evolve(train: Problem, heldout: Problem, cfg: EvolveConfig,
           on_generation: Callable[[Generation], None] | None = None,
           progress: Callable[[int, int], None] | None = None) -> EvolveResult:
    """Run the (mu + lambda) search of `cfg` on `train`, reporting the held-out fitness of each best genome.

    Args:
        train: the snapshot fitness is measured on.
        heldout: the snapshot the best genome of each generation is reported on.
        cfg: population, parents, generations, mutation scale, trials, picker, seed.
        on_generation: on_generation(g) after each generation (generation 0 is the initial
            population).
        progress: progress(done, total) during each population's packing.

    Returns:
        The EvolveResult: the history, the champion and alpha_evolve's figures beside it.
    """
    cfg.check()
    for problem in (train, heldout):
        validate(*problem)
    sp = space(cfg.policy)
    score = lambda g: fitness(train, g, cfg.trials, cfg.seed, cfg.sample_k, cfg.slot, progress=progress,
                              policy=cfg.policy).mean(1)
    held_cache: dict[bytes, float] = {}

    def held(genome):
        key = np.asarray(genome, np.float32).tobytes()
        if key not in held_cache:
            held_cache[key] = float(fitness(heldout, genome, cfg.trials, cfg.seed, cfg.sample_k, cfg.slot,
                                            EXPERIMENT_HELDOUT, policy=cfg.policy).mean())
        return held_cache[key]

    return run_search(score, held, cfg, sp, on_generation)


def run_search(score: Callable[[np.ndarray], np.ndarray], held: Callable[[np.ndarray], float] | None, cfg, sp: Space,
               on_generation: Callable[[Generation], None] | None = None) -> EvolveResult:
    """The search of `cfg` (its strategy, population, parents, generations, sigma, crossover and
    seed) over the space `sp`, whatever the genomes are scored on.

    Args:
        score: f32[P, D] genomes -> f64[P] fitness (higher is better), one batch per generation.
        held: a genome -> its held-out fitness, reported for the best genome of every generation
            and never used to select; None: not reported (NaN).
        cfg: an EvolveConfig, or any object with those fields.
        sp: the search space; its start point is the baseline.
        on_generation: on_generation(g) after each generation (0 is the initial population).

    Returns:
        The EvolveResult.
    """
    held = held or (lambda genome: float("nan"))
    if cfg.strategy != "mu_lambda":
        return _evolve_evosax(score, held, cfg, on_generation, sp)
    gen = np.random.default_rng([cfg.seed, zlib.crc32(EXPERIMENT_TRAIN.encode())])
    pool = initial_population(cfg.population, gen, cfg.sigma, sp)
    fit = score(pool)
    baseline_train = float(fit[0])  # the first seed genome is the start point
    evaluations = len(pool)
    history = []
    for g in range(cfg.generations + 1):
        if g > 0:
            kids = children(pool, cfg.population, gen, cfg, sp)
            kid_fit = score(kids)
            evaluations += len(kids)
            pool, fit = np.concatenate([pool, kids]), np.concatenate([fit, kid_fit])
            new_fit = kid_fit
        else:
            new_fit = fit
        keep = np.argsort(-fit, kind="stable")[: cfg.parents]  # ties: the older genome
        pool, fit = pool[keep], fit[keep]
        record = Generation(index=g, best=float(fit[0]), median=float(np.median(new_fit)), heldout=held(pool[0]),
                            genome=tuple(float(x) for x in pool[0]))
        history.append(record)
        if on_generation is not None:
            on_generation(record)
    return EvolveResult(champion=history[-1].genome, train=history[-1].best, heldout=history[-1].heldout,
                        baseline_train=baseline_train, baseline_heldout=held(sp.start),
                        history=history, evaluations=evaluations, policy=sp.policy, names=sp.names)


def _strategy(cfg: EvolveConfig, size: int):
    """The evosax strategy of `cfg` and its parameters, its initial scale set to `cfg.sigma`."""
    import jax.numpy as jnp
    from evosax import algorithms

    cls = {"cma_es": algorithms.CMA_ES, "snes": algorithms.SNES, "open_es": algorithms.Open_ES}[cfg.strategy]
    es = cls(population_size=cfg.population, solution=jnp.zeros(size, jnp.float32))
    params = es.default_params
    if hasattr(params, "std_init"):
        params = params.replace(std_init=cfg.sigma)
    return es, params


def _lenient(fn):
    import jax

    with jax.numpy_dtype_promotion("standard"), jax.numpy_rank_promotion("allow"):
        return fn()


def _evolve_evosax(score, held, cfg: EvolveConfig, on_generation, sp: Space) -> EvolveResult:
    """An evosax strategy from alpha_evolve's point: generations 0..G each ask `population`
    genomes, packed in one batch as canonical genomes, and tell their fitness (negated: evosax
    minimizes). The best genome evaluated so far is the champion; the same budget as (mu + lambda)."""
    import jax
    import jax.numpy as jnp

    # evosax relies on JAX's default promotion rules; callers (our tests) may have made them strict.
    lenient = lambda fn, *a: _lenient(lambda: fn(*a))
    es, params = lenient(_strategy, cfg, len(sp.start))
    alpha = sp.start
    key = jax.random.fold_in(rng.seed_key(cfg.seed), zlib.crc32(cfg.strategy.encode()))
    key, k0 = jax.random.split(key)
    state = lenient(es.init, k0, jnp.asarray(alpha), params)
    best, best_fit = alpha, float(score(alpha[None])[0])
    baseline_train, evaluations, history = best_fit, 1, []
    for g in range(cfg.generations + 1):
        key, ka, kt = jax.random.split(key, 3)
        x, state = lenient(es.ask, ka, state, params)
        pop = sp.normal(np.asarray(x))
        fit = score(pop)
        evaluations += len(pop)
        state, _ = lenient(es.tell, kt, x, -jnp.asarray(fit, jnp.float32), state, params)
        i = int(np.argmax(fit))
        if fit[i] > best_fit:  # ties: the earlier genome
            best, best_fit = pop[i], float(fit[i])
        record = Generation(index=g, best=best_fit, median=float(np.median(fit)), heldout=held(best),
                            genome=tuple(float(v) for v in best))
        history.append(record)
        if on_generation is not None:
            on_generation(record)
    return EvolveResult(champion=history[-1].genome, train=best_fit, heldout=history[-1].heldout,
                        baseline_train=baseline_train, baseline_heldout=held(alpha), history=history,
                        evaluations=evaluations, policy=sp.policy, names=sp.names)
