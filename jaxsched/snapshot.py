"""The snapshot experiment: pack one workload with every policy over shuffled trials.

All (policy, trial) pairs run as one batched packing; trial t uses the same task order
and the same random stream for every policy (common random numbers). Metrics are
summarized per policy as mean, spread (sample standard deviation), min and max over
trials.
"""

from __future__ import annotations

import dataclasses
from typing import Callable

import numpy as np

from .errors import InputError

from . import rng
from .compaction import SearchResult, compaction, compaction_and_inflation, inflation
from .metrics import Metrics, snapshot_metrics
from .packing import PackConfig, pack
from .policies import ALPHA_EVOLVE_GENOME, GENOME_SIZE, PLACEMENT_METHODS, row_genomes, slot_vector
from .user_policies import check_policies
from .types import Cluster, Workload, validate

EXPERIMENT = "snapshot"


@dataclasses.dataclass(frozen=True)
class SnapshotResult:
    """Per-(policy, trial) metrics of one snapshot experiment."""

    policies: tuple[str, ...]
    resources: tuple[str, ...]
    metrics: Metrics  # arrays with leading axes [P, T]
    placement: np.ndarray  # i32[P, T, N]
    searches: dict[str, SearchResult] = dataclasses.field(default_factory=dict)  # compaction, inflation

    def table(self) -> dict[str, dict[str, np.ndarray]]:
        """{policy: {metric name: f64[T] values}} with per-dimension metrics split out."""
        out = {}
        for p, name in enumerate(self.policies):
            m = {
                "placed": self.metrics.placed[p],
                "placed_fraction": self.metrics.placed_fraction[p],
                "placed_weighted": self.metrics.placed_weighted[p],
                "holes": self.metrics.holes[p],
            }
            for x, res in enumerate(self.resources):
                m[f"utilization_{res}"] = self.metrics.utilization[p][:, x]
            for x, res in enumerate(self.resources):
                m[f"stranding_{res}"] = self.metrics.stranding[p][:, x]
            for key, search in self.searches.items():
                if not np.all(np.isnan(search.value[p])):  # NaN: not computed for this method
                    m[key] = search.value[p]
            out[name] = {k: np.asarray(v, np.float64) for k, v in m.items()}
        return out

    def summary(self) -> dict[str, dict[str, dict[str, float | list[float]]]]:
        """{policy: {metric: {mean, std, min, median, max, trials}}}, plain floats for JSON.

        Search metrics also say how many trials sit at the search's ceiling, and what it means.
        """
        out = {name: {k: summarize(v) if not np.all(np.isnan(v)) else {"undefined": UNDEFINED}
                      for k, v in metrics.items()} for name, metrics in self.table().items()}
        for p, name in enumerate(self.policies):
            for key, search in self.searches.items():
                if key not in out[name]:
                    out[name][key] = {"not_computed": "compaction and inflation search over policy packings; "
                                      f"{name} is not a scoring policy"}
                    continue
                out[name][key]["at_ceiling"] = int(np.sum(search.ceiling[p]))
                out[name][key]["ceiling_means"] = search.reason
        return out


UNDEFINED = "0/0: no task, or no task requesting anything (a demand-weighted share of nothing)"


def summarize(values: np.ndarray) -> dict[str, float | list[float]]:
    """Mean, sample std (0 for one trial), min, median, max and the per-trial values."""
    v = np.asarray(values, np.float64)
    return {
        "mean": float(v.mean()),
        "std": float(v.std(ddof=1)) if v.size > 1 else 0.0,
        "min": float(v.min()),
        "median": float(np.median(v)),
        "max": float(v.max()),
        "trials": [float(x) for x in v],
    }


@dataclasses.dataclass(frozen=True)
class SnapshotConfig:
    """A snapshot experiment: every policy packed over `trials` shuffled task orders.

    Trial t of every policy uses the same task order and random stream, the key of
    (seed, "snapshot", t) (common random numbers).
    """

    policies: tuple[str, ...]  # registered policies, and placement methods such as "cvxcluster"
    trials: int = 5
    seed: int = 1
    sample_k: int = 0  # 0: full scan; K > 0: K machines drawn per placement, full scan if none fits
    slot: tuple[float, ...] | None = None  # None: 0.05 on CPU and memory
    genome: tuple[float, ...] | None = None  # w0..w5, p1, p2 of `family` rows (default alpha_evolve's point)
    compact: bool = False  # also compute compaction
    inflate: str | None = None  # also compute inflation in this mode: "scale" or "clone"
    search_depth: int = 1  # binary-search levels per batched round (2^depth - 1 candidates per search)


def run_snapshot(cluster: Cluster, workload: Workload, cfg: SnapshotConfig,
                 progress: Callable[[int, int], None] | None = None,
                 search_progress: Callable[[str, int], None] | None = None) -> SnapshotResult:
    """Pack `workload` on `cluster` with each policy over shuffled trials, and measure the packings.

    Args:
        cluster: the machines.
        workload: the tasks.
        cfg: the experiment: policies, trials, seed, picker, searches.
        progress: progress(done, total) of the packing.
        search_progress: search_progress(metric, round) after each round of compaction or inflation.

    Returns:
        The SnapshotResult: metrics per (policy, trial), placements, and the searches' results.

    Raises:
        InputError: a malformed cluster or workload, or bad settings.
    """
    policies, trials, seed, sample_k = tuple(cfg.policies), cfg.trials, cfg.seed, cfg.sample_k
    slot, genome, compact, inflate, search_depth = cfg.slot, cfg.genome, cfg.compact, cfg.inflate, cfg.search_depth
    validate(cluster, workload)
    if trials < 1:
        raise InputError(f"trials must be >= 1, got {trials}")
    R = cluster.num_resources
    slot = slot_vector(slot, R)
    g = np.asarray(ALPHA_EVOLVE_GENOME if genome is None else genome, np.float32)
    if g.shape != (GENOME_SIZE,) or not np.all(np.isfinite(g)):
        raise InputError(f"genome must be {GENOME_SIZE} finite numbers (w0..w5, p1, p2)")
    scoring = tuple(p for p in policies if p not in PLACEMENT_METHODS)
    keys = rng.trial_keys(seed, EXPERIMENT, trials)
    M, N = cluster.num_machines, workload.num_tasks
    free = np.zeros((len(policies), trials, M, R), np.float32)
    placement = np.zeros((len(policies), trials, N), np.int32)
    rows = [policies.index(p) for p in scoring]
    if scoring:
        pack_cfg = PackConfig(policies=scoring, sample_k=int(sample_k), slot=slot)
        check_policies(scoring, cluster, workload, slot)
        genomes = row_genomes(scoring, g)
        state = pack(cluster, workload, pack_cfg, keys, genomes=genomes, progress=progress)
        free[rows], placement[rows] = np.asarray(state.free), np.asarray(state.placement)
    for p, name in enumerate(policies):
        if name in PLACEMENT_METHODS:
            free[p], placement[p] = _cvxcluster(cluster, workload, trials, seed)
    metrics = snapshot_metrics(free, cluster.capacity, placement, workload.demand, slot)
    metrics = Metrics(*(np.asarray(x) for x in metrics))
    if search_depth < 1:
        raise InputError(f"search_depth must be >= 1, got {search_depth}")
    searches = {}
    report = lambda name: None if search_progress is None else (lambda r: search_progress(name, r))
    if scoring and compact and inflate == "scale":  # one search: both metrics' candidates in each packing
        comp, infl = compaction_and_inflation(cluster, workload, pack_cfg, keys, genomes, metrics.placed[rows] == N,
                                              search_depth, progress=report("compaction + inflation"))
        searches["compaction"] = _rows_of(comp, rows, len(policies))
        searches["inflation"] = _rows_of(infl, rows, len(policies))
    elif scoring and compact:
        searches["compaction"] = _rows_of(compaction(cluster, workload, pack_cfg, keys, genomes,
                                                     metrics.placed[rows] == N, search_depth,
                                                     progress=report("compaction")), rows, len(policies))
    if scoring and inflate is not None and "inflation" not in searches:
        searches["inflation"] = _rows_of(inflation(cluster, workload, pack_cfg, keys, genomes, inflate, search_depth,
                                                   progress=report("inflation")), rows, len(policies))
    resources = tuple(cluster.resources)[:R] if len(cluster.resources) >= R else tuple(f"r{x}" for x in range(R))
    return SnapshotResult(policies=tuple(policies), resources=resources, metrics=metrics,
                          placement=placement, searches=searches)


def _rows_of(search: SearchResult, rows: list[int], num_rows: int) -> SearchResult:
    """A search over the scoring policies spread onto all rows; other rows get NaN (not computed)."""
    value = np.full((num_rows,) + search.value.shape[1:], np.nan)
    ceiling = np.zeros(value.shape, bool)
    value[rows], ceiling[rows] = search.value, search.ceiling
    return dataclasses.replace(search, value=value, ceiling=ceiling)


def _cvxcluster(cluster: Cluster, workload: Workload, trials: int, seed: int):
    """Free capacity f32[T, M, R] and placement i32[T, N] of CvxCluster on the snapshot, per trial."""
    from .cvx import allocate, from_snapshot

    problem = from_snapshot(cluster, workload)
    placements = np.stack([allocate(problem, seed=seed, trial=t).placement for t in range(trials)])
    free = np.broadcast_to(np.asarray(cluster.capacity, np.float64), (trials,) + problem.capacity.shape).copy()
    for t in range(trials):
        on = placements[t] >= 0
        np.add.at(free[t], placements[t][on], -np.asarray(workload.demand, np.float64)[on])
    return free.astype(np.float32), placements
