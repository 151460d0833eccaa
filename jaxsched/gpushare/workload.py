"""The workload of one run of the paper's procedure (docs/spec/GPU_SHARING.md, section 2):
the pod list shuffled, tuned to the target GPU demand with draws from the original list,
and the node ranks that break score ties; and the typical pods of fragmentation (4.6).

Each seed has its own numpy PCG64 stream; every policy of a seed sees the same pods in
the same order and the same node ranks. The stream is not Go's math/rand, so a seed here
is statistically, not bit-, equivalent to the simulator's seed of the same number.
"""

from __future__ import annotations

import dataclasses

import numpy as np

from .data import GpuCluster, PodList

TUNE = 1.3  # arrived GPU demand as a multiple of the cluster's GPU capacity
TYPICAL_SHARE = 0.95  # typical pods cover this share of the pods


@dataclasses.dataclass(frozen=True)
class TypicalPods:
    """The pod shapes fragmentation is measured against, and their weights."""

    cpu: np.ndarray  # i64[J]
    milli: np.ndarray  # i32[J], m (0 for CPU-only)
    num_gpu: np.ndarray  # i32[J], k
    spec_mask: np.ndarray  # i64[J], allowed models
    count: np.ndarray  # i64[J], pods of this shape in the original list
    covered: float  # share of the pods the shapes cover

    @property
    def weight(self) -> np.ndarray:
        """f64[J], p_j = count_j / sum of the counts taken."""
        return self.count / self.count.sum()


def typical_pods(pods: PodList, share: float = TYPICAL_SHARE) -> TypicalPods:
    """Shapes (c, m, k, gpu_spec) of the original list by count, most frequent first (ties: the
    larger shape first), taken until they cover `share` of the pods."""
    keys = list(zip(pods.cpu.tolist(), pods.milli.tolist(), pods.num_gpu.tolist(), pods.spec.tolist()))
    counts: dict = {}
    masks: dict = {}
    for key, mask in zip(keys, pods.spec_mask.tolist()):
        counts[key] = counts.get(key, 0) + 1
        masks[key] = mask
    ranked = sorted(counts, key=lambda s: (counts[s], s), reverse=True)
    taken, total = [], 0
    for s in ranked:
        taken.append(s)
        total += counts[s]
        if total >= share * pods.num_pods:
            break
    return TypicalPods(cpu=np.asarray([s[0] for s in taken], np.int64),
                       milli=np.asarray([s[1] for s in taken], np.int32),
                       num_gpu=np.asarray([s[2] for s in taken], np.int32),
                       spec_mask=np.asarray([masks[s] for s in taken], np.int64),
                       count=np.asarray([counts[s] for s in taken], np.int64), covered=total / pods.num_pods)


@dataclasses.dataclass(frozen=True)
class Run:
    """One seed's pods, in arrival order, and node ranks."""

    seed: int
    pods: np.ndarray  # i64[T], index of each arriving pod in the name-sorted list
    rank: np.ndarray  # i32[N], each node's rank (the lowest wins a tie)
    target: int  # the arrived GPU demand the list was tuned to, milli-GPU


def arrivals(pods: PodList, cluster: GpuCluster, seed: int, tune: float = TUNE) -> Run:
    """The paper's arrival list of one seed: the pods sorted by name and shuffled, then copies of
    pods drawn with replacement appended (or random positions removed) until the GPU demand
    reaches `tune` times the cluster's GPU capacity, and a random rank per node.

    The simulator's quirk is kept: tuning up stops at the first drawn pod whose per-GPU share m
    (not its k m) would pass the target, so an 8-GPU copy can overshoot it.
    """
    gen = np.random.Generator(np.random.PCG64(seed))
    by_name = np.argsort(pods.names.astype(str), kind="stable")
    order = by_name[gen.permutation(len(by_name))]
    demand = pods.gpu_demand
    target = int(round(tune * cluster.total_gpus * 1000))
    total = int(demand[order].sum())
    if total < target:
        extra = []
        while True:
            pick = int(by_name[gen.integers(len(by_name))])
            if total + int(pods.milli[pick]) > target:
                break
            extra.append(pick)
            total += int(demand[pick])
        order = np.concatenate([order, np.asarray(extra, np.int64)])
    elif total > target:
        order = list(order)
        while total > target:
            total -= int(demand[order.pop(int(gen.integers(len(order))))])
        order = np.asarray(order, np.int64)
    by_node_name = np.argsort(cluster.names.astype(str), kind="stable")
    rank = np.empty(cluster.num_nodes, np.int32)
    rank[by_node_name] = gen.permutation(cluster.num_nodes).astype(np.int32)
    return Run(seed=seed, pods=np.asarray(order, np.int64), rank=rank, target=target)
