"""The FGD paper's experiment on one pod list: every (policy, seed) run batched, its curves
and their summary over seeds (docs/gpushare.md)."""

from __future__ import annotations

import dataclasses
from typing import Callable

import numpy as np

from ..errors import InputError
from . import family
from .data import GpuCluster, PodList
from .engine import simulate
from .metrics import CURVES, PERCENTS, Curves, curves
from .policies import PAPER_POLICIES
from .workload import TUNE, TypicalPods, arrivals, typical_pods

PAPER_SEEDS = tuple(range(42, 52))
REPORTED_AT = 100  # the arrived workload (% of GPU capacity) that the paper's bar figures read


@dataclasses.dataclass(frozen=True)
class GpuShareConfig:
    """An experiment: policies x seeds on one pod list, tuned to `tune` x the GPU capacity."""

    policies: tuple[str, ...] = tuple(PAPER_POLICIES)
    seeds: tuple[int, ...] = PAPER_SEEDS
    tune: float = TUNE
    genome: tuple[float, ...] | None = None  # the genome of the policy family.FAMILY, where it is one of them


@dataclasses.dataclass(frozen=True)
class GpuShareResult:
    """The curves of every (policy, seed) run and what each run placed."""

    config: GpuShareConfig
    pod_list: str
    curves: Curves
    typical: TypicalPods
    pods: np.ndarray  # i64[B], pods that arrived in each run
    failed: np.ndarray  # i64[B], pods that found no node

    def policy_names(self) -> tuple[str, ...]:
        return tuple(self.config.policies)

    def summary(self) -> dict:
        """Per policy: each curve's mean, std, min and max over seeds at every arrived workload,
        its value at 100% per seed, and the failed pods; plain JSON types (NaN as None)."""
        out = {}
        for p in self.config.policies:
            rows = [b for b, q in enumerate(self.curves.policies) if q == p]
            entry = {"seeds": [self.curves.seeds[b] for b in rows],
                     "pods": [int(self.pods[b]) for b in rows], "failed": [int(self.failed[b]) for b in rows]}
            for name in CURVES:
                values = getattr(self.curves, name)[rows]
                entry[name] = {k: _json_list(v) for k, v in _over_seeds(values).items()}
                entry[name]["at_100"] = _json_list(values[:, REPORTED_AT])
            out[p] = entry
        return out

    def csv_rows(self, curve: str) -> tuple[list[str], list[list]]:
        """(header, rows) of one curve as the paper's analysis files lay it out: workload,
        sc_policy (numbered as the paper numbers its six), tune, seed, total_gpus, 0..130."""
        header = ["workload", "sc_policy", "tune", "seed", "total_gpus"] + [str(k) for k in PERCENTS]
        order = {name: i + 1 for i, name in enumerate(PAPER_POLICIES)}
        values = getattr(self.curves, curve)
        rows = []
        for b, (p, seed) in enumerate(zip(self.curves.policies, self.curves.seeds)):
            label = f"{order[p]:02d}-{p}" if p in order else p
            rows.append([f"openb_pod_list_{self.pod_list}", label, self.config.tune, seed, self.curves.total_gpus]
                        + ["" if not np.isfinite(v) else float(v) for v in values[b]])
        return header, rows


def _over_seeds(values: np.ndarray) -> dict[str, np.ndarray]:
    """Mean, sample std, min and max over the rows of f64[seeds, K], per column, ignoring NaN
    (NaN where a column has no value; std 0 with one)."""
    ok = np.isfinite(values)
    n = ok.sum(axis=0)
    filled = np.where(ok, values, 0.0)
    mean = np.where(n > 0, filled.sum(axis=0) / np.maximum(n, 1), np.nan)
    var = np.where(ok, (values - mean) ** 2, 0.0).sum(axis=0) / np.maximum(n - 1, 1)
    return {"mean": mean, "std": np.where(n > 0, np.sqrt(var), np.nan),
            "min": np.where(n > 0, np.where(ok, values, np.inf).min(axis=0), np.nan),
            "max": np.where(n > 0, np.where(ok, values, -np.inf).max(axis=0), np.nan)}


def _json_list(a) -> list:
    return [None if not np.isfinite(x) else float(x) for x in np.asarray(a, np.float64)]


def run_gpushare(cluster: GpuCluster, pods: PodList, cfg: GpuShareConfig = GpuShareConfig(),
                 progress: Callable[[int, int], None] | None = None) -> GpuShareResult:
    """Run every (policy, seed) of `cfg` on the pod list in one batched simulation.

    Args:
        cluster: the nodes (the paper's: openb_node_list_gpu_node.csv).
        pods: the pod list.
        cfg: policies, seeds and the target arrived workload.
        progress: progress(pods placed, pods) of the slowest share.

    Returns:
        The GpuShareResult: the allocation, fragmentation and fragmentation-ratio curves.

    Raises:
        InputError: no policy or seed, an unknown policy, a missing or bad genome of the family, or a
            target the list cannot reach.
    """
    if not cfg.policies or not cfg.seeds:
        raise InputError("a GPU-sharing experiment needs at least one policy and one seed")
    if not cfg.tune > 0:
        raise InputError(f"tune must be > 0, got {cfg.tune}")
    if pods.num_pods == 0:
        raise InputError(f"pod list {pods.name}: no pods")
    if len(set(cfg.policies)) != len(cfg.policies) or len(set(cfg.seeds)) != len(cfg.seeds):
        raise InputError("policies and seeds must be distinct")
    typical = typical_pods(pods)
    runs = [arrivals(pods, cluster, s, cfg.tune) for s in cfg.seeds]
    genomes = None
    if family.FAMILY in cfg.policies:
        if cfg.genome is None:
            raise InputError(f"policy {family.FAMILY} needs a genome (GpuShareConfig.genome)")
        genomes = np.zeros((len(cfg.policies), family.GENOME_SIZE))
        genomes[list(cfg.policies).index(family.FAMILY)] = family.check_genome(cfg.genome)
    tr = simulate(cluster, pods, typical, runs, tuple(cfg.policies), progress, genomes=genomes)
    placed = np.asarray([tr.placed[b, :tr.length[b]].sum() for b in range(len(tr.policies))], np.int64)
    return GpuShareResult(config=cfg, pod_list=pods.name, curves=curves(tr, cluster.total_gpus), typical=typical,
                          pods=tr.length.copy(), failed=tr.length - placed)
