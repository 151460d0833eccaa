"""Searching the GPU-sharing family for a policy that beats FGD on pod lists it never saw
(docs/gpushare.md, "Searching beyond FGD").

Fitness of a genome: its GPU allocation ratio averaged over arrived 90..130% of the GPU
capacity, averaged over the training pod lists and training seeds. Every generation's genomes
x training seeds of one list run as one batched simulation (one `family.FAMILY` row per
genome and seed), the lists one after another. The training seeds must not be the paper's
(42..51), and the held-out lists must not be training lists: the held-out figures come from
runs the search never saw, and are computed once, for the champion, after the search.
"""

from __future__ import annotations

import dataclasses
import time
from typing import Callable

import numpy as np

from ..errors import InputError
from ..evolve import STRATEGIES, EvolveResult, Generation, Space, run_search
from . import family
from .data import GpuCluster, PodList, load_gpushare
from .engine import simulate
from .experiment import PAPER_SEEDS, REPORTED_AT
from .metrics import curves
from .workload import TUNE, arrivals, typical_pods

TRAIN_LISTS = ("default", "cpu100", "gpushare60", "gpuspec20", "multigpu30")
TRAIN_SEEDS = (0, 1, 2, 3)
HELDOUT_LISTS = ("cpu050", "cpu200", "cpu250", "gpushare40", "gpushare80", "gpushare100", "gpuspec10",
                 "gpuspec25", "gpuspec33", "multigpu20", "multigpu40", "multigpu50")
FITNESS_PERCENTS = (90, 130)  # arrived workload range (inclusive) the fitness averages the allocation over
BASELINES = ("FGD", "BestFit")


@dataclasses.dataclass(frozen=True)
class GpuSearchConfig:
    """A search: its strategy and budget, and the protocol's lists and seeds (all static)."""

    strategy: str = "cma_es"
    generations: int = 20  # populations evaluated, the first included
    population: int = 64
    parents: int = 16  # mu of (mu + lambda)
    sigma: float = 0.15  # initial scale: x (high - low) per coordinate for (mu + lambda), the std for evosax
    crossover: float = 0.5
    seed: int = 1  # the search's own stream
    train_lists: tuple[str, ...] = TRAIN_LISTS
    train_seeds: tuple[int, ...] = TRAIN_SEEDS
    heldout_lists: tuple[str, ...] = HELDOUT_LISTS
    heldout_seeds: tuple[int, ...] = PAPER_SEEDS
    tune: float = TUNE

    def check(self) -> None:
        """Raise InputError naming the first bad setting, or a protocol the held-out figures would not survive."""
        for name in ("generations", "population", "parents"):
            if getattr(self, name) < 1:
                raise InputError(f"{name} must be >= 1, got {getattr(self, name)}")
        if self.strategy not in STRATEGIES:
            raise InputError(f"strategy must be one of {', '.join(STRATEGIES)}, got {self.strategy!r}")
        if self.strategy == "mu_lambda" and self.parents > self.population:
            raise InputError(f"parents ({self.parents}) must not exceed population ({self.population})")
        if not self.sigma > 0:
            raise InputError(f"sigma must be > 0, got {self.sigma}")
        if self.tune < FITNESS_PERCENTS[1] / 100:
            raise InputError(f"tune must be at least {FITNESS_PERCENTS[1] / 100:g}: fitness averages the allocation "
                             f"over arrived {FITNESS_PERCENTS[0]}..{FITNESS_PERCENTS[1]}%, got {self.tune:g}")
        if not (self.train_lists and self.train_seeds):
            raise InputError("a search needs at least one training list and one training seed")
        seen = sorted(set(self.train_seeds) & set(self.heldout_seeds))
        if seen:
            raise InputError(f"train_seeds: seed {seen[0]} is a held-out seed; the held-out runs must be ones the "
                             f"search never saw")
        lists = [x for x in self.train_lists if x in self.heldout_lists]
        if lists:
            raise InputError(f"train_lists: {lists[0]} is a held-out list; the held-out lists must be ones the "
                             f"search never saw")


def search_space() -> Space:
    """The family's box, from FGD's point, with the paper's other policies in the first generation."""
    seeds = np.array([family.PAPER_POINTS[p] for p in family.PAPER_POINTS], np.float32)
    return Space(family.FAMILY, seeds[0], family.LOW.astype(np.float32), family.HIGH.astype(np.float32),
                 family.GENOME_NAMES, seeds)


class Lists:
    """The pod lists of a protocol, loaded once: {name: PodList}, and the cluster."""

    def __init__(self, cluster: GpuCluster, pods: dict[str, PodList]):
        self.cluster = cluster
        self.pods = dict(pods)

    @classmethod
    def load(cls, trace_dir: str, names, node_list: str = "gpu_node") -> "Lists":
        """The openb lists `names` of a trace directory (InputError naming a missing or bad file)."""
        names = list(dict.fromkeys(names))
        cluster, first = load_gpushare(trace_dir, names[0], node_list)
        return cls(cluster, {names[0]: first} | {n: load_gpushare(trace_dir, n, node_list)[1] for n in names[1:]})


def allocation(lists: Lists, name: str, policies: tuple[str, ...], genomes, seeds, tune: float = TUNE,
               progress: Callable[[int, int], None] | None = None) -> dict[str, np.ndarray]:
    """Each (policy, seed) run of one pod list: {"fitness": f64[P, S] (mean allocation % over arrived
    90..130%), "at_100": f64[P, S] (at exactly 100%)}; genomes f64[P, D] as `engine.simulate` takes them."""
    pods = lists.pods[name]
    runs = [arrivals(pods, lists.cluster, s, tune) for s in seeds]
    tr = simulate(lists.cluster, pods, typical_pods(pods), runs, policies, progress, genomes=genomes)
    alloc = curves(tr, lists.cluster.total_gpus).alloc.reshape(len(policies), len(seeds), -1)
    lo, hi = FITNESS_PERCENTS
    window = alloc[..., lo:hi + 1]
    ok = np.isfinite(window)
    fit = np.where(ok, window, 0.0).sum(-1) / np.maximum(ok.sum(-1), 1)
    return {"fitness": np.where(ok.any(-1), fit, np.nan), "at_100": alloc[..., REPORTED_AT]}


@dataclasses.dataclass(frozen=True)
class GpuSearchResult:
    """The search's history and champion, FGD's training fitness beside it, and its cost."""

    config: GpuSearchConfig
    result: EvolveResult
    evaluations: list[int]  # genomes evaluated after each generation (the curve's x)
    runs: int  # simulated runs: genomes evaluated x training lists x training seeds
    wall_s: float

    def to_json(self) -> dict:
        r = self.result
        named = lambda g: dict(zip(family.GENOME_NAMES, (float(x) for x in g)))
        return {"strategy": self.config.strategy, "protocol": {
                    "train_lists": list(self.config.train_lists), "train_seeds": list(self.config.train_seeds),
                    "heldout_lists": list(self.config.heldout_lists),
                    "heldout_seeds": list(self.config.heldout_seeds), "tune": self.config.tune,
                    "fitness": f"mean GPU allocation % over arrived {FITNESS_PERCENTS[0]}..{FITNESS_PERCENTS[1]}%, "
                               f"averaged over the training lists and seeds"},
                "champion": {"genome": [float(x) for x in r.champion], "named": named(r.champion),
                             "train_fitness": r.train},
                "FGD": {"train_fitness": r.baseline_train}, "evaluations": r.evaluations, "runs": self.runs,
                "wall_s": self.wall_s, "runs_per_s": self.runs / self.wall_s if self.wall_s > 0 else None,
                "history": [{"generation": h.index, "evaluations": e, "best": h.best, "median": h.median,
                             "genome": [float(x) for x in h.genome]} for h, e in zip(r.history, self.evaluations)]}


def search(lists: Lists, cfg: GpuSearchConfig, on_generation: Callable[[Generation, int], None] | None = None,
           progress: Callable[[int, int], None] | None = None) -> GpuSearchResult:
    """Search the family with cfg's strategy on the training lists and seeds (fitness in %).

    Args:
        lists: the pod lists (the training ones at least).
        cfg: the strategy, budget and protocol.
        on_generation: on_generation(generation, genomes evaluated so far) after each generation.
        progress: progress(pod steps done, pod steps) over the whole search (every generation's lists).

    Returns:
        The GpuSearchResult.
    """
    cfg.check()
    t0 = time.perf_counter()
    sp = search_space()
    counted = [0]
    steps = {n: max(len(arrivals(lists.pods[n], lists.cluster, s, cfg.tune).pods) for s in cfg.train_seeds)
             for n in cfg.train_lists}
    passes = cfg.generations + (cfg.strategy != "mu_lambda")  # an evosax strategy first scores its start alone
    total_steps, done = passes * sum(steps.values()), [0]

    def score(genomes: np.ndarray) -> np.ndarray:
        g = family.check_genome(np.asarray(genomes, np.float64))
        total = np.zeros(len(g))
        for name in cfg.train_lists:
            report = None if progress is None else \
                (lambda d, t, base=done[0]: progress(min(base + d, total_steps), total_steps))
            fit = allocation(lists, name, (family.FAMILY,) * len(g), g, cfg.train_seeds, cfg.tune, report)["fitness"]
            total += fit.mean(axis=1)
            done[0] += steps[name]
        counted[0] += len(g)
        return total / len(cfg.train_lists)

    marks: list[int] = []

    def report(g: Generation):
        marks.append(counted[0])
        if on_generation is not None:
            on_generation(g, counted[0])

    # run_search counts generations after the first; ours counts every population evaluated.
    inner = dataclasses.replace(cfg, generations=cfg.generations - 1)
    result = run_search(score, None, inner, sp, report)
    runs = result.evaluations * len(cfg.train_lists) * len(cfg.train_seeds)
    return GpuSearchResult(config=cfg, result=result, evaluations=marks, runs=runs, wall_s=time.perf_counter() - t0)


def compare(lists: Lists, genome, names, seeds, tune: float = TUNE,
            progress: Callable[[int, int], None] | None = None) -> dict[str, dict]:
    """The champion `genome` against FGD and BestFit on each list of `names` with `seeds`, per list:
    each policy's allocation at 100% per seed, its mean and sd, the champion's paired difference to
    each baseline (mean, sd, seeds better), the fitness (90..130%) and the unallocated GPUs at 100%."""
    genome = family.check_genome(np.asarray(genome, np.float64))
    policies = BASELINES + (family.FAMILY,)
    genomes = np.zeros((len(policies), family.GENOME_SIZE))
    genomes[-1] = genome
    out = {}
    for name in names:
        a = allocation(lists, name, policies, genomes, seeds, tune, progress)
        label = lambda p: "champion" if p == family.FAMILY else p
        entry = {"seeds": list(seeds)}
        for i, p in enumerate(policies):
            v = a["at_100"][i]
            entry[label(p)] = {"at_100": v.tolist(), "mean": float(np.mean(v)), "sd": _sd(v),
                               "fitness": float(np.mean(a["fitness"][i])),
                               "unallocated_gpus": float((100.0 - np.mean(v)) / 100.0 * lists.cluster.total_gpus)}
        for i, p in enumerate(BASELINES):
            d = a["at_100"][-1] - a["at_100"][i]
            entry[f"vs_{p}"] = {"mean": float(np.mean(d)), "sd": _sd(d), "better": int(np.sum(d > 0)),
                                "worse": int(np.sum(d < 0))}
        out[name] = entry
    return out


def _sd(v) -> float:
    v = np.asarray(v, np.float64)
    return float(np.std(v, ddof=1)) if len(v) > 1 else 0.0


def goal(heldout: dict[str, dict], train: dict[str, dict]) -> dict:
    """The issue's goal on the held-out figures: mean lead over FGD >= +0.5 points at 100%, behind FGD by
    more than 0.1 point on no list, and ahead of FGD on every training list with the held-out seeds."""
    leads = {n: e["vs_FGD"]["mean"] for n, e in heldout.items()}
    mean = float(np.mean(list(leads.values()))) if leads else float("nan")
    worst = min(leads, key=leads.get) if leads else None
    train_leads = {n: e["vs_FGD"]["mean"] for n, e in train.items()}
    met = bool(leads) and mean >= 0.5 and min(leads.values()) >= -0.1 and all(v > 0 for v in train_leads.values())
    return {"heldout_mean_lead_pp": mean, "worst_list": worst, "worst_lead_pp": leads.get(worst),
            "train_leads_pp": train_leads, "met": met,
            "rule": "held-out mean lead over FGD at 100% >= +0.5 pp, no list below FGD by more than 0.1 pp, "
                    "a lead on every training list with the held-out seeds"}
