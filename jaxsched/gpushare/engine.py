"""The GPU-sharing simulation as one batched JAX program: every (policy, seed) row places its
seed's pods one by one on its own copy of the cluster (docs/spec/GPU_SHARING.md, sections 2.3-3).

A step places one pod in every row: the feasible nodes (CPU, memory, pod count, GPU model
and per-GPU room), the row's policy's score, the highest score with ties to the lowest
node rank (a Random row draws a feasible node uniformly), the GPU(s) of that node by the
policy's rule, and the update of that node alone: its CPU, memory and GPUs, its affinity
classes, its fragmentation and, for FGD rows, its row of the score table; for the family's
rows, its column of the family's score table. Rows of one
policy share a vmap; the policies' groups run in the same scan. The program runs with
64-bit types (`jax.enable_x64`): fragmentation sums are exact integers and scores are
computed in float64, as the simulator computes them.
"""

from __future__ import annotations

import dataclasses
import itertools
from typing import Callable, NamedTuple

import jax
import jax.numpy as jnp
import numpy as np
from jax import lax

from .. import interrupt, rng
from ..devices import SlowestShare, on_devices
from ..errors import InputError
from ..policies import REGISTRY, get_policy, score_terms
from . import family
from .data import MILLI, GpuCluster, PodList
from .frag import FragStatic, Shapes, fgd_scores, frag_static, node_numerator, shapes_of
from .policies import PAPER_POLICIES, GpuPolicy, Node, Pod, affinity_bit, best_share_gpu
from .workload import Run, TypicalPods

POD_LIMIT = 1001  # pods per node (the simulator's node capacity)
BLOCK = 1024  # pod steps per compiled call, between progress reports
# On a CPU, rows per program: wider batches pay for their state in cache misses, narrower ones
# for each step's fixed cost (64 family rows on two devices: 6.5 runs/s in programs of 32 rows,
# 4.9 in programs of 128, 3.9 in programs of 16).
CPU_ROWS_PER_PROGRAM = 32
EXPERIMENT = "gpushare"
NO_RANK = np.int32(2**30)


def gpu_policy(name: str) -> GpuPolicy:
    """The paper's policy `name`, or one of the 21 registered scores on this model: the score
    of the node's free CPU, memory and pooled GPU after normalization by the largest node, with
    the `best` GPU rule.

    Raises:
        KeyError: an unknown name, listing the known ones.
    """
    if name in PAPER_POLICIES:
        return PAPER_POLICIES[name]
    if name == family.FAMILY:
        return GpuPolicy(name, None, "blend", cost=3.0, family=True)
    if name in REGISTRY and get_policy(name).deterministic:
        return GpuPolicy(name, _registry_score(get_policy(name)), "best", cost=get_policy(name).cost)
    known = list(PAPER_POLICIES) + [family.FAMILY] + [n for n in REGISTRY if get_policy(n).deterministic]
    raise KeyError(f"unknown GPU-sharing policy {name!r}; known: {', '.join(known)}")


def _registry_score(policy):
    def score(n: Node, p: Pod):
        f32 = lambda x: jnp.asarray(x, jnp.float32)
        d = (f32(p.cpu) / n.norm[0], f32(p.mem) / n.norm[1], f32(p.num_gpu * p.milli) / n.norm[2])
        f = (f32(n.cpu) / n.norm[0], f32(n.mem) / n.norm[1], f32(n.idle) / n.norm[2])
        s = score_terms(policy, d, f, tuple(n.inv[x] for x in range(3)), jnp.zeros(8, jnp.float32),
                        jnp.zeros(n.cpu.shape, jnp.float32), (0.05, 0.05, 0.0))
        return jnp.where(jnp.isfinite(s), s, -jnp.inf)  # feasibility is the engine's
    return score


class Static(NamedTuple):
    """Traced inputs every row shares."""

    cap_cpu: jax.Array  # i32[N]
    cap_mem: jax.Array  # i32[N]
    gpus: jax.Array  # i32[N]
    exists: jax.Array  # bool[N, G]
    model_bit: jax.Array  # i64[N]: 1 << model (0: no GPU)
    inv: jax.Array  # f32[3, N]: largest node's capacity / node's, per dimension (0 where none)
    norm: jax.Array  # f32[3]: the largest node's CPU, memory and milli-GPU
    pod_cpu: jax.Array  # i32[P]
    pod_mem: jax.Array  # i32[P]
    pod_k: jax.Array  # i32[P]
    pod_m: jax.Array  # i32[P]
    pod_mask: jax.Array  # i64[P]
    pod_shape: jax.Array  # i32[P]: index of the pod's (c, m, k) in `shapes`
    frag: FragStatic
    shapes: Shapes
    model_share: jax.Array  # f64[N]: the share of the cluster's GPUs of the node's model (the family's term)
    pod_full: jax.Array  # i32[P]: index of the pod's (c, mem, m, k) in `full`, what a family score depends on
    full: Pod  # [F] each: the distinct (c, mem, m, k) of the pod list
    full_shape: jax.Array  # i32[F]: index of each one's (c, m, k) in `shapes` (its FGD table column)


class RowState(NamedTuple):
    """One row's cluster, each [N] (left [N, G]), and its running totals."""

    cpu: jax.Array  # i32
    mem: jax.Array  # i32
    pods: jax.Array  # i32
    left: jax.Array  # i32[N, G]: milli-GPU left per GPU (0 where the GPU does not exist)
    aff: jax.Array  # i32: affinity classes of the GPU pods on the node
    frag: jax.Array  # i32 (or i64, as frag.FragStatic.count): fragmentation numerator (`frag.numerator`)
    alloc: jax.Array  # i64[]: milli-GPU allocated
    arrived: jax.Array  # i64[]: milli-GPU of the pods that arrived
    table: jax.Array  # i32[N, S]: FGD's score of each shape on each node (FGD rows; else [N, 0])
    table_gpu: jax.Array  # i32[N, S]: the GPU a share pod of the shape would take
    fam: jax.Array  # f64[F, N]: the family's score of each full shape on each node (family rows; else [0, N])


class RowInputs(NamedTuple):
    rank: jax.Array  # i32[N]
    words: jax.Array  # u32[2]: the Random policy's draws
    genome: jax.Array  # f64[family.GENOME_SIZE] for the family's rows, else f64[0]


def build_static(cluster: GpuCluster, pods: PodList, typical: TypicalPods) -> Static:
    """The traced inputs of a simulation (call under jax.enable_x64)."""
    G = max(cluster.max_gpus, 1)
    exists = np.arange(G)[None, :] < cluster.gpus[:, None]
    shapes, shape_of = shapes_of(pods.cpu, pods.milli, pods.num_gpu)
    full, full_of = np.unique(np.stack([pods.cpu, pods.mem, pods.milli, pods.num_gpu], 1).reshape(-1, 4), axis=0,
                              return_inverse=True)
    shape_key = {tuple(k): i for i, k in enumerate(zip(shapes["cpu"], shapes["milli"], shapes["num_gpu"]))}
    full_shape = [shape_key[(c, m, k)] for c, _, m, k in full]
    caps = np.stack([cluster.cpu, cluster.mem, cluster.gpus.astype(np.int64) * MILLI]).astype(np.float64)
    norm = caps.max(axis=1)
    norm[norm == 0] = 1.0
    with np.errstate(divide="ignore"):
        inv = np.where(caps > 0, norm[:, None] / np.where(caps > 0, caps, 1.0), 0.0)
    i32 = lambda a: jnp.asarray(np.asarray(a), jnp.int32)
    return Static(
        cap_cpu=i32(cluster.cpu), cap_mem=i32(cluster.mem), gpus=i32(cluster.gpus), exists=jnp.asarray(exists),
        model_bit=jnp.asarray(np.where(cluster.model >= 0, np.left_shift(1, np.maximum(cluster.model, 0)), 0),
                              jnp.int64),
        inv=jnp.asarray(inv, jnp.float32), norm=jnp.asarray(norm, jnp.float32),
        pod_cpu=i32(pods.cpu), pod_mem=i32(pods.mem), pod_k=i32(pods.num_gpu), pod_m=i32(pods.milli),
        pod_mask=jnp.asarray(pods.spec_mask, jnp.int64), pod_shape=i32(shape_of),
        frag=frag_static(cluster, typical), shapes=Shapes(**{k: i32(v) for k, v in shapes.items()}),
        model_share=jnp.asarray(family.model_share(cluster), jnp.float64), pod_full=i32(full_of.reshape(-1)),
        full=Pod(cpu=i32(full[:, 0]), mem=i32(full[:, 1]), milli=i32(full[:, 2]), num_gpu=i32(full[:, 3])),
        full_shape=i32(full_shape))


def initial_state(st: Static, fgd: bool) -> RowState:
    """An empty cluster: every GPU free, fragmentation and FGD's table of the idle nodes."""
    N, G = st.exists.shape
    left = jnp.where(st.exists, jnp.int32(MILLI), jnp.int32(0))
    fs = st.frag
    frag = jax.vmap(lambda lf, ex, c, ok: node_numerator(fs, lf, ex, c, ok))(left, st.exists, st.cap_cpu,
                                                                            fs.model_ok)
    S = st.shapes.cpu.shape[0] if fgd else 0
    if fgd:
        table, table_gpu = jax.vmap(lambda lf, ex, c, ok: fgd_scores(fs, st.shapes, lf, ex, c, ok))(
            left, st.exists, st.cap_cpu, fs.model_ok)
    else:
        table = table_gpu = jnp.zeros((N, S), jnp.int32)
    zero = jnp.zeros((), jnp.int64)
    return RowState(cpu=st.cap_cpu, mem=st.cap_mem, pods=jnp.zeros(N, jnp.int32), left=left,
                    aff=jnp.zeros(N, jnp.int32), frag=frag, alloc=zero, arrived=zero, table=table, table_gpu=table_gpu,
                    fam=jnp.zeros((0, N), jnp.float64))


def _nodes(st: Static, s: RowState, fgd, at=slice(None)) -> Node:
    """The nodes `at` (all, or an index array) as a score sees them, with FGD's scores `fgd`."""
    left, exists = s.left[at], st.exists[at]
    return Node(cpu=s.cpu[at], mem=s.mem[at], left=left, exists=exists, gpus=st.gpus[at],
                idle=jnp.sum(left, axis=1, dtype=jnp.int32),
                free1=jnp.sum(exists & (left == MILLI), axis=1, dtype=jnp.int32), aff=s.aff[at],
                fgd=fgd, inv=st.inv[:, at], norm=st.norm)


def _family_scores(st: Static, s: RowState, genome, at=slice(None)) -> jax.Array:
    """The family's score of every full shape on the nodes `at` under `genome`: f64[F, n]. Each
    entry is `family.score` of that node and pod, so a table of them reads as the score itself."""
    fgd = s.table[at][:, st.full_shape]  # [n, F]
    node = _nodes(st, s, fgd[:, 0], at)

    def one(f, c, mem, m, k):
        return family.score(node._replace(fgd=fgd[:, f]), Pod(cpu=c, mem=mem, num_gpu=k, milli=m), genome,
                            st.model_share[at])

    F = st.full_shape.shape[0]
    return jax.vmap(one)(jnp.arange(F), st.full.cpu, st.full.mem, st.full.milli, st.full.num_gpu)


def family_table(st: Static, s: RowState, genome) -> RowState:
    """The row's state with the family's score table of its nodes under `genome` filled in."""
    return s._replace(fam=_family_scores(st, s, genome))


def _uniform_index(bits, count):
    """floor(u count) for a uniform u of 32 bits: an index in [0, count)."""
    return ((bits.astype(jnp.uint64) * count.astype(jnp.uint64)) >> 32).astype(jnp.int32)


def _nth(mask, n):
    """The position of the n-th (from 0) true entry of mask."""
    return jnp.argmax(mask & (jnp.cumsum(mask.astype(jnp.int32)) == n + 1)).astype(jnp.int32)


def row_step(policy: GpuPolicy, st: Static, s: RowState, inp: RowInputs, pod, t):
    """Place pod number `pod` (-1: none) of the name-sorted list in one row: (state, outputs)."""
    valid = pod >= 0
    q = jnp.maximum(pod, 0)
    c, memq, k, m = st.pod_cpu[q], st.pod_mem[q], st.pod_k[q], st.pod_m[q]
    shape = st.pod_shape[q]
    exists, left = st.exists, s.left
    fgd_row = policy.keeps_table
    node = _nodes(st, s, s.table[:, shape] if fgd_row else jnp.zeros_like(s.cpu))
    free = exists & (left == MILLI)
    roomy = jnp.sum(exists & (left >= m), axis=1, dtype=jnp.int32)
    gpu_ok = ((st.model_bit & st.pod_mask[q]) != 0) & jnp.where(k == 1, roomy >= 1, node.free1 >= k)
    feas = valid & (s.cpu >= c) & (s.mem >= memq) & (s.pods < POD_LIMIT) & ((k == 0) | gpu_ok)
    pod_view = Pod(cpu=c, num_gpu=k, milli=m, mem=memq)
    draws = rng.counter_bits(inp.words[None], t, jnp.arange(2))[0]
    if policy.random_node:
        j = _nth(feas, _uniform_index(draws[0], jnp.sum(feas, dtype=jnp.int32)))
    else:
        score = s.fam[st.pod_full[q]] if policy.family else policy.score(node, pod_view)
        best = jnp.max(jnp.where(feas, score, jnp.iinfo(jnp.int32).min if score.dtype == jnp.int32 else -jnp.inf))
        j = jnp.argmin(jnp.where(feas & (score == best), inp.rank, NO_RANK)).astype(jnp.int32)
    placed = jnp.any(feas)
    lj, ej = left[j], exists[j]
    if policy.gpu_rule == "random":
        room = ej & (lj >= m)
        g = _nth(room, _uniform_index(draws[1], jnp.sum(room, dtype=jnp.int32)))
    elif policy.family:
        g = family.share_gpu(st.frag, lj, ej, s.cpu[j], st.frag.model_ok[j], pod_view, inp.genome[-1])
    elif fgd_row:
        g = s.table_gpu[j, shape]
    else:
        g = best_share_gpu(lj[None], ej[None], m)[0]
    share = (k == 1) & (m < MILLI)
    whole = free[j] & (jnp.cumsum(free[j].astype(jnp.int32)) <= k)
    take = placed & (k > 0) & jnp.where(share, jnp.arange(lj.shape[0], dtype=jnp.int32) == g, whole)
    add = lambda a, v: a.at[j].add(jnp.where(placed, v, 0).astype(a.dtype))
    cpu, mem, pods = add(s.cpu, -c), add(s.mem, -memq), add(s.pods, 1)
    left = left.at[j].add(jnp.where(take, -m, 0))
    aff = s.aff.at[j].set(s.aff[j] | jnp.where(placed, affinity_bit(k, m), 0))
    fs = st.frag
    frag = s.frag.at[j].set(node_numerator(fs, left[j], ej, cpu[j], fs.model_ok[j]))
    table, table_gpu = s.table, s.table_gpu
    if fgd_row:
        row_s, row_g = fgd_scores(fs, st.shapes, left[j], ej, cpu[j], fs.model_ok[j])
        table, table_gpu = table.at[j].set(row_s), table_gpu.at[j].set(row_g)
    gpu = (k * m).astype(jnp.int64)
    new = RowState(cpu=cpu, mem=mem, pods=pods, left=left, aff=aff, frag=frag,
                   alloc=s.alloc + jnp.where(placed, gpu, 0), arrived=s.arrived + jnp.where(valid, gpu, 0),
                   table=table, table_gpu=table_gpu, fam=s.fam)
    if policy.family:  # only node j changed: its column of every full shape's score
        column = _family_scores(st, new, inp.genome, at=jnp.reshape(j, (1,)))[:, 0]
        new = new._replace(fam=s.fam.at[:, j].set(column))
    bits = jnp.sum(jnp.where(take, jnp.left_shift(jnp.int32(1), jnp.arange(lj.shape[0], dtype=jnp.int32)), 0),
                   dtype=jnp.int32)
    return new, (new.alloc, new.arrived, jnp.sum(frag, dtype=jnp.int64), jnp.where(placed, j, -1), bits)


@dataclasses.dataclass(frozen=True)
class Trajectories:
    """Every row's running totals after each of its pods, [B, T] each (rows: policy x seed)."""

    policies: tuple[str, ...]  # per row
    seeds: tuple[int, ...]  # per row
    length: np.ndarray  # i64[B]: the row's pods (later columns are padding)
    alloc: np.ndarray  # i64[B, T]: milli-GPU allocated
    arrived: np.ndarray  # i64[B, T]: milli-GPU arrived (placed or failed)
    frag: np.ndarray  # f64[B, T]: cluster fragmentation, milli-GPU
    node: np.ndarray  # i32[B, T]: the node each pod went to, -1 where it found none
    gpus: np.ndarray  # i32[B, T]: bit g: the pod took GPU g of its node

    @property
    def placed(self) -> np.ndarray:
        """bool[B, T]: the pod was placed."""
        return self.node >= 0


def groups_of(names: tuple[str, ...]) -> list[tuple[str, int, int]]:
    """Runs of equal policy names: (name, first row, end row)."""
    out, row = [], 0
    for name, run in itertools.groupby(names):
        n = len(list(run))
        out.append((name, row, row + n))
        row += n
    return out


def _block(carry, st, inputs, seq, t0, *, names):
    """BLOCK steps of every row: (carry, outputs [5 x (T, B)])."""
    groups = groups_of(names)

    def body(carry, xs):
        pods, t = xs
        new, outs = [], []
        for g, (name, lo, hi) in enumerate(groups):
            policy = gpu_policy(name)
            step = jax.vmap(lambda s, inp, p, policy=policy: row_step(policy, st, s, inp, p, t))
            state, out = step(carry[g], inputs[g], pods[lo:hi])
            new.append(state)
            outs.append(out)
        return tuple(new), tuple(jnp.concatenate(x) for x in zip(*outs))

    steps = t0 + jnp.arange(seq.shape[0], dtype=jnp.int32)
    return lax.scan(body, carry, (seq, steps))


_block_jit = jax.jit(_block, static_argnames=("names",), donate_argnums=(0,))
_family_tables_jit = jax.jit(jax.vmap(family_table, in_axes=(None, 0, 0)), donate_argnums=(1,))


def _row_inputs(runs: list[Run], genomes: np.ndarray) -> RowInputs:
    """The inputs of rows of runs x genomes f64[G, D] (genome major; D = 0 outside the family)."""
    words = np.concatenate([np.asarray(rng.hash_words(rng.trial_keys(r.seed, EXPERIMENT, 1), rng.STREAM_GPUSHARE))
                            for r in runs])
    G = len(genomes)
    return RowInputs(rank=jnp.asarray(np.tile(np.stack([r.rank for r in runs]), (G, 1)), jnp.int32),
                     words=jnp.asarray(np.tile(words, (G, 1)), jnp.uint32),
                     genome=jnp.asarray(np.repeat(genomes, len(runs), axis=0), jnp.float64))


def _simulate_share(cluster, pods, typical, runs, names, genomes, progress):
    """One program over the rows `names` x runs (each policy's rows consecutive; genomes f64[names, D])."""
    with jax.enable_x64(True):
        st = build_static(cluster, pods, typical)
        groups = groups_of(names)
        carry = tuple(jax.tree.map(lambda x, n=hi - lo: jnp.broadcast_to(x, (n * len(runs),) + x.shape) + 0,
                                   initial_state(st, gpu_policy(g).keeps_table)) for g, lo, hi in groups)
        width = lambda g: family.GENOME_SIZE if gpu_policy(g).family else 0
        inputs = tuple(_row_inputs(runs, genomes[lo:hi, :width(g)]) for g, lo, hi in groups)
        carry = tuple(_family_tables_jit(st, c, inp.genome) if gpu_policy(g).family else c
                      for c, inp, (g, lo, hi) in zip(carry, inputs, groups))
        T = max(len(r.pods) for r in runs)
        Tp = -(-T // BLOCK) * BLOCK
        seq = np.full((Tp, len(runs)), -1, np.int64)
        for b, r in enumerate(runs):
            seq[:len(r.pods), b] = r.pods
        seq = np.tile(seq, (1, len(names))).astype(np.int32)
        outs = []
        for start in range(0, Tp, BLOCK):
            carry, out = _block_jit(carry, st, inputs, jnp.asarray(seq[start:start + BLOCK]), jnp.int32(start),
                                    names=tuple(n for n in names for _ in runs))
            outs.append(out)
            interrupt.queue_one_ahead(outs)
            if progress is not None:
                progress(min(start + BLOCK, T), T)
        return [np.concatenate([np.asarray(o[i]) for o in outs])[:T].T for i in range(5)]


def _in_programs(cluster, pods, typical, runs, names, genomes, progress):
    """`_simulate_share` over the rows `names` x runs, one program after another where a CPU runs
    them faster as several narrower ones (whole policies each; the same results either way)."""
    narrow = jax.default_backend() == "cpu" and len(names) * len(runs) > 2 * CPU_ROWS_PER_PROGRAM
    per = max(1, CPU_ROWS_PER_PROGRAM // len(runs)) if narrow else len(names)
    count = -(-len(names) // per)
    cuts = [len(names) * i // count for i in range(count + 1)]  # near-equal programs: few compilations
    T = max(len(r.pods) for r in runs)
    parts = []
    for i, (lo, hi) in enumerate(zip(cuts, cuts[1:])):
        report = None if progress is None else (lambda d, n, i=i: progress(i * T + d, count * T))
        parts.append(_simulate_share(cluster, pods, typical, runs, names[lo:hi], genomes[lo:hi], report))
    return [np.concatenate([p[k] for p in parts]) for k in range(5)]


def _genomes(kinds: list[GpuPolicy], genomes) -> np.ndarray:
    """Each policy's genome, f64[P, GENOME_SIZE] (zeros outside the family), checked."""
    out = np.zeros((len(kinds), family.GENOME_SIZE))
    given = None if genomes is None else np.asarray(genomes, np.float64)
    if given is not None and given.shape != out.shape:
        raise InputError(f"genomes: expected shape {out.shape} (one per policy), got {given.shape}")
    for i, k in enumerate(kinds):
        if k.family:
            if given is None:
                raise InputError(f"policy {k.name}: each of its rows needs a genome (simulate(..., genomes=))")
            out[i] = family.check_genome(given[i], f"genome of policy {i} ({k.name})")
    return out


def device_shares(names: tuple[str, ...]) -> list[tuple[int, int]]:
    """Ranges of whole policies, one per local device (at most one per policy), balanced by cost."""
    n = min(len(jax.local_devices()), len(names)) if jax.process_count() == 1 else 1
    if n < 2:
        return [(0, len(names))]
    cost = np.cumsum([gpu_policy(p).cost for p in names])
    cuts = [0]
    for share in range(1, n):
        lo = cuts[-1] + 1
        hi = len(names) - (n - share)
        cuts.append(min(range(lo, hi + 1), key=lambda c: abs(cost[c - 1] - share * cost[-1] / n)))
    return list(zip(cuts, cuts[1:] + [len(names)]))


def simulate(cluster: GpuCluster, pods: PodList, typical: TypicalPods, runs: list[Run], policies: tuple[str, ...],
             progress: Callable[[int, int], None] | None = None, genomes=None) -> Trajectories:
    """Place every run's pods under every policy, all (policy, seed) rows batched.

    Args:
        cluster: the nodes.
        pods: the pod list (the runs index it).
        typical: the typical pods of fragmentation.
        runs: one per seed: its arrivals and node ranks (`workload.arrivals`).
        policies: policy names (`gpu_policy`); a name may repeat where each has its own genome.
        progress: progress(steps done, steps) of the slowest device share.
        genomes: f64[len(policies), family.GENOME_SIZE], the genome of each `family.FAMILY` entry
            of policies (the other entries' rows are ignored); None if there is none.

    Returns:
        The Trajectories of every (policy, seed) row, policies major.

    Raises:
        InputError: an unknown policy, or a missing or bad genome.
    """
    try:
        kinds = [gpu_policy(p) for p in policies]
    except KeyError as e:
        raise InputError(e.args[0]) from None
    genomes = _genomes(kinds, genomes)
    shares = device_shares(tuple(policies))
    T = max(len(r.pods) for r in runs)
    if len(shares) == 1:
        parts = [_in_programs(cluster, pods, typical, runs, tuple(policies), genomes, progress)]
    else:
        slowest = SlowestShare(progress, len(shares), T)

        def run(i, device):
            lo, hi = shares[i]
            return _in_programs(cluster, pods, typical, runs, tuple(policies[lo:hi]), genomes[lo:hi],
                                slowest.reporter(i))

        parts = on_devices(run, len(shares))
    alloc, arrived, frag, node, gpus = (np.concatenate([p[i] for p in parts]) for i in range(5))
    return Trajectories(policies=tuple(p for p in policies for _ in runs), seeds=tuple(r.seed for _ in policies
                                                                                       for r in runs),
                        length=np.asarray([len(r.pods) for _ in policies for r in runs], np.int64),
                        alloc=alloc.astype(np.int64), arrived=arrived.astype(np.int64),
                        frag=frag.astype(np.float64) / float(typical.count.sum()), node=node.astype(np.int32),
                        gpus=gpus.astype(np.int32))
