"""GPU fragmentation of a node against the typical pods (docs/spec/GPU_SHARING.md, 4.6), and the
FGD score of every pod shape on a node, computed in integers where the spec is exact.

The fragmentation of node n for typical pod j is its idle milli-GPU that j could not use:
the partial GPUs (left < m_j) when j fits the node's GPUs and CPU, else all of it. Weighted
by p_j = count_j / total, it is kept as the integer numerator sum_j count_j frag_j, so sums
over nodes are exact and the FGD difference of two states is exact before one division.
"""

from __future__ import annotations

from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from .data import MILLI, GpuCluster
from .workload import TypicalPods


class FragStatic(NamedTuple):
    """The typical pods as arrays, and which node models each allows."""

    cpu: jax.Array  # i32[J]
    milli: jax.Array  # i32[J]
    num_gpu: jax.Array  # i32[J]
    count: jax.Array  # i64[J]
    model_ok: jax.Array  # bool[N, J]: node n's model is allowed to typical pod j
    total: float  # sum of the counts


def frag_static(cluster: GpuCluster, typical: TypicalPods) -> FragStatic:
    """The arrays the fragmentation of every node needs (build under jax.enable_x64)."""
    bit = np.where(cluster.model >= 0, np.left_shift(1, np.maximum(cluster.model, 0)), 0).astype(np.int64)
    ok = (bit[:, None] & typical.spec_mask[None, :]) != 0
    return FragStatic(cpu=jnp.asarray(typical.cpu, jnp.int32), milli=jnp.asarray(typical.milli, jnp.int32),
                      num_gpu=jnp.asarray(typical.num_gpu, jnp.int32), count=jnp.asarray(typical.count, jnp.int64),
                      model_ok=jnp.asarray(ok), total=float(typical.count.sum()))


class Base(NamedTuple):
    """A node's GPUs seen from each typical pod: [J] each."""

    fit: jax.Array  # i32: GPUs with left >= m_j
    part: jax.Array  # i32: idle milli-GPU on GPUs with left < m_j
    idle: jax.Array  # i32[]: idle milli-GPU of the node, L


def base(fs: FragStatic, left, exists) -> Base:
    """The per-typical-pod counts of one node's GPUs left i32[G] (exists bool[G])."""
    lj = left[None, :]
    ex = exists[None, :]
    below = lj < fs.milli[:, None]
    return Base(fit=jnp.sum(ex & ~below, axis=1, dtype=jnp.int32),
                part=jnp.sum(jnp.where(ex & below, lj, 0), axis=1, dtype=jnp.int32),
                idle=jnp.sum(jnp.where(exists, left, 0), dtype=jnp.int32))


def numerator(fs: FragStatic, b: Base, cpu, model_ok):
    """sum_j count_j frag_j (i64) of a node with these counts, `cpu` milli-CPU left and its
    model_ok bool[J] (broadcasting over leading axes of b.fit, b.part, b.idle and cpu)."""
    row = lambda a: a.reshape((1,) * (b.fit.ndim - 1) + a.shape)  # [J] laid out as b.fit
    q3 = row((fs.milli > 0) & model_ok) & (b.fit >= row(fs.num_gpu)) & (cpu[..., None] >= row(fs.cpu))
    frag = jnp.where(q3, b.part, b.idle[..., None]).astype(jnp.int64)
    return jnp.sum(frag * row(fs.count), axis=-1)


def node_numerator(fs: FragStatic, left, exists, cpu, model_ok):
    """The fragmentation numerator of one node (i64[])."""
    return numerator(fs, base(fs, left, exists), cpu, model_ok)


class Shapes(NamedTuple):
    """The distinct (c, m, k) of a pod list: what an FGD score depends on, [S] each."""

    cpu: jax.Array  # i32
    milli: jax.Array  # i32
    num_gpu: jax.Array  # i32


def fgd_scores(fs: FragStatic, shapes: Shapes, left, exists, cpu, model_ok):
    """FGD's score of every shape on one node, and the GPU a share pod would take: (i32[S], i32[S]).

    The hypothetical state after placing: a share pod (k = 1, m < 1000) on GPU i, for each GPU
    with left >= m (the node's score is the best, its GPU the first reaching it); an exclusive
    pod on its k lowest-index free GPUs; a CPU-only pod on the CPU alone. score =
    floor(100 sigmoid((F_n - F_n') / 1000)). A shape that does not fit gets 0.
    """
    G = left.shape[0]
    b = base(fs, left, exists)
    F = numerator(fs, b, cpu, model_ok)
    share = (shapes.num_gpu == 1) & (shapes.milli < MILLI)  # [S]
    gpu = jnp.arange(G, dtype=jnp.int32)
    # Each candidate changes `mult` GPUs from x to x - m: share pods one GPU (each GPU i a
    # candidate), exclusive pods k free GPUs (one candidate), CPU-only pods none.
    x = jnp.where(share[:, None], left[None, :], MILLI)  # [S, G]
    valid = jnp.where(share[:, None], exists[None, :] & (left[None, :] >= shapes.milli[:, None]), gpu[None, :] == 0)
    mult = jnp.where(share, 1, shapes.num_gpu)[:, None]  # [S, 1]
    after = x - shapes.milli[:, None]
    m_j = fs.milli[None, None, :]  # [1, 1, J]
    xe, ae = x[..., None], after[..., None]  # [S, G, 1]
    fit = b.fit[None, None] + mult[..., None] * ((ae >= m_j).astype(jnp.int32) - (xe >= m_j).astype(jnp.int32))
    part = b.part[None, None] + mult[..., None] * (jnp.where(ae < m_j, ae, 0) - jnp.where(xe < m_j, xe, 0))
    idle = b.idle - mult * shapes.milli[:, None]
    new = numerator(fs, Base(fit, part, idle), jnp.broadcast_to((cpu - shapes.cpu)[:, None], x.shape), model_ok)
    z = (F - new).astype(jnp.float64) / (fs.total * 1000.0)
    s = jnp.floor(100.0 * (1.0 / (1.0 + jnp.exp(-z)))).astype(jnp.int32)
    s = jnp.where(valid, s, -1)
    best = jnp.max(s, axis=1)
    first = jnp.argmax(s == best[:, None], axis=1).astype(jnp.int32)
    return jnp.maximum(best, 0), first
