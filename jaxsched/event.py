"""Event mode: a discrete-event replay of an arrival stream, every policy in one JAX loop.

Semantics (the README's "Event mode" section; tests/reference_event.py is the plain
Python reading of the same rules):

- Time is integer ticks (`tick_s` seconds each, the finest of 1 ms, 10 ms, 0.1 s, 1 s
  that keeps every arrival + duration below 2^30 ticks). Tasks are numbered in arrival
  order (ties by their index in the workload).
- Events are processed one at a time: the earliest completion or arrival, completions
  first at equal times, then the lowest task number.
- An arrival is tried at once: sample_k draws with the full-scan fallback (or a full scan).
  A task that fits nowhere joins the pending queue.
- A completion frees its task's resources and then drains the pending queue: entries in
  FIFO order, those whose demand exceeds the maximum free per dimension at the drain's
  start skipped without scoring, the rest tried with sample_k draws and *no* fallback (a
  full scan when sample_k = 0). A placed task runs for its remaining duration.
- Preemption: the queue drains the production band (priority >= 9) first, then the
  middle band (2-8), then free (0-1), FIFO within a band. An arriving production task that
  fits nowhere may evict tasks of priority < 9: among machines where it fits once all of
  their evictable tasks are gone, the one with the least shortfall sum_r max(0, d_r - f_r)
  (lowest index among ties); victims on it go lowest priority first, then largest
  (d_cpu + d_mem + ...), then lowest task number, until the task fits. Victims re-queue
  and later resume their remaining duration. Production is never evicted.
- Draws: attempt n of task i (every try counts, from 0) uses the counter-hash step
  i + n * N of its trial's stream, so every policy sees the same draws for the same try.

The engine keeps every (policy, trial) row in fixed-size arrays (running tasks by task
number with a two-level minimum over end times, the queue as an append-only log with
compaction, a log of run segments) and masks instead of data-dependent shapes. The
costly paths (full-scan fallback, queue drain, eviction) run under a `lax.cond` on
whether any row needs them. A drain makes the reference's tries without the work of
those certain to fail: tasks of one demand and band form a class, whose certificate (the
at most two machines it may still fit on) shows most tries to fail without draws; those
are counted per class, and only the entries of classes that may fit are listed (through
per-class bitmaps of queue blocks) and tried. The host turns the run segments into the
reported figures (`jaxsched.eventstats`).
"""

from __future__ import annotations

import dataclasses
from typing import Callable, NamedTuple

import jax
import jax.numpy as jnp
import numpy as np
from jax import lax

from . import rng
from .devices import SlowestShare, on_devices
from .errors import InputError
from .packing import PAD_CAPACITY, PackConfig, _score_rows, first_best, when
from .policies import ALPHA_EVOLVE_GENOME, FEASIBILITY_TOL, GENOME_SIZE, feasible, safe_inverse, slot_vector
from .types import Cluster, Workload

INF = 2**31 - 1  # "never": end tick of a task not running
TICK_LIMIT = 2**30
TICKS_S = (1e-3, 1e-2, 1e-1, 1.0)
TASK_CHUNK = 512  # tasks per chunk of the two-level minimum over end ticks
QUEUE_WINDOW = 128  # drain candidates examined (and tried together) per drain step
PASS_CHUNK = 4096  # queue entries per iteration of the pass that lists a drain's candidates
BLOCK_SHIFT, WORD_SHIFT = 6, 11  # class block bitmaps: blocks of 64 queue entries, 32 blocks a word
SPAN_WORDS = 8  # bitmap words read per iteration of a drain's listing (16,384 queue entries)
GROUP_BLOCKS = 64  # blocks read per inner iteration of a drain's listing
LIST_AHEAD = 4  # a drain lists this many windows of candidates ahead at a time
MAX_LIVE = 64  # live classes a drain lists through the bitmaps; with more, it reads the whole queue
FULL_SCAN_WINDOW = 8  # the same with full scans (sample_k = 0), each a pass over all machines
PRODUCTION = 9  # priority of the production band and up
BANDS = 3  # free (0-1), middle (2-8), production (>= 9)
EXPERIMENT = "event"
STEPS_PER_CALL = 4096  # outer events per compiled call, between progress reports


def band_of(priority: np.ndarray) -> np.ndarray:
    """Band of each priority: 0 free (0-1), 1 middle (2-8), 2 production (>= 9)."""
    p = np.asarray(priority)
    return np.where(p >= PRODUCTION, 2, np.where(p >= 2, 1, 0)).astype(np.int32)


@dataclasses.dataclass(frozen=True)
class EventConfig:
    """Static configuration of one replay program (one compile per value)."""

    policies: tuple[str, ...]  # one name per row; rows of one name are consecutive
    sample_k: int = 0
    preempt: bool = False
    slot: tuple[float, ...] = (0.05, 0.05)

    def pack_config(self) -> PackConfig:
        return PackConfig(policies=self.policies, sample_k=self.sample_k, slot=self.slot)


@dataclasses.dataclass(frozen=True)
class EventInputs:
    """A workload prepared for replay: tasks in arrival order, times in ticks."""

    order: np.ndarray  # i64[N]: workload index of task number n
    demand: np.ndarray  # f32[N, R]
    arrival: np.ndarray  # i32[N] ticks
    duration: np.ndarray  # i32[N] ticks
    band: np.ndarray  # i32[N]
    evict_rank: np.ndarray  # i32[N]: place in the victim order, INF where not evictable
    tick_s: float

    @property
    def num_tasks(self) -> int:
        return int(self.demand.shape[0])


def choose_tick(arrival: np.ndarray, duration: np.ndarray) -> float:
    """The finest tick of TICKS_S under which every arrival + duration stays below 2^30 ticks."""
    span = float(np.max(arrival + duration)) if arrival.size else 0.0
    for tick in TICKS_S:
        if span / tick < TICK_LIMIT:
            return tick
    raise InputError(f"the workload spans {span:.0f} s, more than event mode's {TICK_LIMIT} s")


def prepare(workload: Workload, preempt: bool) -> EventInputs:
    """Sort tasks by arrival, convert times to ticks, rank eviction victims."""
    arrival_s = np.asarray(workload.arrival, np.float64)
    duration_s = np.asarray(workload.duration, np.float64)
    if workload.num_tasks == 0:
        raise InputError("the workload has no tasks to replay")
    if np.any(~np.isfinite(arrival_s)) or np.any(arrival_s < 0):
        raise InputError(f"task {int(np.argmax(~np.isfinite(arrival_s) | (arrival_s < 0)))} has a bad arrival time")
    if np.any(~np.isfinite(duration_s)) or np.any(duration_s < 0):
        raise InputError(f"task {int(np.argmax(~np.isfinite(duration_s) | (duration_s < 0)))} has a bad duration")
    order = np.argsort(arrival_s, kind="stable")
    tick = choose_tick(arrival_s, duration_s)
    demand = np.asarray(workload.demand, np.float32)[order]
    priority = np.asarray(workload.priority)[order]
    band = band_of(priority) if preempt else np.zeros(len(order), np.int32)
    # Victim order: lowest priority, then largest total demand, then lowest task number.
    size = demand.astype(np.float64).sum(axis=1)
    victims = np.lexsort((np.arange(len(order)), -size, priority))
    rank = np.empty(len(order), np.int64)
    rank[victims] = np.arange(len(order))
    rank = np.where(priority < PRODUCTION, rank, INF).astype(np.int32)
    return EventInputs(
        order=order, demand=demand,
        arrival=np.rint(arrival_s[order] / tick).astype(np.int32),
        duration=np.rint(duration_s[order] / tick).astype(np.int32),
        band=band, evict_rank=rank, tick_s=tick)


def demand_classes(demand: np.ndarray, band: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The class of each task (i32[N]) and each class's demand (f32[C, R]): tasks of one
    demand and band share a class."""
    demand = np.ascontiguousarray(demand, np.float32)
    key = np.concatenate([demand.view(np.int32), np.asarray(band, np.int32)[:, None]], axis=1)
    _, first, cls = np.unique(key, axis=0, return_index=True, return_inverse=True)
    return cls.reshape(-1).astype(np.int32), demand[first]


class EventState(NamedTuple):
    """Carry of the replay, leading axis B = rows (policy x trial)."""

    free: jax.Array  # f32[B, R, Mp]
    end: jax.Array  # i32[B, Np]: end tick of each running task, INF otherwise
    chunk_min: jax.Array  # i32[B, Np / TASK_CHUNK]: min of `end` per chunk
    task: jax.Array  # i32[B, 5, Np]: machine, remaining ticks, attempts, first start, current segment
    seg: jax.Array  # i32[B, 4, S]: run segments (task, machine, start, end)
    queue: jax.Array  # i32[B, 5, L]: the pending log (fields Q_*), FIFO order, task -1 where removed
    classes: jax.Array  # i32[B, 4, Cp]: per demand class (fields C_*)
    blocks: jax.Array  # u32[B, Cp, L / 2048]: bit k of word w: block 32 w + k of the queue held the class
    bound: jax.Array  # f32[B, R]: max free per dimension at the start of the row's drain
    ctl: jax.Array  # i32[B, 17]: the per-row counters and mode below


MACH, REM, ATT, FIRST, CUR = range(5)
(ARRIVED, NSEG, TAIL, NQ, NEVICT, MODE, NOW, POS, BAND, EV_TASK, EV_MACH, NCAND, LCUR, DRAWN, DRAWN_HI,
 TRIES, TRIES_HI) = range(17)  # DRAWN and TRIES (drain tries): 64-bit counts, the low word read as unsigned
EVENT, DRAIN, EVICT = range(3)  # what a row's next step does
# Queue fields: the task, its demand class, its attempts as base + (the class's C_TRIES now -
# its value at entry), and, during a drain, the queue positions of the drain's candidates.
Q_TASK, Q_CLASS, Q_BASE, Q_SNAP, Q_LIST = range(5)
# Class fields. Tasks of one class have one demand (and band), so whether they fit is one
# question: the witnesses certify that the class fits nowhere but on them (-1 an empty
# slot; W_ANY in C_W1: no certificate). C_TRIES counts the drains that tried the class's
# entries; C_QUEUED its entries in the queue.
C_W1, C_W2, C_TRIES, C_QUEUED = range(4)
W_ANY = -2


class _Static(NamedTuple):
    """Traced inputs shared by every step."""

    cap: jax.Array  # f32[R, Mp]
    inv: jax.Array  # f32[R, Mp]
    demand: jax.Array  # f32[Np, R]
    arrival: jax.Array  # i32[Np], INF for padding
    band: jax.Array  # i32[Np]
    rank: jax.Array  # i32[Np]
    cls: jax.Array  # i32[Np]: demand class of each task
    class_demand: jax.Array  # f32[Cp, R], +inf for padding classes
    genomes: jax.Array  # f32[B, 8]
    swords: jax.Array  # u32[B, 2]
    nwords: jax.Array  # u32[B, 2]


def _add64(lo, hi, x):
    """(lo, hi) + x for a 64-bit count kept as two i32 words (lo read as unsigned), x >= 0."""
    lo_u = lax.bitcast_convert_type(lo, jnp.uint32)
    new = lo_u + x.astype(jnp.uint32)
    return lax.bitcast_convert_type(new, jnp.int32), hi + (new < lo_u).astype(jnp.int32)


def _count64(counts: np.ndarray, field: int) -> np.ndarray:
    """The 64-bit counts i64[B] kept in ctl columns field (low word) and field + 1."""
    return (counts[:, field + 1].astype(np.int64) << 32) + (counts[:, field].astype(np.int64) & 0xFFFFFFFF)


def _rows(x):
    return jnp.arange(x.shape[0], dtype=jnp.int32)


def _get(a, idx):
    """a[b, idx[b]] for every row b (idx in range)."""
    return a[_rows(a), idx]


def _put(a, idx, value, mask):
    """a[b, idx[b]] = value[b] where mask[b]."""
    out_of_range = a.shape[1]
    return a.at[_rows(a), jnp.where(mask, idx, out_of_range)].set(value, mode="drop")


def _task_put(task, field, t, value, mask):
    b = _rows(t)
    return task.at[b, field, jnp.where(mask, t, task.shape[2])].set(value, mode="drop")


def _hash(words, step, lanes):
    """Counter hash per row and try: words u32[B, 2], step u32[B, W], lanes i32[B, W, X] -> u32[B, W, X]."""
    one = lambda w, s, ln: rng.counter_bits(w[None], s, ln)[0]
    return jax.vmap(jax.vmap(one, in_axes=(None, 0, 0)))(words, step, lanes)


def _scores(cfg, st, free_x, inv_x, d, noise, inv_axes):
    """Scores f32[B, W, X] of each row's W tasks d f32[B, W, R] on their X machines each."""
    return _score_rows(cfg.pack_config(), d, free_x, inv_x, st.genomes, noise, inv_axes, (0, 0), encoded=False)


def _noise(cfg, st, step, lanes):
    if "random" not in cfg.policies:
        return jnp.zeros(lanes.shape, jnp.float32)
    bits = _hash(st.nwords, step, lanes) >> 8
    return bits.astype(jnp.float32) * jnp.float32(2.0**-24)


def _full_scan(cfg, st, free, d, step):
    """Lowest-index best machine of each row's W tasks, Mp where none is feasible: i32[B, W]."""
    B, R, Mp = free.shape
    W = d.shape[1]
    lanes = jnp.broadcast_to(jnp.arange(Mp, dtype=jnp.int32), (B, W, Mp))
    free_w = jnp.broadcast_to(free[:, None], (B, W, R, Mp))
    s = _scores(cfg, st, free_w, st.inv, d, _noise(cfg, st, step, lanes), (None, None))
    return first_best(s, jnp.int32(Mp))


def _pick(cfg, st, free, d, step, fallback, num_machines):
    """The machine of each of the W tries per row, all against the same free state (Mp: none).

    d f32[B, W, R], step u32[B, W]: sample_k draws from each try's step, a full scan for
    the tries in `fallback` bool[B, W] whose draws all miss (computed only when one needs
    it); a full scan for every try when sample_k = 0.
    """
    B, R, Mp = free.shape
    W = d.shape[1]
    if cfg.sample_k == 0:
        return _full_scan(cfg, st, free, d, step)
    K = cfg.sample_k
    lanes = jnp.broadcast_to(jnp.arange(K, dtype=jnp.int32), (B, W, K))
    idx = (_hash(st.swords, step, lanes) % jnp.uint32(num_machines)).astype(jnp.int32)
    dims = jnp.arange(R, dtype=jnp.int32)[None, None, :, None]
    free_s = free[_rows(idx)[:, None, None, None], dims, idx[:, :, None, :]]  # [B, W, R, K]
    inv_s = st.inv[dims[0], idx[:, :, None, :]]
    s = _scores(cfg, st, free_s, inv_s, d, _noise(cfg, st, step, idx), (0, 0))
    best = jnp.max(s, axis=2, keepdims=True)
    tied = (s == best) & (best > -jnp.inf)
    j = jnp.min(jnp.where(tied, idx, Mp), axis=2).astype(jnp.int32)
    if fallback is None:
        return j
    need = fallback & (j == Mp)
    # Each policy's rows get their full scan only when one of them needs it (a cond whose
    # result is small reads the carry without copying it).
    out = []
    for name, lo, hi in cfg.pack_config().groups():
        sub_cfg = dataclasses.replace(cfg, policies=(name,) * (hi - lo))
        sub_st = st._replace(genomes=st.genomes[lo:hi], swords=st.swords[lo:hi], nwords=st.nwords[lo:hi])
        n, jg = need[lo:hi], j[lo:hi]
        scan = lambda sub_cfg=sub_cfg, sub_st=sub_st, lo=lo, hi=hi, n=n, jg=jg: jnp.where(
            n, _full_scan(sub_cfg, sub_st, free[lo:hi], d[lo:hi], step[lo:hi]), jg)
        out.append(lax.cond(jnp.any(n), scan, lambda jg=jg: jg))
    return jnp.concatenate(out, axis=0) if len(out) > 1 else out[0]


def _any_feasible(cfg, st, free, d, step, num_machines):
    """bool[B, W]: whether each try (d f32[B, W, R], step u32[B, W]) has a feasible machine to score."""
    B, R, Mp = free.shape
    W = d.shape[1]
    col = lambda a: tuple(a[..., x, :] for x in range(R))
    if cfg.sample_k == 0:
        fits = feasible(tuple(d[:, :, x, None] for x in range(R)), col(free[:, None]), col(st.inv[None, None]))
        return jnp.any(fits, axis=2)
    lanes = jnp.broadcast_to(jnp.arange(cfg.sample_k, dtype=jnp.int32), (B, W, cfg.sample_k))
    idx = (_hash(st.swords, step, lanes) % jnp.uint32(num_machines)).astype(jnp.int32)
    dims = jnp.arange(R, dtype=jnp.int32)[None, None, :, None]
    free_s = free[_rows(idx)[:, None, None, None], dims, idx[:, :, None, :]]  # [B, W, R, K]
    inv_s = st.inv[dims[0], idx[:, :, None, :]]
    fits = feasible(tuple(d[:, :, x, None] for x in range(R)), col(free_s), col(inv_s))
    return jnp.any(fits, axis=2)


def _fits(st, free, d, j):
    """bool[B]: row b's demand d[b] fits machine j[b] now."""
    B, R, Mp = free.shape
    dims = jnp.arange(R, dtype=jnp.int32)[None, :]
    f = free[_rows(j)[:, None], dims, jnp.minimum(j, Mp - 1)[:, None]]
    i = st.inv[dims, jnp.minimum(j, Mp - 1)[:, None]]
    col = lambda a: tuple(a[:, x] for x in range(R))
    return feasible(col(d), col(f), col(i)) & (j < Mp)


def _evict_machine(st, state, d, need):
    """For production demand d[B, R]: (machine i32[B] to evict on, found bool[B]) of the rows in `need`.

    Among machines where d fits once every evictable task is gone, the least shortfall
    sum_r max(0, d_r - free_r), lowest index among ties.
    """
    B, R, Mp = state.free.shape
    Np = state.end.shape[1]
    evictable = (state.end < INF) & (st.rank[None, :] < INF)
    where_m = jnp.where(evictable, state.task[:, MACH], Mp)
    ev = jnp.zeros_like(state.free).at[_rows(d)[:, None, None], jnp.arange(R, dtype=jnp.int32)[None, None, :],
                                      where_m[:, :, None]].add(jnp.broadcast_to(st.demand[None], (B, Np, R)),
                                                               mode="drop")
    dd = tuple(d[:, x, None] for x in range(R))
    ok = feasible(dd, tuple(state.free[:, x] + ev[:, x] for x in range(R)), tuple(st.inv[x][None] for x in range(R)))
    short = sum(jnp.maximum(d[:, x, None] - state.free[:, x], 0.0) for x in range(R))
    j = jnp.argmin(jnp.where(ok, short, jnp.inf), axis=1).astype(jnp.int32)
    return j, need & jnp.any(ok, axis=1)


def _victim(st, state, j):
    """Next victim on machine j[B]: lowest place in the victim order among its evictable tasks."""
    key = jnp.where((state.end < INF) & (st.rank[None, :] < INF) & (state.task[:, MACH] == j[:, None]),
                    st.rank[None, :], INF)
    v = jnp.argmin(key, axis=1).astype(jnp.int32)
    return v, _get(key, v) < INF


def _compact(state, rows):
    """Drop removed entries from the queue log of each row in `rows`, keeping FIFO order."""
    L = state.queue.shape[2]

    def one(q, tail):
        live = (q[Q_TASK] >= 0) & (jnp.arange(L) < tail)
        idx = jnp.nonzero(live, size=L, fill_value=L)[0]
        return jnp.where((idx < L)[None, :], q[:Q_LIST, jnp.minimum(idx, L - 1)], -1)

    packed = jax.vmap(one)(state.queue, state.ctl[:, TAIL])
    queue = state.queue.at[:, :Q_LIST].set(jnp.where(rows[:, None, None], packed, state.queue[:, :Q_LIST]))
    ctl = state.ctl.at[:, TAIL].set(jnp.where(rows, state.ctl[:, NQ], state.ctl[:, TAIL]))
    return state._replace(queue=queue, ctl=ctl, blocks=_rebuild_blocks(queue, state.blocks, rows))


def _columns(a):
    return tuple(a[..., x] for x in range(a.shape[-1]))


def _fits_on(st, free, d, w):
    """bool[B, W]: demand d f32[B, W, R] fits machine w i32[B, W] now (False where w < 0)."""
    B, R, Mp = free.shape
    wc = jnp.clip(w, 0, Mp - 1)[:, :, None]
    dims = jnp.arange(R, dtype=jnp.int32)[None, None, :]
    f = free[_rows(w)[:, None, None], dims, wc]
    return feasible(_columns(d), _columns(f), _columns(st.inv[dims, wc])) & (w >= 0)


def _witnesses(st, free, d, num_machines):
    """The witnesses of demand d f32[B, R] now: (w1, w2) i32[B], the first two machines it fits
    (-1 for none), or (W_ANY, -1) when it fits more than two."""
    B, R, Mp = free.shape
    lanes = jnp.arange(Mp, dtype=jnp.int32)[None, :]
    fits = feasible(tuple(d[:, x, None] for x in range(R)), tuple(free[:, x] for x in range(R)),
                    tuple(st.inv[x][None] for x in range(R))) & (lanes < num_machines)
    n = jnp.sum(fits, axis=1, dtype=jnp.int32)
    first = jnp.argmax(fits, axis=1).astype(jnp.int32)
    second = jnp.argmax(fits & (lanes > first[:, None]), axis=1).astype(jnp.int32)
    w1 = jnp.where(n == 0, -1, jnp.where(n > 2, W_ANY, first))
    return w1, jnp.where(n == 2, second, -1)


def _materialize(pred, fn):
    """fn()'s values, computed as a conditional that is always taken (pred is true at run time).

    XLA updates a carry array in place only when every read of its old value is ordered
    before the update; a read that fusion duplicates into an unrelated consumer is not,
    and the whole array is then copied every step. A conditional's results are computed
    once, in one place, so the later updates that use them are ordered after every read.
    """
    shapes = jax.eval_shape(fn)
    return lax.cond(pred, fn, lambda: jax.tree_util.tree_map(lambda x: jnp.zeros(x.shape, x.dtype), shapes))


def _class_fits(st, free, w):
    """bool[B, Cp]: each demand class fits machine w i32[B, Cp] now (False where w < 0)."""
    B, R, Mp = free.shape
    return _fits_on(st, free, jnp.broadcast_to(st.class_demand[None], w.shape + (R,)), w)


def _raise(st, free, classes, rows, x):
    """The class certificates of the rows `rows` bool[B] after machine x i32[B] gained free space.

    Free space only shrinks but where a task stops (a completion, an eviction), so a class
    certified to fit nowhere but on its witnesses stays so, except that it may now fit on x:
    x joins its witnesses (witnesses that no longer fit leave; with no slot free, the
    certificate is dropped).
    """
    B, R, Mp = free.shape
    w1, w2 = classes[:, C_W1], classes[:, C_W2]
    any_ = w1 == W_ANY
    w1 = jnp.where(any_ | _class_fits(st, free, w1), w1, -1)
    w2 = jnp.where(_class_fits(st, free, w2), w2, -1)
    xc = x[:, None]
    fx = jnp.clip(x, 0, Mp - 1)
    fits_x = feasible(tuple(st.class_demand[None, :, r] for r in range(R)), tuple(
        free[_rows(x), r, fx][:, None] for r in range(R)), tuple(st.inv[r, fx][:, None] for r in range(R)))
    joins = rows[:, None] & fits_x & ~any_ & (w1 != xc) & (w2 != xc)
    full = joins & (w1 != -1) & (w2 != -1)
    w1n = jnp.where(full, W_ANY, jnp.where(joins & (w1 == -1), xc, w1))
    w2n = jnp.where(full, -1, jnp.where(joins & (w1 != -1) & (w2 == -1), xc, w2))
    keep = ~rows[:, None]
    return classes.at[:, C_W1].set(jnp.where(keep, classes[:, C_W1], w1n)).at[:, C_W2].set(
        jnp.where(keep, classes[:, C_W2], w2n))


def _block_bit(p):
    """The word of a queue position p in the class block bitmaps, and its block's bit there."""
    return p >> WORD_SHIFT, jnp.left_shift(jnp.uint32(1), ((p >> BLOCK_SHIFT) & 31).astype(jnp.uint32))


def _rebuild_blocks(queue, blocks, rows):
    """The class block bitmaps of the rows `rows` bool[B], rebuilt from their queues."""
    B, _, L = queue.shape
    Cp, NW = blocks.shape[1], blocks.shape[2]
    shape = (B, NW, 32, 1 << BLOCK_SHIFT)  # word, block (bit), position in the block
    cls = queue[:, Q_CLASS].reshape(shape)
    cls = jnp.where((queue[:, Q_TASK] >= 0).reshape(shape) & rows[:, None, None, None], cls, Cp)
    b = _rows(rows)[:, None, None]
    w = jnp.arange(NW, dtype=jnp.int32)[None, :, None]

    def one_bit(j, new):  # the entries of one block per word: their writes to a word agree
        c = lax.dynamic_index_in_dim(cls, j, axis=2, keepdims=False)
        old = new[b, jnp.minimum(c, Cp - 1), w]
        return new.at[b, c, w].set(old | jnp.left_shift(jnp.uint32(1), j.astype(jnp.uint32)), mode="drop")

    new = lax.fori_loop(0, 32, one_bit, jnp.zeros_like(blocks))
    return jnp.where(rows[:, None, None], new, blocks)


def _list_candidates(queue, live, tail, count, positions):
    """Queue positions i32[B, n] that hold an entry of a `live` bool[B, Cp] class appended to
    the drain list (Q_LIST) at `count` i32[B], in order: (queue, count)."""
    B, n = positions.shape
    L = queue.shape[2]
    b = _rows(tail)

    def reads():
        safe = jnp.minimum(positions, L - 1)
        task = queue[b[:, None], Q_TASK, safe]
        cls = jnp.maximum(queue[b[:, None], Q_CLASS, safe], 0)
        cand = (task >= 0) & (positions < tail[:, None]) & jnp.take_along_axis(live, cls, axis=1)
        return cand, count[:, None] + jnp.cumsum(cand, axis=1, dtype=jnp.int32) - 1

    cand, k = _materialize(jnp.all(count >= 0), reads)
    queue = queue.at[b[:, None], Q_LIST, jnp.where(cand, k, L)].set(positions, mode="drop")
    return queue, count + jnp.sum(cand, axis=1, dtype=jnp.int32)


def _passing(st, bound, rows):
    """bool[B, Cp]: the classes of the rows `rows` bool[B] whose demand fits the drain's bound."""
    return rows[:, None] & jnp.all(st.class_demand[None] <= bound[:, None, :] + FEASIBILITY_TOL, axis=2)


def _live_classes(st, free, classes, bound, rows, witnesses_fit=False):
    """bool[B, Cp]: the classes of the rows `rows` bool[B] whose queued entries a drain tries
    and that may fit somewhere now (no certificate, or a witness that fits). witnesses_fit:
    every witness is known to fit now (just after `_raise`), so none is looked up."""
    w1, w2 = classes[:, C_W1], classes[:, C_W2]
    passes = _passing(st, bound, rows)
    if witnesses_fit:
        may_fit = (w1 == W_ANY) | (w1 >= 0) | (w2 >= 0)
    else:
        may_fit = (w1 == W_ANY) | _class_fits(st, free, w1) | _class_fits(st, free, w2)
    return passes & (classes[:, C_QUEUED] > 0) & may_fit


def _list_more(st, free, queue, blocks, classes, bound, tail, rows, cursor, count, target, witnesses_fit=False):
    """More of the drain list of the rows `rows` bool[B]: the entries of live classes from
    queue position `cursor` on, appended at `count` until it reaches `target` (or the queue
    ends): (queue, cursor, count).

    Listing as the drain goes leaves out the entries of classes that died meanwhile (their
    tries fail for sure). The class block bitmaps lead to the blocks of 64 entries that held
    a live class (at most MAX_LIVE live classes a row; with more, every entry is read).
    """
    B, _, L = queue.shape
    Cp = blocks.shape[1]
    b = _rows(tail)
    live = _live_classes(st, free, classes, bound, rows, witnesses_fit)
    active = lambda cur, n: rows & (n < target) & (cur < tail) & jnp.any(live, axis=1)
    few = jnp.all(jnp.sum(live, axis=1) <= MAX_LIVE)
    span = SPAN_WORDS << WORD_SHIFT
    span_blocks = span >> BLOCK_SHIFT
    lane = jnp.arange(1 << BLOCK_SHIFT, dtype=jnp.int32)[None, None, :]
    bits = jnp.arange(32, dtype=jnp.uint32)[None, None, None, :]
    block_no = jnp.arange(span_blocks, dtype=jnp.int32)[None, :]

    def by_blocks(c):
        ids = jax.vmap(lambda x: jnp.nonzero(x, size=MAX_LIVE, fill_value=Cp)[0])(live).astype(jnp.int32)

        def body(c):
            queue, cur, n = c
            go = active(cur, n)
            first = (cur // span) * span_blocks  # the span's first block
            w = (first >> 5)[:, None] + jnp.arange(SPAN_WORDS, dtype=jnp.int32)[None, :]
            words = blocks[b[:, None, None], jnp.minimum(ids, Cp - 1)[:, :, None], w[:, None, :]]
            words = jnp.where((ids < Cp)[:, :, None], words, jnp.uint32(0))
            hit = jnp.any((jnp.right_shift(words[..., None], bits) & jnp.uint32(1)) > 0, axis=1).reshape(B, -1)
            blk = first[:, None] + block_no
            hit = hit & (blk >= (cur >> BLOCK_SHIFT)[:, None]) & ((blk << BLOCK_SHIFT) < tail[:, None])
            slot = jnp.where(hit, jnp.cumsum(hit, axis=1, dtype=jnp.int32) - 1, GROUP_BLOCKS)
            taken = jnp.full((B, GROUP_BLOCKS), -1, jnp.int32).at[b[:, None], slot].set(blk, mode="drop")
            pos = jnp.where(((taken >= 0) & go[:, None])[:, :, None], (taken << BLOCK_SHIFT)[:, :, None] + lane, L)
            queue, n = _list_candidates(queue, live, tail, n, pos.reshape(B, -1))
            more = jnp.sum(hit, axis=1) > GROUP_BLOCKS
            nxt = jnp.where(more, (taken[:, -1] + 1) << BLOCK_SHIFT, (first + span_blocks) << BLOCK_SHIFT)
            return queue, jnp.where(go, nxt, cur), n

        return lax.while_loop(lambda c: jnp.any(active(c[1], c[2])), body, c)

    def by_scan(c):
        def body(c):
            queue, cur, n = c
            go = active(cur, n)
            pos = jnp.where(go[:, None], cur[:, None] + jnp.arange(PASS_CHUNK, dtype=jnp.int32)[None, :], L)
            queue, n = _list_candidates(queue, live, tail, n, pos)
            return queue, jnp.where(go, cur + PASS_CHUNK, cur), n

        return lax.while_loop(lambda c: jnp.any(active(c[1], c[2])), body, c)

    c = when(few, by_blocks, (queue, cursor, count))
    c = when(~few, by_scan, c)
    # A row whose live classes are gone has nothing more to list.
    queue, cur, n = c
    return queue, jnp.where(rows & ~jnp.any(live, axis=1), jnp.maximum(cur, tail), cur), n


def _drain_pass(st, free, classes, old_bound, rows, num_machines):
    """The start of a drain in the rows `rows` bool[B]: (classes, bound f32[B, R] (`old_bound`
    elsewhere), the drain's tries i32[B]).

    A drain tries, once each, the entries whose demand fits the maximum free per dimension
    (`bound`) at its start: C_TRIES counts that try for their whole class. The entries of a
    class certified to fit nowhere fail for sure and need nothing more; the others, of the
    drain's live classes, are listed as the drain goes (`_list_more`) and tried with draws.
    """
    bound = jnp.where(rows[:, None], jnp.max(free[:, :, :num_machines], axis=2), old_bound)
    passes = _passing(st, bound, rows)
    tries = jnp.sum(jnp.where(passes, classes[:, C_QUEUED], 0), axis=1, dtype=jnp.int32)
    return classes.at[:, C_TRIES].add(passes.astype(jnp.int32)), bound, tries


def _step(cfg, st, state, num_machines, num_tasks):
    """One step of every row: the next event, one drain try, or one eviction.

    Each row is in one of three modes. EVENT: the next completion (then DRAIN if the
    certifying pass leaves tries with a chance) or arrival (placed, or EVICT for a
    production task with --preempt, or queued). DRAIN: the next candidates of the drain's
    list are tried, a window at a time. EVICT: one victim leaves, and the evicting task
    starts once it fits. The reads of each phase are materialized (`_materialize`) before
    its writes.
    """
    B, R, Mp = state.free.shape
    L, S = state.queue.shape[2], state.seg.shape[2]
    b = _rows(state.ctl)
    width = QUEUE_WINDOW if cfg.sample_k > 0 else FULL_SCAN_WINDOW
    ctl = state.ctl
    # DRAIN rows whose list runs short of a window: more of it first.
    short = (ctl[:, MODE] == DRAIN) & (ctl[:, NCAND] - ctl[:, POS] < width) & (ctl[:, LCUR] < ctl[:, TAIL])

    def extend(s):
        queue, cur, n = _list_more(st, s.free, s.queue, s.blocks, s.classes, s.bound, s.ctl[:, TAIL], short,
                                   s.ctl[:, LCUR], s.ctl[:, NCAND], s.ctl[:, POS] + LIST_AHEAD * width)
        return s._replace(queue=queue, ctl=s.ctl.at[:, LCUR].set(cur).at[:, NCAND].set(n))

    state = when(jnp.any(short), extend, state)
    ctl = state.ctl
    mode = ctl[:, MODE]
    in_event, in_drain, in_evict = mode == EVENT, mode == DRAIN, mode == EVICT
    dims = jnp.arange(R, dtype=jnp.int32)[None, :]
    none = jnp.int32(Mp)
    zeros_i, zeros_b = jnp.zeros(B, jnp.int32), jnp.zeros(B, bool)
    window = lambda start, n: start[:, None] + jnp.arange(n, dtype=jnp.int32)[None, :]
    lane = jnp.arange(width, dtype=jnp.int32)[None, :]
    always = ctl[0, ARRIVED] >= 0
    arrived = ctl[:, ARRIVED]
    pos, band, tail, nq, ncand = ctl[:, POS], ctl[:, BAND], ctl[:, TAIL], ctl[:, NQ], ctl[:, NCAND]
    ev_task, ev_mach = ctl[:, EV_TASK], ctl[:, EV_MACH]

    def first_reads():
        # EVENT rows: the earliest completion (lowest task number among ties) or arrival.
        t_arr = jnp.where(arrived < num_tasks, st.arrival[jnp.minimum(arrived, st.arrival.shape[0] - 1)], INF)
        chunk = jnp.argmin(state.chunk_min, axis=1).astype(jnp.int32)
        t_end = _get(state.chunk_min, chunk)
        is_end = in_event & (t_end <= t_arr) & (t_end < INF)
        is_arr = in_event & ~is_end & (arrived < num_tasks)
        now = jnp.where(in_event, jnp.where(is_end, t_end, t_arr), ctl[:, NOW])
        lanes = window(chunk * TASK_CHUNK, TASK_CHUNK)
        done = _get(lanes, jnp.argmin(state.end[b[:, None], lanes], axis=1).astype(jnp.int32))
        # EVICT rows: the next victim, unless the evicting task fits already.
        want = in_evict & ~_fits(st, state.free, st.demand[ev_task], ev_mach)
        if cfg.preempt:
            victim, has_victim = lax.cond(jnp.any(want), lambda: _victim(st, state, ev_mach),
                                          lambda: (zeros_i, zeros_b))
        else:
            victim, has_victim = zeros_i, zeros_b
        evicts = want & has_victim
        stop_t = jnp.where(is_end, done, victim)
        stopping = is_end | evicts
        old_end = _get(state.end, stop_t)
        stop_m = jnp.where(stopping, state.task[b, MACH, stop_t], none)
        stop_seg = jnp.where(stopping, state.task[b, CUR, stop_t], S)

        # DRAIN rows: the window of the drain's list at POS, its entries of the current band. An
        # entry whose class is certified to fit nowhere but on witnesses, none of which fits now,
        # fails for sure (its try was counted at the drain's start): windows of such entries
        # alone are passed over here, in one step.
        def window_at(start):
            lanes = window(start, width)
            listed = in_drain[:, None] & (lanes < ncand[:, None])
            p = jnp.where(listed, state.queue[b[:, None], Q_LIST, jnp.minimum(lanes, L - 1)], 0)
            fields = state.queue[b[:, None, None], jnp.arange(Q_LIST, dtype=jnp.int32)[None, :, None], p[:, None, :]]
            safe = jnp.maximum(fields[:, Q_TASK], 0)
            cand = listed & (fields[:, Q_TASK] >= 0) & (st.band[safe] == band[:, None])
            cls = fields[:, Q_CLASS]
            of_class = state.classes[b[:, None, None], jnp.arange(C_TRIES + 1, dtype=jnp.int32)[None, :, None], cls[:, None, :]]
            # The drain's try was counted in C_TRIES at its start.
            att = fields[:, Q_BASE] + of_class[:, C_TRIES] - 1 - fields[:, Q_SNAP]
            w1, w2 = of_class[:, C_W1], of_class[:, C_W2]
            d = st.demand[safe]
            fw1, fw2 = _fits_on(st, state.free, d, w1), _fits_on(st, state.free, d, w2)
            drawn = cand & ((w1 == W_ANY) | fw1 | fw2)
            return dict(cand=cand, qpos=p, entry=safe, cls=cls, entry_att=att, w1=w1, w2=w2, fw1=fw1, fw2=fw2,
                        drawn=drawn)

        def window_reads():
            def barren(c):
                return in_drain & ~jnp.any(c[1]["drawn"], axis=1) & (c[0] < ncand)

            def next_window(c):
                start = jnp.where(barren(c), jnp.minimum(c[0] + width, ncand), c[0])
                return start, window_at(start)

            return lax.while_loop(lambda c: jnp.any(barren(c)), next_window, (pos, window_at(pos)))

        shapes = jax.eval_shape(window_reads)
        start, win = lax.cond(jnp.any(in_drain), window_reads, lambda: jax.tree_util.tree_map(
            lambda x: jnp.zeros(x.shape, x.dtype), shapes))
        # The attempts of whoever joins the queue's tail: a victim or an evicting task that gave up.
        enq_att = state.task[b, ATT, jnp.where(evicts, victim, ev_task)]
        return dict(is_end=is_end, is_arr=is_arr, now=now, want=want, victim=victim, has_victim=has_victim,
                    evicts=evicts, stop_t=stop_t, stopping=stopping, old_end=old_end, stop_m=stop_m,
                    stop_seg=stop_seg, start=start, **win,
                    enq_att=enq_att, arr_att=state.task[b, ATT, arrived])

    r = _materialize(always, first_reads)
    is_end, is_arr, now, stop_t, stopping, evicts = (r[k] for k in ("is_end", "is_arr", "now", "stop_t",
                                                                    "stopping", "evicts"))
    cand, entry, w1, w2 = r["cand"], r["entry"], r["w1"], r["w2"]

    # ---- Stop the completed task or the victim: resources back, segment closed.
    free = state.free.at[b[:, None], dims, r["stop_m"][:, None]].add(st.demand[stop_t], mode="drop")
    end = _put(state.end, stop_t, jnp.full_like(stop_t, INF), stopping)
    seg = state.seg.at[b, 3, r["stop_seg"]].set(now, mode="drop")
    task = _task_put(state.task, REM, stop_t, r["old_end"] - now, evicts)
    c = stop_t // TASK_CHUNK
    steps_of = lambda t, att: t.astype(jnp.uint32) + att.astype(jnp.uint32) * jnp.uint32(num_tasks)

    def second_reads():
        chunk_low = jnp.min(end[b[:, None], window(c * TASK_CHUNK, TASK_CHUNK)], axis=1)
        # An arrival's try, with the fallback.
        ja = _pick(cfg, st, free, st.demand[arrived][:, None], steps_of(arrived, r["arr_att"])[:, None],
                   is_arr[:, None], num_machines)[:, 0]
        ja = jnp.where(is_arr, ja, none)
        # A drain's candidates in the window, all tried against the same state: a try succeeds
        # iff one of its machines is feasible, so the first that does is placed (scored), and the
        # tries before it failed as they would one by one. An entry certified to fit nowhere but
        # on its witnesses, none of which fits now, fails for sure: its try needs no draws.
        d_w = st.demand[entry]
        is_any = cand & (w1 == W_ANY)
        fw1, fw2, drawn = r["fw1"], r["fw2"], r["drawn"]
        steps_w = steps_of(entry, r["entry_att"])
        if cfg.sample_k > 0:
            ok = drawn & lax.cond(jnp.any(drawn), lambda: _any_feasible(cfg, st, free, d_w, steps_w, num_machines),
                                  lambda: jnp.zeros(cand.shape, bool))
        else:  # a full scan succeeds iff the entry fits somewhere: on a witness, unless it has no certificate
            ok = drawn & jnp.where(is_any, lax.cond(jnp.any(is_any), lambda: _any_feasible(
                cfg, st, free, d_w, steps_w, num_machines), lambda: jnp.zeros(cand.shape, bool)), fw1 | fw2)
        has = jnp.any(ok, axis=1)
        off = jnp.argmax(ok, axis=1).astype(jnp.int32)
        tried = cand & ((lane <= off[:, None]) | ~has[:, None])
        # The class of the first failed try without a certificate gets one, from a full scan of
        # the state it failed against (free space only shrinks until the drain ends).
        no_cert = tried & is_any & ~ok
        at = jnp.argmax(no_cert, axis=1).astype(jnp.int32)
        scan = jnp.any(no_cert, axis=1)
        chosen = _get(entry, off)
        jd = lax.cond(jnp.any(has), lambda: _pick(cfg, st, free, st.demand[chosen][:, None],
                                                  _get(steps_w, off)[:, None], None, num_machines)[:, 0],
                      lambda: jnp.full((B,), none))
        cw1, cw2 = lax.cond(jnp.any(scan), lambda: _witnesses(st, free, st.demand[_get(entry, at)], num_machines),
                            lambda: (zeros_i, zeros_i))
        # The witnesses of the failed tries' classes: those that no longer fit leave.
        nw1, nw2 = jnp.where(fw1, w1, -1), jnp.where(fw2, w2, -1)
        try_t = jnp.where(is_arr, arrived, jnp.where(has, chosen, 0))
        j = jnp.where(is_arr, ja, jnp.where(has, jd, none))
        failed = is_arr & (j == none)
        if cfg.preempt:
            need = failed & (st.band[try_t] == BANDS - 1)
            after_stop = state._replace(free=free, end=end, task=task)
            ej, found = lax.cond(jnp.any(need), lambda: _evict_machine(st, after_stop, st.demand[try_t], need),
                                 lambda: (zeros_i, zeros_b))
        else:
            ej, found = zeros_i, zeros_b
        ev_fits = in_evict & _fits(st, free, st.demand[ev_task], ev_mach)
        start_t = jnp.where(in_evict, ev_task, try_t)
        # A victim or an evicting task that gave up joins the queue without a certificate: its
        # class gets one now, from a full scan.
        if cfg.preempt:
            rejoin = evicts | r["want"] & ~r["has_victim"]
            vw1, vw2 = lax.cond(jnp.any(rejoin), lambda: _witnesses(
                st, free, st.demand[jnp.where(evicts, r["victim"], ev_task)], num_machines), lambda: (zeros_i, zeros_i))
        else:
            vw1 = vw2 = zeros_i
        return dict(chunk_low=chunk_low, j=j, failed=failed, ej=ej, found=found, ev_fits=ev_fits, has=has, off=off,
                    scan=scan, at=at, tried=tried, drawn=drawn, nw1=nw1, nw2=nw2, cw1=cw1, cw2=cw2, vw1=vw1, vw2=vw2,
                    try_t=try_t,
                    rem=task[b, REM, start_t], first=task[b, FIRST, start_t])

    q = _materialize(always, second_reads)
    j, failed, ev_fits, has, off, try_t = (q[k] for k in ("j", "failed", "ev_fits", "has", "off", "try_t"))
    tried = q["tried"]
    trying = is_arr | has
    enter_evict = failed & q["found"]
    ev_gives_up = r["want"] & ~r["has_victim"]
    start_t = jnp.where(in_evict, ev_task, try_t)
    start_j = jnp.where(in_evict, ev_mach, j)
    starting = (trying & (j < Mp)) | ev_fits
    drained = has & (j < Mp)

    # ---- Writes: the try's attempt, the start, the queue.
    # Every try counts: the arrival's here, the drain's in its class's C_TRIES (in `task` when it starts).
    task = task.at[b, ATT, jnp.where(is_arr, try_t, task.shape[2])].add(1, mode="drop")
    task = _task_put(task, ATT, try_t, _get(r["entry_att"], off) + 1, drained)
    Cp = state.classes.shape[2]
    cls_w = r["cls"]
    certified = tried & (r["w1"] != W_ANY)
    witness_fields = jnp.array([C_W1, C_W2], jnp.int32)[None, :, None]
    classes = when(jnp.any(certified), lambda cs: cs.at[b[:, None, None], witness_fields,
                                                        jnp.where(certified, cls_w, Cp)[:, None, :]].set(
        jnp.stack([q["nw1"], q["nw2"]], axis=1), mode="drop"), state.classes)
    classes = classes.at[b[:, None], witness_fields[:, :, 0], jnp.where(q["scan"], _get(cls_w, q["at"]), Cp)[:, None]].set(
        jnp.stack([q["cw1"], q["cw2"]], axis=1), mode="drop")
    classes = classes.at[b, C_QUEUED, jnp.where(drained, _get(cls_w, off), Cp)].add(-1, mode="drop")
    chunk_min = _put(state.chunk_min, c, q["chunk_low"], stopping)
    sm = jnp.where(starting, start_j, none)
    free = free.at[b[:, None], dims, sm[:, None]].add(-st.demand[start_t], mode="drop")
    end_tick = now + jnp.minimum(q["rem"], INF - 1 - now)
    end = _put(end, start_t, end_tick, starting)
    chunk_min = chunk_min.at[b, jnp.where(starting, start_t // TASK_CHUNK, chunk_min.shape[1])].min(
        end_tick, mode="drop")
    seg_no = ctl[:, NSEG]
    task = _task_put(task, MACH, start_t, start_j, starting)
    task = _task_put(task, FIRST, start_t, jnp.where(q["first"] < 0, now, q["first"]), starting)
    task = _task_put(task, CUR, start_t, seg_no, starting)
    at = jnp.where(starting, seg_no, S)
    for field, value in enumerate((start_t, start_j, now)):
        seg = seg.at[b, field, at].set(value, mode="drop")
    # A failed arrival (not evicting: certified to fit nowhere by its full scan), a victim, or
    # an evicting task that gave up (neither certified) joins the queue's tail; a placed drain
    # candidate leaves its entry.
    arrival_enq = failed & ~enter_evict
    enq_t = jnp.where(evicts, r["victim"], jnp.where(ev_gives_up, ev_task, arrived))
    enq = arrival_enq | evicts | ev_gives_up
    enq_c = st.cls[enq_t]
    enq_fields = jnp.stack([enq_t, enq_c, jnp.where(arrival_enq, r["arr_att"] + 1, r["enq_att"]),
                            classes[b, C_TRIES, enq_c]], axis=1)
    queue = state.queue.at[b[:, None], jnp.arange(Q_LIST, dtype=jnp.int32)[None, :],
                           jnp.where(enq, tail, L)[:, None]].set(enq_fields, mode="drop")
    queue = queue.at[b, Q_TASK, jnp.where(drained, _get(r["qpos"], off), L)].set(-1, mode="drop")
    # A failed arrival's full scan certifies that its class fits nowhere.
    enq_w = jnp.stack([jnp.where(arrival_enq, -1, q["vw1"]), jnp.where(arrival_enq, -1, q["vw2"]),
                       classes[b, C_QUEUED, enq_c] + 1], axis=1)
    classes = classes.at[b[:, None], jnp.array([C_W1, C_W2, C_QUEUED], jnp.int32)[None, :],
                         jnp.where(enq, enq_c, Cp)[:, None]].set(enq_w, mode="drop")
    nq = nq + enq.astype(jnp.int32) - drained.astype(jnp.int32)
    tail = tail + enq.astype(jnp.int32)

    # ---- Certificates: after a completion (which may start a drain) or an eviction, the place
    # that gained free space; a drain starts when the pass leaves it candidates.
    start_drain = is_end & (nq > 0)
    certify = start_drain | (in_evict & (ev_fits | ev_gives_up) & (nq > 0))
    classes = when(jnp.any(certify), lambda cs: _raise(st, free, cs, certify, jnp.where(
        start_drain, r["stop_m"], ev_mach)), classes)
    word, bit = _block_bit(tail - 1)
    NW = state.blocks.shape[2]
    blocks = state.blocks.at[b, enq_c, jnp.where(enq, word, NW)].set(
        state.blocks[b, enq_c, jnp.minimum(word, NW - 1)] | bit, mode="drop")
    classes, bound, drain_tries = when(jnp.any(start_drain), lambda a: _drain_pass(
        st, free, a[0], a[1], start_drain, num_machines), (classes, state.bound, zeros_i))
    queue, lcur, listed = when(jnp.any(start_drain), lambda a: _list_more(
        st, free, a[0], blocks, classes, bound, tail, start_drain, zeros_i, zeros_i, jnp.full_like(tail, width),
        witnesses_fit=True),
                               (queue, ctl[:, LCUR], zeros_i))
    ncand = jnp.where(start_drain, listed, ncand)
    lcur = jnp.where(start_drain, lcur, ctl[:, LCUR])
    start_drain = start_drain & (listed > 0)

    # ---- Modes: a drain walks its list once per band; it ends after its last band.
    top = BANDS - 1 if cfg.preempt else 0
    # (the list may grow, so a window past its end stops there)
    pos = jnp.where(has, r["start"] + off + 1, jnp.minimum(r["start"] + width, ncand))
    band_done = in_drain & (pos >= ncand) & (lcur >= tail)
    band = jnp.where(band_done, band - 1, band)
    pos = jnp.where(band_done, 0, pos)
    drain_ends = in_drain & ((band_done & (band < 0)) | (nq == 0))
    pos = jnp.where(start_drain, 0, pos)
    band = jnp.where(start_drain, top, band)
    mode = jnp.where(start_drain, DRAIN, jnp.where(enter_evict, EVICT, mode))
    mode = jnp.where(drain_ends | ev_fits | ev_gives_up, EVENT, mode)
    new = {ARRIVED: arrived + is_arr.astype(jnp.int32), NSEG: seg_no + starting.astype(jnp.int32), TAIL: tail,
           NQ: nq, NEVICT: ctl[:, NEVICT] + evicts.astype(jnp.int32), MODE: mode, NOW: now, POS: pos, BAND: band,
           EV_TASK: jnp.where(enter_evict, try_t, ev_task), EV_MACH: jnp.where(enter_evict, q["ej"], ev_mach),
           NCAND: ncand, LCUR: lcur}
    new[DRAWN], new[DRAWN_HI] = _add64(ctl[:, DRAWN], ctl[:, DRAWN_HI],
                                       jnp.sum(tried & q["drawn"], axis=1, dtype=jnp.int32))
    new[TRIES], new[TRIES_HI] = _add64(ctl[:, TRIES], ctl[:, TRIES_HI], drain_tries)
    ctl = jnp.stack([new[k] for k in range(len(new))], axis=1)
    state = EventState(free=free, end=end, chunk_min=chunk_min, task=task, seg=seg, queue=queue, classes=classes,
                       blocks=blocks, bound=bound, ctl=ctl)
    # Compacting moves entries, so never in the middle of a row's drain.
    crowded = (mode != DRAIN) & (tail > 2 * nq + QUEUE_WINDOW)
    return when(jnp.any(crowded), lambda s: _compact(s, crowded), state)


def _live(state, num_tasks):
    ctl = state.ctl
    return (ctl[:, ARRIVED] < num_tasks) | (jnp.min(state.chunk_min, axis=1) < INF) | (ctl[:, MODE] != EVENT)


def _run(state, st, limit, *, cfg, num_machines, num_tasks):
    """Up to `limit` steps of the replay: (state, any row not finished)."""
    def cond(c):
        s, i = c
        return (i < limit) & jnp.any(_live(s, num_tasks))

    state, _ = lax.while_loop(cond, lambda c: (_step(cfg, st, c[0], num_machines, num_tasks), c[1] + 1),
                              (state, jnp.int32(0)))
    return state, jnp.any(_live(state, num_tasks))


_run_jit = jax.jit(_run, static_argnames=("cfg", "num_machines", "num_tasks"), donate_argnames=("state",))


@dataclasses.dataclass(frozen=True)
class Replay:
    """What one batched replay produced, per row (policy x trial), in workload task numbering."""

    inputs: EventInputs
    segments: list[np.ndarray]  # per row: i64[S_b, 4] (task, machine, start tick, end tick), in start order
    first_start: np.ndarray  # i64[B, N] first start tick per workload task, -1 never placed
    evictions: np.ndarray  # i64[B]
    steps: int  # outer loop steps taken (the slowest row's event count)
    drain_draws: np.ndarray  # i64[B]: drain tries that drew machines
    drain_certain: np.ndarray  # i64[B]: drain tries that a certificate showed to fail, without draws


def replay(cluster: Cluster, workload: Workload, cfg: EventConfig, keys: jax.Array, genomes=None,
           max_evictions: int | None = None, progress: Callable[[int, int], None] | None = None,
           inputs: EventInputs | None = None) -> Replay:
    """Replay the workload's arrivals through every row of `cfg` (rows = policies x trials).

    keys: one trial key per row (rng.trial_keys, repeated per policy); genomes f32[B, 8]
    for `family` rows. max_evictions bounds the segment log (default: the task count).
    progress(done, total) counts processed events of the slowest row against 2N.
    """
    inputs = inputs or prepare(workload, cfg.preempt)
    cap = np.asarray(cluster.capacity, np.float32)
    M, R = cap.shape
    N = inputs.num_tasks
    B = len(cfg.policies)
    if keys.shape[0] != B:
        raise InputError(f"{B} rows need {B} keys, got {keys.shape[0]}")
    if cfg.sample_k < 0:
        raise InputError(f"sample_k must be >= 0, got {cfg.sample_k}")
    cfg = dataclasses.replace(cfg, slot=slot_vector(cfg.slot, R))
    Mp = -(-M // 128) * 128
    Np = -(-N // TASK_CHUNK) * TASK_CHUNK
    E = N if max_evictions is None else int(max_evictions)
    S = N + (E if cfg.preempt else 0)
    span = SPAN_WORDS << WORD_SHIFT
    L = -(-(3 * Np + 2 * QUEUE_WINDOW) // span) * span

    cls, class_demand = demand_classes(inputs.demand, inputs.band)
    Cp = -(-len(class_demand) // 128) * 128
    class_demand = np.concatenate([class_demand, np.full((Cp - len(class_demand), R), np.inf, np.float32)])
    cap_t = np.full((R, Mp), PAD_CAPACITY, np.float32)
    cap_t[:, :M] = cap.T
    demand = np.zeros((Np, R), np.float32)
    demand[:N] = inputs.demand
    pad = lambda a, fill: np.concatenate([a, np.full(Np - N, fill, a.dtype)])
    if genomes is None:
        genomes = np.broadcast_to(np.asarray(ALPHA_EVOLVE_GENOME, np.float32), (B, GENOME_SIZE))
    genomes = jnp.asarray(genomes, jnp.float32)
    if genomes.shape != (B, GENOME_SIZE):
        raise InputError(f"genomes must have shape ({B}, {GENOME_SIZE}), got {genomes.shape}")
    st = _Static(cap=jnp.asarray(cap_t), inv=safe_inverse(jnp.asarray(cap_t)), demand=jnp.asarray(demand),
                 arrival=jnp.asarray(pad(inputs.arrival, INF)), band=jnp.asarray(pad(inputs.band, 0)),
                 rank=jnp.asarray(pad(inputs.evict_rank, INF)), cls=jnp.asarray(pad(cls, 0)),
                 class_demand=jnp.asarray(class_demand), genomes=genomes,
                 swords=rng.hash_words(keys, rng.STREAM_SAMPLE), nwords=rng.hash_words(keys, rng.STREAM_NOISE))

    task = np.zeros((B, 5, Np), np.int32)
    task[:, REM, :N] = inputs.duration
    task[:, FIRST] = -1
    state = EventState(
        free=jnp.broadcast_to(st.cap[None], (B, R, Mp)) + 0.0,
        end=jnp.full((B, Np), INF, jnp.int32),
        chunk_min=jnp.full((B, Np // TASK_CHUNK), INF, jnp.int32),
        task=jnp.asarray(task),
        seg=jnp.full((B, 4, S), -1, jnp.int32),
        queue=jnp.full((B, Q_LIST + 1, L), -1, jnp.int32),
        classes=jnp.asarray(np.broadcast_to(np.array([-1, -1, 0, 0], np.int32)[None, :, None], (B, 4, Cp))),
        blocks=jnp.zeros((B, Cp, L >> WORD_SHIFT), jnp.uint32),
        bound=jnp.zeros((B, R), jnp.float32),
        ctl=jnp.zeros((B, TRIES_HI + 1), jnp.int32))
    state, steps = _replay_on_devices(state, st, cfg, M, N, progress)
    counts = np.asarray(state.ctl)
    if np.any(counts[:, NSEG] > S):
        raise InputError(f"more than {E} evictions in a replay; raise --max-evictions")
    seg = np.asarray(state.seg)
    first = np.asarray(state.task[:, FIRST, :N]).astype(np.int64)
    segments = []
    for b in range(B):
        s = seg[b, :, :counts[b, NSEG]].T.astype(np.int64)
        s[:, 0] = inputs.order[s[:, 0]]
        segments.append(s)
    first_start = np.full((B, N), -1, np.int64)
    first_start[:, inputs.order] = first
    return Replay(inputs=inputs, segments=segments, first_start=first_start,
                  evictions=counts[:, NEVICT].astype(np.int64), steps=steps,
                  drain_draws=_count64(counts, DRAWN),
                  drain_certain=_count64(counts, TRIES) - _count64(counts, DRAWN))


def _drive(state, st, cfg, M, N, report):
    """Run the compiled replay loop to the end: (final state, steps); report(done, 2N) per call,
    done counting the events of the share's slowest row."""
    steps, live = 0, True
    while live:
        state, live = _run_jit(state, st, jnp.int32(STEPS_PER_CALL), cfg=cfg, num_machines=M, num_tasks=N)
        live = bool(live)
        steps += STEPS_PER_CALL
        if report is not None:
            counts = np.asarray(state.ctl)
            running = np.asarray(jnp.sum(state.end < INF, axis=1))
            done = counts[:, ARRIVED] + counts[:, NSEG] - running  # arrivals + runs ended
            report(min(int(done.min()), 2 * N) if live else 2 * N, 2 * N)
    return state, steps


def device_groups(policies: tuple[str, ...]) -> list[tuple[int, int]]:
    """Consecutive (first, end) row ranges, one per local device used: several rows and
    several devices split the rows evenly (rows are independent); else one range."""
    B = len(policies)
    n = min(len(jax.local_devices()), B) if jax.process_count() == 1 else 1
    bounds = np.linspace(0, B, n + 1).round().astype(int)
    return [(int(a), int(b)) for a, b in zip(bounds[:-1], bounds[1:])]


def _replay_on_devices(state, st, cfg, M, N, progress):
    """`_drive` of every row, the rows split over the local devices: each share is its own
    program (its own policies) running on its own device, driven from its own thread.
    Rows never interact, so results are identical to one device."""
    groups = device_groups(cfg.policies)
    if len(groups) == 1:
        return _drive(state, st, cfg, M, N, progress)
    slowest = SlowestShare(progress, len(groups), 2 * N)
    rowwise = ("genomes", "swords", "nwords")

    def run(g, device):
        lo, hi = groups[g]
        sub_state = jax.device_put(jax.tree.map(lambda x: x[lo:hi], state), device)
        sub_st = jax.device_put(st._replace(**{f: getattr(st, f)[lo:hi] for f in rowwise}), device)
        sub_cfg = dataclasses.replace(cfg, policies=cfg.policies[lo:hi])
        final, steps = _drive(sub_state, sub_st, sub_cfg, M, N, slowest.reporter(g))
        return jax.tree.map(np.asarray, final), steps

    parts = on_devices(run, len(groups))
    merged = jax.tree.map(lambda *xs: np.concatenate(xs), *(p[0] for p in parts))
    return merged, max(p[1] for p in parts)


@dataclasses.dataclass(frozen=True)
class EventResult:
    """Per-(policy, trial) figures of one event-mode experiment, and the replay behind them."""

    policies: tuple[str, ...]
    trials: int
    resources: tuple[str, ...]
    rows: list[dict]  # row p * trials + t: eventstats.row_stats of policy p, trial t
    replay: Replay

    def row(self, policy: str, trial: int) -> dict:
        return self.rows[self.policies.index(policy) * self.trials + trial]

    def summary(self) -> dict:
        """{policy: {trials: [row figures], mean: {figure: mean over trials}}}, plain JSON types."""
        out = {}
        for p, name in enumerate(self.policies):
            rows = self.rows[p * self.trials:(p + 1) * self.trials]
            out[name] = {"mean": _mean_figures(rows, self.resources), "trials": rows}
        return out


def _flat_figures(row: dict, resources) -> dict[str, float]:
    flat = {f"utilization_{r}": row["utilization"][x] for x, r in enumerate(resources)}
    for k, v in row["latency"].items():
        flat[f"latency_{k}"] = v
    for band, lat in row.get("latency_by_band", {}).items():
        for k, v in lat.items():
            flat[f"latency_{band}_{k}"] = v
    flat.update(pending_mean=row["pending_mean"], pending_max=row["pending_max"], evictions=row["evictions"])
    return flat


def _mean_figures(rows: list[dict], resources) -> dict[str, float]:
    flats = [_flat_figures(r, resources) for r in rows]
    keys = [k for k in flats[0] if all(k in f for f in flats)]
    return {k: float(np.mean([f[k] for f in flats])) for k in keys}


def run_event(cluster: Cluster, workload: Workload, policies: tuple[str, ...], trials: int, seed: int,
              sample_k: int, preempt: bool, slot=None, genome=None, max_evictions: int | None = None,
              progress: Callable[[int, int], None] | None = None) -> EventResult:
    """Replay the workload through every policy x trial in one batched program and compute the figures.

    Trial t of every policy uses the key of (seed, "event", t): the same draws for the same try.
    """
    from .eventstats import row_stats
    from .types import validate

    validate(cluster, workload)
    if trials < 1:
        raise InputError(f"trials must be >= 1, got {trials}")
    names = tuple(n for n in policies for _ in range(trials))
    keys = rng.trial_keys(seed, EXPERIMENT, trials)
    keys = jnp.concatenate([keys] * len(policies))
    genomes = None
    if genome is not None:
        genomes = np.broadcast_to(np.asarray(genome, np.float32), (len(names), GENOME_SIZE))
    cfg = EventConfig(policies=names, sample_k=sample_k, preempt=preempt,
                      slot=slot_vector(slot, cluster.num_resources))
    rep = replay(cluster, workload, cfg, keys, genomes, max_evictions, progress)
    arrival = np.asarray(workload.arrival, np.float64)
    rows = []
    for b in range(len(names)):
        stats = row_stats(rep.segments[b], rep.first_start[b], arrival, np.asarray(workload.priority),
                          np.asarray(workload.demand), np.asarray(cluster.capacity), rep.inputs.tick_s, preempt)
        stats["evictions"] = int(rep.evictions[b])
        rows.append(stats)
    return EventResult(policies=tuple(policies), trials=trials, resources=tuple(cluster.resources), rows=rows,
                       replay=rep)
