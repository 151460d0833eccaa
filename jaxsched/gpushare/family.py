"""A parameterized GPU-sharing score: a weighted sum of normalized per-(node, pod) terms, and a
GPU rule for share pods that blends FGD's with `best` (docs/gpushare.md, "The family").

The genome is TERMS weights in [-1, 1] and the blend in [0, 1]. The terms are the paper's
policies' own integer scores divided by 100 (so that a genome with one weight 1 and the others
0 orders the nodes, ties included, exactly as that policy does) and a few plain quantities of
the node after the pod would land. A share pod on the chosen node takes, among its GPUs with
room, the one with the largest blend x FGD's score of that GPU / 100 + (1 - blend) x (1 - its
room / 1000), the lowest index on ties: blend 1 is FGD's rule, blend 0 is `best`. FGD, BestFit,
DotProd, GpuPacking and GpuClustering are points of the family (`PAPER_POINTS`).
"""

from __future__ import annotations

import math

import jax
import jax.numpy as jnp
import numpy as np

from ..errors import InputError
from .data import MILLI
from .frag import FragStatic, gpu_scores
from .policies import CPU_NORM, GPU_NORM, Node, Pod, best_fit, dot_prod, gpu_clustering, gpu_packing

TERMS = ("fgd", "best_fit", "dot_prod", "gpu_packing", "gpu_clustering", "idle_whole", "cpu_after", "gpu_after",
         "mem_after", "model_share")
TERM_HELP = {
    "fgd": "FGD's score (0..99) / 100: the node's expected fragmentation falls most",
    "best_fit": "BestFit's integer before its min-max normalization / 100: least CPU and GPU left, equally weighted",
    "dot_prod": "DotProd's score / 100: least remaining CPU and GPU by the dot product",
    "gpu_packing": "GpuPacking's score / 100: partial GPUs, then partly used nodes, idle nodes last",
    "gpu_clustering": "GpuClustering's score / 100: pods of one affinity class together",
    "idle_whole": "the node's fully idle GPUs / its GPUs, before the pod",
    "cpu_after": "milli-CPU left after the pod / 128,000 (the largest node's)",
    "gpu_after": "idle milli-GPU left after the pod / 8,000 (the largest node's)",
    "mem_after": "memory left after the pod / the largest node's memory",
    "model_share": "the share of the cluster's GPUs that are of the node's model",
}
GENOME_NAMES = TERMS + ("gpu_blend",)
GENOME_SIZE = len(GENOME_NAMES)
WEIGHT_BOUND = 1.0
LOW = np.array([-WEIGHT_BOUND] * len(TERMS) + [0.0])
HIGH = np.array([WEIGHT_BOUND] * len(TERMS) + [1.0])


def point(term: str, blend: float) -> tuple[float, ...]:
    """The genome with weight 1 on `term`, 0 elsewhere, and this GPU blend."""
    return tuple(float(t == term) for t in TERMS) + (float(blend),)


# The paper's policies as points of the family: same node order and ties, same GPU rule.
PAPER_POINTS = {"FGD": point("fgd", 1.0), "BestFit": point("best_fit", 0.0), "DotProd": point("dot_prod", 0.0),
                "GpuPacking": point("gpu_packing", 0.0), "GpuClustering": point("gpu_clustering", 0.0)}


def check_genome(genome, what: str = "genome") -> np.ndarray:
    """The genome(s) as f64[..., GENOME_SIZE], or InputError naming the first bad coordinate."""
    g = np.asarray(genome, np.float64)
    if g.shape[-1:] != (GENOME_SIZE,):
        raise InputError(f"{what}: expected {GENOME_SIZE} numbers ({', '.join(GENOME_NAMES)}), got shape {g.shape}")
    flat = g.reshape(-1, GENOME_SIZE)
    for row in flat:
        for name, v, lo, hi in zip(GENOME_NAMES, row, LOW, HIGH):
            if not math.isfinite(v):
                raise InputError(f"{what}: {name} is {v}, not a finite number")
            if not lo <= v <= hi:
                raise InputError(f"{what}: {name} = {v:g} is outside its bounds [{lo:g}, {hi:g}]")
    return g


def terms(n: Node, p: Pod, model_share) -> jax.Array:
    """Every term of the family on every node for pod p: f64[TERMS, N] (docs/gpushare.md)."""
    f64 = lambda x: jnp.asarray(x).astype(jnp.float64)
    gpu = p.num_gpu * p.milli
    return jnp.stack([
        f64(n.fgd) / 100.0, f64(best_fit(n, p)) / 100.0, f64(dot_prod(n, p)) / 100.0,
        f64(gpu_packing(n, p)) / 100.0, f64(gpu_clustering(n, p)) / 100.0,
        f64(n.free1) / f64(jnp.maximum(n.gpus, 1)), f64(n.cpu - p.cpu) / CPU_NORM, f64(n.idle - gpu) / GPU_NORM,
        f64(n.mem - p.mem) / f64(n.norm[1]), f64(model_share)])


def score(n: Node, p: Pod, genome, model_share) -> jax.Array:
    """The family's score of every node for pod p under `genome` (f64[GENOME_SIZE]): f64[N]."""
    t = terms(n, p, model_share)
    # Each product rounded on its own (the barrier keeps XLA from fusing a product and a sum into
    # one FMA, which it does in some layouts and not others), then summed in term order: the same
    # float64 in any layout, so a table of these scores reads as the score itself, and numpy's
    # left-to-right sum of the same products is exact.
    prods = jax.lax.optimization_barrier(jnp.asarray(genome, jnp.float64)[:len(TERMS), None] * t)
    total = prods[0]
    for i in range(1, len(TERMS)):
        total = total + prods[i]
    return total


def share_gpu(fs: FragStatic, left, exists, cpu, model_ok, p: Pod, blend) -> jax.Array:
    """The GPU a share pod takes on one node (left i32[G]) under the GPU blend: i32[]."""
    s = gpu_scores(fs, left, exists, cpu, model_ok, p.cpu, p.milli, p.num_gpu)
    blend = jnp.asarray(blend, jnp.float64)
    value = blend * (s.astype(jnp.float64) / 100.0) + (1.0 - blend) * (1.0 - left.astype(jnp.float64) / MILLI)
    value = jnp.where(exists & (left >= p.milli), value, -jnp.inf)
    return jnp.argmax(value).astype(jnp.int32)


FAMILY = "gpushare_family"  # the policy name of the family: one genome per row


def model_share(cluster) -> np.ndarray:
    """f64[N]: the share of the cluster's GPUs of each node's model (0 for a node without GPUs)."""
    gpus = np.asarray(cluster.gpus, np.float64)
    model = np.asarray(cluster.model)
    total = gpus.sum()
    per = {m: gpus[model == m].sum() for m in np.unique(model)}
    return np.asarray([per[m] / total if m >= 0 and total > 0 else 0.0 for m in model], np.float64)
