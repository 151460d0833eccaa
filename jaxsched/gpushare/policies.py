"""The six policies of the FGD paper as scores of one pod on every node, each with the rule
that picks the GPU(s) of the chosen node (docs/spec/GPU_SHARING.md, sections 1.4 and 4).

Scores are integers, computed as the simulator computes them (float64 where it uses floats,
then truncated), because the truncation makes the ties that its tie-break by node rank
decides. FGD's score is kept per node and shape in a table (`frag.fgd_scores`) that the
engine updates where a pod lands; its entry here reads it.
"""

from __future__ import annotations

from typing import Callable, NamedTuple

import jax
import jax.numpy as jnp

from .data import MILLI

CPU_NORM, GPU_NORM = 128000.0, 8000.0  # the simulator's normalization: the largest node's CPU and GPUs
# GpuClustering's affinity classes, one bit each: bit 0 share, bit k whole pods of k GPUs.
AFF_SHARE = 1


class Node(NamedTuple):
    """Every node's state as a score sees it, [N] each (left [N, G])."""

    cpu: jax.Array  # i32, milli-CPU left
    mem: jax.Array  # i32, MiB left
    left: jax.Array  # i32[N, G], milli-GPU left per GPU (0 where the GPU does not exist)
    exists: jax.Array  # bool[N, G]
    gpus: jax.Array  # i32, physical GPUs
    idle: jax.Array  # i32, L: idle milli-GPU
    free1: jax.Array  # i32, fully free GPUs
    aff: jax.Array  # i32, bits of the affinity classes of the GPU pods on the node
    fgd: jax.Array  # i32, FGD's score of this pod's shape (0 where not kept)
    inv: jax.Array  # f32[3, N], the largest node's capacity / the node's (the 21 registered scores)
    norm: jax.Array  # f32[3], the largest node's CPU, memory and milli-GPU


class Pod(NamedTuple):
    """The pod being placed, scalars."""

    cpu: jax.Array  # i32
    mem: jax.Array  # i32
    num_gpu: jax.Array  # i32, k
    milli: jax.Array  # i32, m


def affinity_bit(k, m):
    """The GpuClustering affinity class of a pod, one bit: share, or k whole GPUs (0 for CPU-only)."""
    whole = jnp.left_shift(jnp.int32(1), jnp.minimum(k, 30).astype(jnp.int32))
    return jnp.where(k == 0, 0, jnp.where(m < MILLI, AFF_SHARE, whole)).astype(jnp.int32)


def best_share_gpu(left, exists, m):
    """Per node, the GPU a share pod takes under `best`: the smallest left >= m, lowest index: i32[N]."""
    key = jnp.where(exists & (left >= m), left, 2 * MILLI)
    return jnp.argmin(key, axis=-1).astype(jnp.int32)


def _f64(x):
    return jnp.asarray(x).astype(jnp.float64)


def dot_prod(n: Node, p: Pod):
    """Tetris-like: 1 - (the normalized dot product of the node's free and the pod's demand) / 2."""
    dot = (_f64(n.cpu) / CPU_NORM) * (_f64(p.cpu) / CPU_NORM) \
        + (_f64(n.idle) / GPU_NORM) * (_f64(p.num_gpu * p.milli) / GPU_NORM)
    return jnp.floor(100.0 * (1.0 - dot / 2.0)).astype(jnp.int32)


def gpu_clustering(n: Node, p: Pod):
    """Pods of one affinity class together: 75 where the node holds only that class, 50 where it
    holds it among others, 25 where it holds none, plus up to 25 for the used GPUs."""
    a = affinity_bit(p.num_gpu, p.milli)
    base = (25 * (8000 - n.idle)) // 8000
    only = n.aff == a
    among = ((n.aff & a) != 0) & (jax.lax.population_count(n.aff) > 1)
    bonus = jnp.where(only, 75, jnp.where(among, 50, jnp.where(n.aff == 0, 25, 0)))
    return jnp.where(p.num_gpu == 0, 0, base + bonus).astype(jnp.int32)


def gpu_packing(n: Node, p: Pod):
    """Fill partly used GPUs first, then nodes with some used GPUs, idle nodes last."""
    idle_node = n.free1 == n.gpus
    g = best_share_gpu(n.left, n.exists, p.milli)
    chosen = jnp.take_along_axis(n.left, g[:, None], axis=1)[:, 0]
    share = (p.num_gpu == 1) & (p.milli < MILLI)
    taken_free = jnp.where(share, (chosen == MILLI).astype(jnp.int32), p.num_gpu)  # u
    partial = jnp.maximum(100 - chosen // 100, 50)
    s = jnp.where(idle_node, jnp.maximum(33 - n.gpus, n.gpus),
                  jnp.where(taken_free > 0, jnp.maximum(50 - taken_free, 33), partial))
    return jnp.where(p.num_gpu == 0, 0, s).astype(jnp.int32)


def best_fit(n: Node, p: Pod):
    """The least CPU and GPU left after placing, equally weighted (before the simulator's min-max
    normalization over the feasible nodes, which keeps the order of these integers: they span
    at most 100)."""
    rest = 0.5 * _f64(n.cpu - p.cpu) / CPU_NORM + 0.5 * _f64(n.idle - p.num_gpu * p.milli) / GPU_NORM
    return jnp.floor(100.0 * (1.0 - rest)).astype(jnp.int32)


def fgd(n: Node, p: Pod):
    """Fragmentation gradient descent: the least growth of the node's expected fragmentation."""
    return n.fgd


def random_score(n: Node, p: Pod):
    """Every feasible node alike: the engine draws one uniformly."""
    return jnp.zeros_like(n.cpu)


class GpuPolicy(NamedTuple):
    """One of the paper's policies: its score, how it picks among equal scores, its GPU rule."""

    name: str
    score: Callable[[Node, Pod], jax.Array]
    gpu_rule: str  # "best", "random", "fgd" or "blend" (the family's): which GPU a share pod takes
    random_node: bool = False  # the node is drawn uniformly among the feasible ones
    cost: float = 1.0  # time of a step relative to the cheap policies, to balance device shares
    family: bool = False  # the parameterized family (`family.score`): each row scored by its own genome

    @property
    def keeps_table(self) -> bool:
        """Whether rows keep FGD's score table (FGD and the family)."""
        return self.gpu_rule == "fgd" or self.family


PAPER_POLICIES: dict[str, GpuPolicy] = {p.name: p for p in (
    GpuPolicy("Random", random_score, "random", random_node=True),
    GpuPolicy("DotProd", dot_prod, "best"),
    GpuPolicy("GpuClustering", gpu_clustering, "best"),
    GpuPolicy("GpuPacking", gpu_packing, "best"),
    GpuPolicy("BestFit", best_fit, "best"),
    GpuPolicy("FGD", fgd, "fgd", cost=3.0),
)}
