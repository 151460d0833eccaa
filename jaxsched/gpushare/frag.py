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
    count: jax.Array  # [J], i32 where a node's numerator fits (sum of counts x the largest node's milli-GPU < 2^31), else i64
    model_ok: jax.Array  # bool[N, J]: node n's model is allowed to typical pod j
    total: float  # sum of the counts


def frag_static(cluster: GpuCluster, typical: TypicalPods) -> FragStatic:
    """The arrays the fragmentation of every node needs (build under jax.enable_x64)."""
    bit = np.where(cluster.model >= 0, np.left_shift(1, np.maximum(cluster.model, 0)), 0).astype(np.int64)
    ok = (bit[:, None] & typical.spec_mask[None, :]) != 0
    # A node's numerator is at most sum_j count_j x its idle milli-GPU: i32 arithmetic where that fits.
    small = int(typical.count.sum()) * max(int(cluster.gpus.max(initial=0)), 1) * MILLI < 2**31
    return FragStatic(cpu=jnp.asarray(typical.cpu, jnp.int32), milli=jnp.asarray(typical.milli, jnp.int32),
                      num_gpu=jnp.asarray(typical.num_gpu, jnp.int32), count=jnp.asarray(typical.count, jnp.int32 if small else jnp.int64),
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
    """sum_j count_j frag_j (of count's integer type) of a node with these counts, `cpu` milli-CPU left and its
    model_ok bool[J] (broadcasting over leading axes of b.fit, b.part, b.idle and cpu)."""
    row = lambda a: a.reshape((1,) * (b.fit.ndim - 1) + a.shape)  # [J] laid out as b.fit
    q3 = row((fs.milli > 0) & model_ok) & (b.fit >= row(fs.num_gpu)) & (cpu[..., None] >= row(fs.cpu))
    frag = jnp.where(q3, b.part, b.idle[..., None]).astype(fs.count.dtype)
    return jnp.sum(frag * row(fs.count), axis=-1, dtype=fs.count.dtype)


def node_numerator(fs: FragStatic, left, exists, cpu, model_ok):
    """The fragmentation numerator of one node (an integer scalar)."""
    return numerator(fs, base(fs, left, exists), cpu, model_ok)


class Shapes(NamedTuple):
    """The distinct (c, m, k) of a pod list: what an FGD score depends on, [S] each; and the
    distinct (m, k) among them, [U] each, which alone decide how a pod changes the GPUs."""

    cpu: jax.Array  # i32
    milli: jax.Array  # i32
    num_gpu: jax.Array  # i32
    unit: jax.Array  # i32[S]: the index of the shape's (m, k) in unit_milli, unit_num_gpu
    unit_milli: jax.Array  # i32[U]
    unit_num_gpu: jax.Array  # i32[U]
    share: jax.Array  # i32[S1]: the shapes of share pods (k = 1, m < 1000), whose every GPU with room is a candidate
    other: jax.Array  # i32[S2]: the other shapes (exclusive and CPU-only pods: one candidate)


def shapes_of(cpu, milli, num_gpu) -> tuple[np.ndarray, np.ndarray]:
    """The distinct (c, m, k) of pods (sorted) as Shapes fields in numpy, and each pod's shape index."""
    key = np.stack([np.asarray(cpu), np.asarray(milli), np.asarray(num_gpu)], axis=1).reshape(-1, 3)
    shapes, shape_of = np.unique(key, axis=0, return_inverse=True)
    units, unit_of = np.unique(shapes[:, 1:], axis=0, return_inverse=True)
    is_share = (shapes[:, 2] == 1) & (shapes[:, 1] < MILLI)
    fields = dict(cpu=shapes[:, 0], milli=shapes[:, 1], num_gpu=shapes[:, 2], unit=unit_of.reshape(-1),
                  unit_milli=units[:, 0], unit_num_gpu=units[:, 1], share=np.flatnonzero(is_share),
                  other=np.flatnonzero(~is_share))
    return fields, shape_of.reshape(-1)


def _after(fs: FragStatic, b: Base, left, exists, model_ok, milli, num_gpu):
    """How placing pods of GPU demand (m, k) [U] changes a node, per candidate GPU: (X int[U, G, J],
    idle' i32[U, G], valid bool[U, G]).

    A share pod (k = 1, m < 1000) changes one GPU i from left_i to left_i - m (each GPU with room a
    candidate); an exclusive pod its k lowest-index free GPUs (one candidate, GPU 0); a CPU-only pod
    none. X[u, i, j] = count_j (idle' - part'_j) where typical pod j would fit the GPUs after (its
    model allowed, m_j > 0, k_j GPUs with room), else 0: the numerator after is then
    idle' total - sum_j X[u, i, j] [cpu' >= c_j], the CPU entering only through that test.
    """
    G = left.shape[0]
    share = (num_gpu == 1) & (milli < MILLI)  # [U]
    gpu = jnp.arange(G, dtype=jnp.int32)
    x = jnp.where(share[:, None], left[None, :], MILLI)  # [U, G]
    valid = jnp.where(share[:, None], exists[None, :] & (left[None, :] >= milli[:, None]), gpu[None, :] == 0)
    mult = jnp.where(share, 1, num_gpu)[:, None]  # [U, 1]
    after = x - milli[:, None]
    m_j = fs.milli[None, None, :]  # [1, 1, J]
    xe, ae = x[..., None], after[..., None]  # [U, G, 1]
    fit = b.fit[None, None] + mult[..., None] * ((ae >= m_j).astype(jnp.int32) - (xe >= m_j).astype(jnp.int32))
    part = b.part[None, None] + mult[..., None] * (jnp.where(ae < m_j, ae, 0) - jnp.where(xe < m_j, xe, 0))
    idle = b.idle - mult * milli[:, None]  # [U, G]
    gpu_ok = ((fs.milli > 0) & model_ok)[None, None, :] & (fit >= fs.num_gpu[None, None, :])
    X = jnp.where(gpu_ok, (idle[..., None] - part).astype(fs.count.dtype) * fs.count[None, None, :], 0)
    return X, idle, valid


def _score(fs: FragStatic, F, new):
    """floor(100 sigmoid((F - new) / (total 1000))): FGD's integer score of a change of numerator."""
    z = (F - new).astype(jnp.float64) / (fs.total * 1000.0)
    return jnp.floor(100.0 * (1.0 / (1.0 + jnp.exp(-z)))).astype(jnp.int32)


def _changes(fs: FragStatic, shapes: Shapes, left, exists, cpu, model_ok):
    """A node's numerator F and, per pod (m, k) unit, `_after`'s (X, idle', valid)."""
    b = base(fs, left, exists)
    return (numerator(fs, b, cpu, model_ok),
            *_after(fs, b, left, exists, model_ok, shapes.unit_milli, shapes.unit_num_gpu))


def _scored(fs: FragStatic, F, cpu, shape_cpu, x, idle):
    """FGD's integer score of shapes of CPU shape_cpu i32[n] on a node with `cpu` milli-CPU left and
    numerator F, from their units' X x [n, ..., J] and idle' [n, ...] (`_after`): i32[n, ...]."""
    cpu_ok = (cpu - shape_cpu)[:, None] >= fs.cpu[None, :]  # [n, J]
    ok = cpu_ok.reshape(cpu_ok.shape[:1] + (1,) * (x.ndim - 2) + cpu_ok.shape[1:])
    cut = jnp.sum(jnp.where(ok, x, 0), axis=-1, dtype=x.dtype)
    return _score(fs, F, idle.astype(x.dtype) * fs.count.sum(dtype=x.dtype) - cut)


def candidate_scores(fs: FragStatic, shapes: Shapes, left, exists, cpu, model_ok):
    """FGD's score of every shape on one node per candidate GPU: i32[S, G], -1 where not a candidate
    (for a share pod each GPU with room; otherwise GPU 0 stands for the k lowest-index free GPUs)."""
    F, X, idle, valid = _changes(fs, shapes, left, exists, cpu, model_ok)
    u = shapes.unit
    return jnp.where(valid[u], _scored(fs, F, cpu, shapes.cpu, X[u], idle[u]), -1)


def fgd_scores(fs: FragStatic, shapes: Shapes, left, exists, cpu, model_ok):
    """FGD's score of every shape on one node, and the GPU a share pod would take: (i32[S], i32[S]).

    The hypothetical state after placing: a share pod (k = 1, m < 1000) on GPU i, for each GPU
    with left >= m (the node's score is the best, its GPU the first reaching it); an exclusive
    pod on its k lowest-index free GPUs; a CPU-only pod on the CPU alone. score =
    floor(100 sigmoid((F_n - F_n') / 1000)). A shape that does not fit gets 0. The share shapes
    are scored per GPU, the others once (their one candidate, GPU 0): `candidate_scores`'s
    figures, without its columns that can only be -1.
    """
    F, X, idle, valid = _changes(fs, shapes, left, exists, cpu, model_ok)
    sh, ot = shapes.share, shapes.other
    u1, u2 = shapes.unit[sh], shapes.unit[ot]
    s1 = jnp.where(valid[u1], _scored(fs, F, cpu, shapes.cpu[sh], X[u1], idle[u1]), -1)  # [S1, G]
    best1 = jnp.max(s1, axis=1, initial=-1)
    first1 = jnp.argmax(s1 == best1[:, None], axis=1).astype(jnp.int32)
    best2 = _scored(fs, F, cpu, shapes.cpu[ot], X[u2, 0], idle[u2, 0])  # [S2]
    S = shapes.cpu.shape[0]
    best = jnp.zeros(S, jnp.int32).at[sh].set(best1).at[ot].set(best2)
    first = jnp.zeros(S, jnp.int32).at[sh].set(first1)
    return jnp.maximum(best, 0), first


def gpu_scores(fs: FragStatic, left, exists, cpu, model_ok, c, m, k):
    """FGD's score of one pod (c, m, k) on one node per candidate GPU: i32[G] (`candidate_scores`)."""
    one = lambda x: jnp.reshape(x, (1,)).astype(jnp.int32)
    none = jnp.zeros(0, jnp.int32)  # candidate_scores reads neither split
    shape = Shapes(cpu=one(c), milli=one(m), num_gpu=one(k), unit=jnp.zeros(1, jnp.int32), unit_milli=one(m),
                   unit_num_gpu=one(k), share=none, other=none)
    return candidate_scores(fs, shape, left, exists, cpu, model_ok)[0]
