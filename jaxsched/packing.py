"""Sequential greedy packing as one batched JAX program (docs/spec/POLICIES.md, "The picker").

Every (policy row, trial) pair packs the same tasks in its trial's order onto its own
copy of the cluster. A dimension of zero capacity holds -1e-6 in the state
(`policies.encode_free`), so that feasibility is one comparison per dimension.

Two pickers, as the spec defines them:
- full scan: one `lax.scan` step places task i for all P x T pairs at once: each policy
  scores its rows (vmapped over genomes, trials and machines), the lowest-index argmax is
  taken in plain reductions over 128-machine chunks (`pickers.first_best_chunked`, on
  scores computed in that shape), and the free-capacity carry f32[P, T, R, M] is updated
  in place. Tasks run in compiled blocks of `block` steps, so one program serves any task
  count, the carry is donated between blocks, and long runs can report progress.
- sample_k = K: K machines drawn with replacement from the trial's stream, ties to the
  lowest machine index among them; when none is feasible, a full scan of that row. Several
  tasks of every row per step, exactly: `speculative`.

On CPU, trials run in sequential cache-sized groups. With several local devices (GPUs, or
forced CPU host devices) the rows are split over them, by whole policies or, for one
trial of a population of genomes, by genomes, each share its own program driven from
its own thread; otherwise the trial axis is split over all of them with `shard_map`.
Trials and rows are independent, so the results are bit-identical to one device.
"""

from __future__ import annotations

import dataclasses
import functools
import itertools
from typing import Callable

import jax
import jax.numpy as jnp
import numpy as np
from jax import lax
from jax.experimental import multihost_utils
from jax.sharding import Mesh, NamedSharding, PartitionSpec

from .errors import InputError

from . import interrupt, rng, speculative
from .devices import SlowestShare, on_devices
from .pickers import CHUNK, pick
from .policies import (ZERO_CAPACITY_FREE, encode_free, genome_width, get_policy, row_genomes, safe_inverse,
                       score_machines, slot_vector)
from .types import Cluster, PackState, Workload

PAD_CAPACITY = -1.0  # padding machines: never feasible, since demands are >= 0


@dataclasses.dataclass(frozen=True)
class PackConfig:
    """Static configuration of a packing program (hashable; one compile per value)."""

    policies: tuple[str, ...]  # one name per batch row P; rows of one name share a vmap
    sample_k: int = 0  # 0: full scan; K > 0: power-of-K choices with full-scan fallback
    slot: tuple[float, ...] = (0.05, 0.05)
    block: int = 512  # full scan: tasks per compiled block
    window: int = 0  # sample_k > 0: tasks per row and step (`speculative`; 0: `speculative.window_for`)

    def groups(self) -> list[tuple[str, int, int]]:
        """Runs of equal policy names: (name, first row, end row)."""
        out, row = [], 0
        for name, run in itertools.groupby(self.policies):
            n = len(list(run))
            out.append((name, row, row + n))
            row += n
        return out

    @property
    def uses_noise(self) -> bool:
        return "random" in self.policies


def score_rows(cfg, d, free, inv, genomes, noise, inv_axes, noise_axes, reduce=None, chunked=False, *,
                encoded: bool, caches=None):
    """Scores of every (row, trial) pair on its X machines: f32[P, T, X], or reduce(scores) of each policy's rows.

    d f32[P, T, R]; free f32[P, T, R, X] (or a tuple of R f32[P, T, X]); inv (1 / capacity)
    has (row, trial) batch axes `inv_axes` (None: shared), noise likewise `noise_axes`.
    chunked: the machine axis comes as two, X = C x CHUNK (free [P, T, R, C, CHUNK], inv
    [R, C, CHUNK], noise [T, C, CHUNK]), and so do the scores.
    `reduce(scores, policy)` applies to each policy's scores before they are joined, so that
    XLA fuses it into their computation instead of writing all scores out (on CPU it would then
    reduce them in a separate pass, which costs more than the scoring itself).
    encoded: free is `encode_free`'s (a packing state's); caches: each group's kept `Policy.cached`
    terms laid out as free, f32[P_g, T, E, X] (or None), as `machine_caches` gives them.
    """
    out = []
    for g_i, (name, lo, hi) in enumerate(cfg.groups()):
        policy = get_policy(name)

        def one(dd, ff, ii, g, nn, cc, policy=policy):
            return score_machines(policy, dd, ff, ii, g, nn, cfg.slot, encoded, cc)

        if chunked:
            one = jax.vmap(one, in_axes=(None, 1, 1, None, 0, 1))

        per_trial = jax.vmap(one, in_axes=(0, 0, inv_axes[1], None, noise_axes[1], 0))
        per_row = jax.vmap(per_trial, in_axes=(0, 0, inv_axes[0], 0, noise_axes[0], 0))
        rows = slice(lo, hi)
        take = lambda a: jax.tree.map(lambda x: x[rows], a)
        i = take(inv) if inv_axes[0] == 0 else inv
        n = noise[rows] if noise_axes[0] == 0 else noise
        scores = per_row(d[rows], take(free), i, genomes[rows], n, None if caches is None else caches[g_i])
        out.append(scores if reduce is None else reduce(scores, policy))
    return jnp.concatenate(out, axis=0) if len(out) > 1 else out[0]


def _noise(cfg, words, step, lanes):
    if not cfg.uses_noise:
        return jnp.zeros(lanes.shape, jnp.float32)
    return rng.uniform_noise(words, step, lanes)


def _full_scan(cfg, free, d, inv, genomes, nwords, step, none, caches=None):
    """Lowest-index argmax over all machines per (row, trial): i32[P, T], `none` if no fit.

    `pickers.pick` of each policy's scores, before the policies are joined. The scores are computed
    in CHUNK-wide chunks, [P, T, C, CHUNK], the shape `first_best` reduces: computed flat and
    reshaped, XLA fuses the reshape into the scoring and then splits or repeats it.
    """
    P, T, R, Mp = free.shape
    C = Mp // CHUNK  # Mp is a multiple of CHUNK (`pack` pads it)
    noise = _noise(cfg, nwords, step, jnp.broadcast_to(jnp.arange(Mp), (T, Mp)))
    if caches is not None:
        caches = tuple(None if c is None else c.reshape(*c.shape[:3], C, CHUNK) for c in caches)
    return score_rows(cfg, d, free.reshape(P, T, R, C, CHUNK), inv.reshape(R, C, CHUNK), genomes,
                       noise.reshape(T, C, CHUNK), (None, None), (None, 0),
                       lambda s, policy: pick(policy, s, none, chunked=True), chunked=True, encoded=True,
                       caches=caches)


def machine_caches(cfg, free, inv):
    """Each policy group's `Policy.cached` terms of every machine, f32[P_g, T, E, Mp] (None for a
    policy that keeps none), from free f32[P, T, R, Mp] and inv f32[R, Mp]; None if no policy keeps any."""
    R = free.shape[2]
    out = []
    for name, lo, hi in cfg.groups():
        policy = get_policy(name)
        if policy.cached is None:
            out.append(None)
            continue
        terms = policy.cached(tuple(free[lo:hi, :, x] for x in range(R)), tuple(inv[x][None, None] for x in range(R)))
        out.append(jnp.stack(terms, axis=2))
    return tuple(out) if any(c is not None for c in out) else None


def update_caches(cfg, caches, free, inv, j, none):
    """`machine_caches` after tasks land on machines j i32[P, T] (`none`: nowhere) of free, the
    state after placement: only those machines' terms are recomputed."""
    P, T, R, Mp = free.shape
    out = []
    for (name, lo, hi), c in zip(cfg.groups(), caches):
        if c is None:
            out.append(None)
            continue
        jg = j[lo:hi]
        at = jnp.minimum(jg, Mp - 1)[..., None]
        f_j = tuple(jnp.take_along_axis(free[lo:hi, :, x], at, axis=-1)[..., 0] for x in range(R))  # [P_g, T]
        terms = jnp.stack(get_policy(name).cached(f_j, tuple(inv[x][at[..., 0]] for x in range(R))), axis=2)
        flat = _row_major_at(jg, c.shape[2], Mp, none, c.size)
        out.append(c.reshape(-1).at[flat.reshape(-1)].set(terms.reshape(-1), mode="drop",
                                                         unique_indices=True).reshape(c.shape))
    return tuple(out)


def when(pred, fn, operand):
    """fn(operand) if pred else operand, as a while loop of at most one trip.

    A `lax.cond` that passes the carry through makes XLA copy all of it every step (the
    branches cannot alias their operands); a while loop updates its carry in place.
    """
    def body(c):
        return jnp.bool_(False), fn(c[1])

    return lax.while_loop(lambda c: c[0], body, (pred, operand))[1]


def _place(free, j, d, none):
    """free[p, t, :, j[p, t]] -= d[p, t] in place, skipping unplaced rows (free f32[P, T, R, Mp])."""
    flat = _row_major_at(j, free.shape[2], free.shape[3], none, free.size)
    out = free.reshape(-1).at[flat.reshape(-1)].add(-d.reshape(-1), mode="drop", unique_indices=True)
    return out.reshape(free.shape)


def _row_major_at(j, planes: int, Mp: int, none, size: int):
    """Flat indices of machine j i32[P, T] in each of the `planes` rows of Mp machines that a
    (row, trial) has in a row-major state [P, T, planes, Mp]: i32[P, T, planes]; `size`, out
    of range (a dropped update), where j is `none`."""
    P, T = j.shape
    plane = jnp.arange(P * T * planes, dtype=jnp.int32).reshape(P, T, planes)
    return jnp.where((j == none)[..., None], size, plane * Mp + j[..., None])


def _pack_block(free, inv, demand, order, start, num_tasks, genomes, nwords, scale, limit, *, cfg: PackConfig):
    """Place tasks start..start+block-1 of every trial's order with the full scan: (free,
    machine i32[block, P, T]).

    scale f32[P, T] multiplies each row's demands; a row packs only tasks of index < limit i32[P, T].
    """
    Mp = inv.shape[-1]
    none = jnp.int32(Mp)
    steps = start + jnp.arange(cfg.block, dtype=jnp.int32)
    d_blk = jnp.moveaxis(demand[order], 0, 1)  # order [T, block] -> [block, T, R]
    # The policies' `cached` terms of every machine, updated where a task lands.
    caches = machine_caches(cfg, free, inv)

    def body(carry, x):
        free, caches = carry
        d_t, step, task = x
        d = d_t[None] * scale[..., None]  # [P, T, R]
        j = _full_scan(cfg, free, d, inv, genomes, nwords, step, none, caches)
        j = jnp.where((step < num_tasks) & (task[None, :] < limit), j, none)
        free = _place(free, j, d, none)
        if caches is not None:
            caches = update_caches(cfg, caches, free, inv, j, none)
        return (free, caches), j

    (free, _), j = lax.scan(body, (free, caches), (d_blk, steps, order.T))
    return free, j


_pack_block_jit = jax.jit(_pack_block, static_argnames=("cfg",), donate_argnames=("free",))


_T1, _T0, _REP = PartitionSpec(None, "trials"), PartitionSpec("trials"), PartitionSpec()
# Specs of (free, inv, demand, order, start, num_tasks, genomes, nwords, scale, limit) and of the
# outputs (free, machine), split over trials.
_BLOCK_SPECS = ((_T1, _REP, _REP, _T0, _REP, _REP, _REP, _T0, _T1, _T1), (_T1, PartitionSpec(None, None, "trials")))


def _mesh(devices: tuple) -> Mesh:
    """The 1-D mesh a packing's trials are split over."""
    return Mesh(np.asarray(devices), ("trials",))


@functools.lru_cache(maxsize=64)
def _sharded_block(cfg: PackConfig, devices: tuple):
    """`_pack_block` with the trial axis split over `devices`.

    shard_map over a 1-D mesh: trials are independent, so each device packs its share
    with the unchanged code: results are bit-identical to one device.
    """
    mesh = _mesh(devices)
    fn = jax.shard_map(functools.partial(_pack_block, cfg=cfg), mesh=mesh, check_vma=False,
                       in_specs=_BLOCK_SPECS[0], out_specs=_BLOCK_SPECS[1])
    return jax.jit(fn, donate_argnums=(0,)), mesh


def _global(x, mesh, spec):
    """x (the same full value on every process) as a global array sharded by `spec` over `mesh`."""
    if isinstance(x, jax.Array) and not x.is_fully_addressable:
        return x  # already global: the carry of the previous block
    full = np.asarray(x)
    return jax.make_array_from_callback(full.shape, NamedSharding(mesh, spec), lambda index: full[index])


def to_host(x) -> np.ndarray:
    """A result as a numpy array on this process, gathered from every host when it spans several."""
    if isinstance(x, jax.Array) and not x.is_fully_addressable:
        return np.asarray(multihost_utils.process_allgather(x, tiled=True))
    return np.asarray(x)


def _run_block(free, args, cfg, devices):
    """One full-scan block on one device, or with its trials sharded over several (on one host or many)."""
    if len(devices) > 1:  # the arguments are already placed (`_placer`)
        fn, _ = _sharded_block(cfg, devices)
        return fn(free, *args)
    return _pack_block_jit(free, *args, cfg=cfg)


def _placer(devices):
    """place(i, x): argument i of `_pack_block` (0: free) as `_run_block` takes it, on the
    devices it is split over (as a global array); unchanged on one device. Arguments that
    stay the same from block to block are placed once: passing single-device arrays to a
    sharded program makes JAX copy them over at every call."""
    if len(devices) < 2:  # on the device once, not copied over at every block
        return lambda i, x: jax.device_put(x, devices[0] if devices else None)
    mesh = _mesh(devices)
    return lambda i, x: _global(x, mesh, _BLOCK_SPECS[0][i])


def shard_devices(trials: int) -> tuple:
    """The devices the trial axis is split over: every device of every process when
    jax.distributed runs several, else all local devices when there are several trials."""
    if jax.process_count() > 1:
        return tuple(jax.devices())
    devices = tuple(jax.local_devices())
    return devices if trials > 1 and len(devices) > 1 else devices[:1]


# On a CPU, trials beyond what keeps the state this small run as sequential groups: the
# scan then works out of cache instead of streaming the state from memory every step.
CPU_STATE_BUDGET = 4 << 20


def _trial_groups(trials: int, bytes_per_trial: int, num_devices: int = 1) -> list[np.ndarray]:
    """Balanced consecutive groups of trial indices, one group off CPU or when it fits
    (the budget is per device when the trials are sharded)."""
    if jax.default_backend() != "cpu":
        return [np.arange(trials)]
    size = max(1, CPU_STATE_BUDGET // max(bytes_per_trial, 1)) * num_devices
    n_groups = -(-trials // size)
    return np.array_split(np.arange(trials), n_groups)


@dataclasses.dataclass(frozen=True)
class RowVariants:
    """Per-(row, trial) variations of one packing, for compaction and inflation.

    Each field is optional; a row without it packs the whole workload on the whole cluster.
    """

    machine_rank: np.ndarray | None = None  # i32[T, M]: machine m's place in trial t's random machine order
    prefix: np.ndarray | None = None  # i32[P, T]: the row's cluster is the machines of rank < prefix
    demand_scale: np.ndarray | None = None  # f32[P, T]: every demand of the row times this
    task_limit: np.ndarray | None = None  # i32[P, T]: the row packs only the tasks of index < limit


def _variant_arrays(v: RowVariants | None, P: int, T: int, M: int, Mp: int, N: int):
    """(rank i32[T, Mp], prefix i32[P, T], scale f32[P, T], limit i32[P, T]) with the defaults filled in."""
    v = v or RowVariants()
    rank = np.full((T, Mp), Mp, np.int32)  # padding machines are never in a prefix
    rank[:, :M] = np.arange(M) if v.machine_rank is None else v.machine_rank
    fields = ((v.prefix, Mp, np.int32), (v.demand_scale, 1.0, np.float32), (v.task_limit, N, np.int32))
    out = []
    for value, default, dtype in fields:
        arr = np.full((P, T), default, dtype) if value is None else np.asarray(value, dtype)
        if arr.shape != (P, T):
            raise InputError(f"row variants must have shape ({P}, {T}), got {arr.shape}")
        out.append(arr)
    if v.prefix is not None and v.machine_rank is None:
        raise InputError("a machine prefix needs the machine_rank it is a prefix of")
    return (rank, *out)


def _pack_trials(cfg, cap_t, inv_t, demand, orders, M, genomes, swords, nwords, variants, progress, devices=()):
    """Pack one group of trials: (free f32[P, T, R, Mp] as the state holds it (`encode_free`),
    machine i32[N, P, T], Mp where unplaced)."""
    T, N = orders.shape
    R, Mp = cap_t.shape
    rank, prefix, scale, limit = variants
    in_prefix = rank[None, :, None, :] < prefix[:, :, None, None]  # [P, T, 1, Mp]
    free = np.where(in_prefix, np.where(inv_t > 0, cap_t, ZERO_CAPACITY_FREE)[None, None], PAD_CAPACITY)
    free = free.astype(np.float32)  # the state `encode_free` gives
    if N == 0:  # nothing to place: the starting state, no placements
        return free, np.full((0, free.shape[0], T), Mp, np.int32)
    if cfg.sample_k > 0:
        return speculative.pack_trials(cfg, free, inv_t, demand, orders, M, genomes, swords, nwords, scale, limit,
                                       progress, devices, to_host)
    block = cfg.block
    padded = np.zeros((T, max(1, -(-N // block)) * block), np.int32)
    padded[:, :N] = orders
    place = _placer(devices)
    free = place(0, free)
    inv_t, demand, num_tasks, genomes, nwords, scale, limit = (
        place(i, x) for i, x in ((1, inv_t), (2, demand), (5, np.int32(N)), (6, genomes), (7, nwords), (8, scale),
                                 (9, limit)))
    chosen = []
    for start in range(0, padded.shape[1], block):
        args = (inv_t, demand, place(3, padded[:, start:start + block]), place(4, np.int32(start)),
                num_tasks, genomes, nwords, scale, limit)
        free, j = _run_block(free, args, cfg, devices)
        chosen.append(j)
        interrupt.queue_one_ahead(chosen)
        if progress is not None:
            progress(min(start + block, N), N)
    return to_host(free), np.concatenate([to_host(j) for j in chosen], axis=0)[:N]


def _decode_free(free, cap_t, zero_capacity) -> np.ndarray:
    """A packing state's free capacity f32[P, T, R, Mp] as users read it. A dimension of zero
    capacity (bool[R, Mp]; `encode_free`) took only zero demands: its free capacity is its
    capacity (padding and machines outside a prefix keep PAD_CAPACITY)."""
    return np.where(zero_capacity & (free == ZERO_CAPACITY_FREE), cap_t, free)


def _block_size(cfg_block: int, num_tasks: int) -> int:
    return int(min(cfg_block, max(64, -(-num_tasks // 64) * 64)))


def policy_shares(cfg: PackConfig) -> list[tuple[int, int]]:
    """Row ranges of whole policies, one per local device, when the rows hold at least as many
    policies as there are devices (one process); else []. Shares are balanced by cost: rows
    times their policy's `cost` (the policies' full-scan steps differ severalfold in time)."""
    devices = jax.local_devices()
    groups = cfg.groups()
    if jax.process_count() > 1 or len(devices) < 2 or len(groups) < len(devices):
        return []
    n = len(devices)
    upto = np.cumsum([(hi - lo) * get_policy(name).cost for name, lo, hi in groups])  # cost of groups[:g + 1]
    ends = []  # ends[k]: groups in the first k + 1 shares
    for k in range(1, n):
        first, last = (ends[-1] if ends else 0) + 1, len(groups) - (n - k)  # every share keeps a group
        ends.append(min(range(first, last + 1), key=lambda g: abs(upto[g - 1] - k * upto[-1] / n)))
    cuts = [0] + [groups[g - 1][2] for g in ends] + [len(cfg.policies)]
    return list(zip(cuts[:-1], cuts[1:]))


def genome_shares(cfg: PackConfig, trials: int) -> list[tuple[int, int]]:
    """Row ranges of nearly equal size, one per local device (at most one per row), for one
    trial of several rows of one policy (a population of genomes) in one process; else [].
    (Several trials of one policy split their trials instead.)"""
    devices = jax.local_devices()
    P = len(cfg.policies)
    if trials != 1 or P < 2 or len(cfg.groups()) != 1 or len(devices) < 2 or jax.process_count() > 1:
        return []
    cuts = np.linspace(0, P, min(len(devices), P) + 1).round().astype(int)
    return [(int(a), int(b)) for a, b in zip(cuts[:-1], cuts[1:])]


def pack(cluster: Cluster, workload: Workload, cfg: PackConfig, keys: jax.Array,
         genomes=None, orders=None, progress: Callable[[int, int], None] | None = None,
         variants: RowVariants | None = None, device=None) -> PackState:
    """Pack the workload for every policy row of `cfg` and every trial key.

    Args:
        cluster: the machines.
        workload: the tasks.
        cfg: one policy per row, the picker, the slot.
        keys: the T trial keys (`rng.trial_keys`).
        genomes: f32[P, 8] for `family` rows (default alpha_evolve's point).
        orders: i32[T, N] task orders (default: each trial's shuffle).
        progress: progress(done, total) after each block of tasks.
        variants: per-(row, trial) machine subsets, demand scales and task counts.
        device: run on that one device only (default: spread over every device, see the
            module notes).

    Returns:
        The PackState: free capacity f32[P, T, M, R] and placement i32[P, T, N] (-1 unplaced).

    Raises:
        InputError: genomes of the wrong shape or a negative sample_k.
    """
    P, T = len(cfg.policies), int(keys.shape[0])
    N = int(np.shape(workload.demand)[0])
    if genomes is None:
        genomes = row_genomes(cfg.policies)
    genomes = np.asarray(genomes, np.float32)
    if genomes.shape != (P, genome_width(cfg.policies)):
        raise InputError(f"genomes must have shape ({P}, {genome_width(cfg.policies)}), got {genomes.shape}")
    if cfg.sample_k < 0:
        raise InputError(f"sample_k must be >= 0, got {cfg.sample_k}")
    if cfg.window < 0:
        raise InputError(f"window must be >= 0 (0: chosen from the cluster), got {cfg.window}")
    orders = np.asarray(rng.trial_orders(keys, N) if orders is None else orders, np.int32)
    # The trials' hash words, computed once for every share of the rows.
    words = np.asarray(rng.hash_words(keys, rng.STREAM_SAMPLE)), np.asarray(rng.hash_words(keys, rng.STREAM_NOISE))
    shares = (policy_shares(cfg) or genome_shares(cfg, T)) if device is None else []
    if len(shares) > 1:
        return _pack_policy_shares(cluster, workload, cfg, genomes, orders, words, progress, variants, shares)
    return _pack_rows(cluster, workload, cfg, genomes, orders, words, progress, variants, device)


_inverse = jax.jit(safe_inverse)


def _pack_rows(cluster, workload, cfg, genomes, orders, words, progress, variants, device) -> PackState:
    """`pack` on one device, or with the trials split over several (`shard_devices`): genomes,
    orders and the trials' hash words (sample, noise) are pack's, already filled in."""
    P, (T, N) = len(cfg.policies), orders.shape
    cap = np.asarray(cluster.capacity, np.float32)
    demand = np.asarray(workload.demand, np.float32)
    M, R = cap.shape
    cfg = dataclasses.replace(cfg, slot=slot_vector(cfg.slot, R), block=_block_size(cfg.block, N))
    Mp = -(-M // CHUNK) * CHUNK
    cap_np = np.full((R, Mp), PAD_CAPACITY, np.float32)
    cap_np[:, :M] = cap.T
    inv_np = np.asarray(_inverse(cap_np))  # XLA's division, as the policies' own terms divide
    swords, nwords = words
    rank, prefix, scale, limit = _variant_arrays(variants, P, T, M, Mp, N)

    devices = (device,) if device is not None else shard_devices(T)
    groups = _trial_groups(T, P * R * Mp * 4, len(devices))
    total = N * len(groups)
    frees, chosen = [], []
    for g, trials in enumerate(groups):
        report = None if progress is None else (lambda done, _n, g=g: progress(g * N + done, total))
        n = len(trials)
        # With several devices, pad the group to a multiple of the device count with copies of
        # its last trial, whose results are dropped.
        trials = np.concatenate([trials, np.repeat(trials[-1:], -n % len(devices))])
        group_variants = (rank[trials], prefix[:, trials], scale[:, trials], limit[:, trials])
        free, steps = _pack_trials(cfg, cap_np, inv_np, demand, orders[trials], M, genomes, swords[trials],
                                   nwords[trials], group_variants, report, devices)
        frees.append(free[:, :n])
        chosen.append(steps[:, :, :n])
    free = _decode_free(np.concatenate(frees, axis=1), cap_np, inv_np == 0)
    return _pack_state(free, np.concatenate(chosen, axis=2), orders, M)


def _pack_policy_shares(cluster, workload, cfg, genomes, orders, words, progress, variants, shares) -> PackState:
    """`pack` with its rows split over the local devices (`shares`, row ranges: whole policies,
    `policy_shares`, or a population's genomes, `genome_shares`): each share is its own
    program (its own rows, all trials) on its own device, driven from its own thread.
    XLA:CPU runs a step's small kernels on one thread, so this keeps every core busy without
    the padding of a trial split; rows are independent, so results are identical."""
    slowest = SlowestShare(progress, len(shares), int(np.shape(workload.demand)[0]))

    def run(i, device):
        lo, hi = shares[i]
        sub_variants = None
        if variants is not None:
            rows = lambda a: None if a is None else np.asarray(a)[lo:hi]
            sub_variants = RowVariants(machine_rank=variants.machine_rank, prefix=rows(variants.prefix),
                                       demand_scale=rows(variants.demand_scale), task_limit=rows(variants.task_limit))
        return _pack_rows(cluster, workload, dataclasses.replace(cfg, policies=cfg.policies[lo:hi]), genomes[lo:hi],
                          orders, words, slowest.reporter(i), sub_variants, device)

    parts = on_devices(run, len(shares))
    return PackState(free=np.concatenate([p.free for p in parts]),
                     placement=np.concatenate([p.placement for p in parts]))


def _pack_state(free, steps, orders, M) -> PackState:
    """The PackState of free f32[P, T, R, Mp] and machines steps i32[N, P, T] in each trial's order."""
    P, T = free.shape[:2]
    machine = np.where(steps >= M, -1, steps).transpose(1, 2, 0)  # [P, T, N]
    placement = np.empty_like(machine)
    for t in range(T):  # each trial's steps back in task order, all rows at once
        placement[:, t, orders[t]] = machine[:, t]
    free_mr = free[..., :M].transpose(0, 1, 3, 2)  # [P, T, M, R]
    return PackState(free=free_mr, placement=placement)
