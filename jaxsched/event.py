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
whether any row needs them. The host turns the run segments into the reported figures
(`jaxsched.eventstats`).
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
from .packing import PAD_CAPACITY, PackConfig, _score_rows
from .policies import ALPHA_EVOLVE_GENOME, GENOME_SIZE, feasible, safe_inverse, slot_vector
from .types import Cluster, Workload

INF = 2**31 - 1  # "never": end tick of a task not running
TICK_LIMIT = 2**30
TICKS_S = (1e-3, 1e-2, 1e-1, 1.0)
TASK_CHUNK = 512  # tasks per chunk of the two-level minimum over end ticks
QUEUE_WINDOW = 128  # queue entries examined (and tried together) per drain step
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


class EventState(NamedTuple):
    """Carry of the replay, leading axis B = rows (policy x trial)."""

    free: jax.Array  # f32[B, R, Mp]
    end: jax.Array  # i32[B, Np]: end tick of each running task, INF otherwise
    chunk_min: jax.Array  # i32[B, Np / TASK_CHUNK]: min of `end` per chunk
    task: jax.Array  # i32[B, 5, Np]: machine, remaining ticks, attempts, first start, current segment
    seg: jax.Array  # i32[B, 4, S]: run segments (task, machine, start, end)
    queue: jax.Array  # i32[B, L]: pending log in FIFO order, -1 where removed
    ctl: jax.Array  # i32[B, 11]: the per-row counters and mode below
    bound: jax.Array  # f32[B, R]: max free per dimension at the start of the row's drain


MACH, REM, ATT, FIRST, CUR = range(5)
ARRIVED, NSEG, TAIL, NQ, NEVICT, MODE, NOW, POS, BAND, EV_TASK, EV_MACH = range(11)
EVENT, DRAIN, EVICT = range(3)  # what a row's next step does


class _Static(NamedTuple):
    """Traced inputs shared by every step."""

    cap: jax.Array  # f32[R, Mp]
    inv: jax.Array  # f32[R, Mp]
    demand: jax.Array  # f32[Np, R]
    arrival: jax.Array  # i32[Np], INF for padding
    band: jax.Array  # i32[Np]
    rank: jax.Array  # i32[Np]
    genomes: jax.Array  # f32[B, 8]
    swords: jax.Array  # u32[B, 2]
    nwords: jax.Array  # u32[B, 2]


def _when(pred, fn, operand):
    """fn(operand) if pred else operand, as a while loop of at most one trip.

    A `lax.cond` that passes the carry through makes XLA copy all of it every step (the
    branches cannot alias their operands); a while loop updates its carry in place.
    """
    def body(c):
        return jnp.bool_(False), fn(c[1])

    return lax.while_loop(lambda c: c[0], body, (pred, operand))[1]


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
    return _score_rows(cfg.pack_config(), d, free_x, inv_x, st.genomes, noise, inv_axes, (0, 0))


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
    j = jnp.argmax(s, axis=2).astype(jnp.int32)
    return jnp.where(jnp.max(s, axis=2) > -jnp.inf, j, jnp.int32(Mp))


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
    L = state.queue.shape[1]

    def one(q, tail):
        live = (q >= 0) & (jnp.arange(L) < tail)
        idx = jnp.nonzero(live, size=L, fill_value=L)[0]
        return jnp.where(idx < L, q[jnp.minimum(idx, L - 1)], -1)

    packed = jax.vmap(one)(state.queue, state.ctl[:, TAIL])
    queue = jnp.where(rows[:, None], packed, state.queue)
    ctl = state.ctl.at[:, TAIL].set(jnp.where(rows, state.ctl[:, NQ], state.ctl[:, TAIL]))
    return state._replace(queue=queue, ctl=ctl)


def _materialize(pred, fn):
    """fn()'s values, computed as a conditional that is always taken (pred is true at run time).

    XLA updates a carry array in place only when every read of its old value is ordered
    before the update; a read that fusion duplicates into an unrelated consumer is not,
    and the whole array is then copied every step. A conditional's results are computed
    once, in one place, so the later updates that use them are ordered after every read.
    """
    shapes = jax.eval_shape(fn)
    return lax.cond(pred, fn, lambda: jax.tree_util.tree_map(lambda x: jnp.zeros(x.shape, x.dtype), shapes))


def _step(cfg, st, state, num_machines, num_tasks):
    """One step of every row: the next event, one drain try, or one eviction.

    Each row is in one of three modes. EVENT: the next completion (then DRAIN if tasks
    are pending) or arrival (placed, or EVICT for a production task with --preempt, or
    queued). DRAIN: the next candidate of the queue is tried, or a window of entries
    skipped. EVICT: one victim leaves, and the evicting task starts once it fits.
    The reads of each phase are materialized (`_materialize`) before its writes.
    """
    B, R, Mp = state.free.shape
    L, S = state.queue.shape[1], state.seg.shape[2]
    b = _rows(state.ctl)
    ctl = state.ctl
    mode = ctl[:, MODE]
    in_event, in_drain, in_evict = mode == EVENT, mode == DRAIN, mode == EVICT
    dims = jnp.arange(R, dtype=jnp.int32)[None, :]
    none = jnp.int32(Mp)
    zeros_i, zeros_b = jnp.zeros(B, jnp.int32), jnp.zeros(B, bool)
    window = lambda start, n: start[:, None] + jnp.arange(n, dtype=jnp.int32)[None, :]
    width = QUEUE_WINDOW if cfg.sample_k > 0 else FULL_SCAN_WINDOW
    always = ctl[0, ARRIVED] >= 0
    arrived = ctl[:, ARRIVED]
    pos, band, tail, nq = ctl[:, POS], ctl[:, BAND], ctl[:, TAIL], ctl[:, NQ]
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
        # DRAIN rows: the candidates of the current band in the window at POS.
        def window_reads():
            qlanes = window(pos, width)
            entry = state.queue[b[:, None], jnp.minimum(qlanes, L - 1)]
            entry = jnp.where((qlanes < tail[:, None]) & in_drain[:, None], entry, -1)
            safe = jnp.maximum(entry, 0)
            fits_bound = jnp.all(st.demand[safe] <= state.bound[:, None, :] + 1e-6, axis=2)
            cand = (entry >= 0) & (st.band[safe] == band[:, None]) & fits_bound
            return cand, safe, state.task[b[:, None], ATT, safe]

        cand, safe, entry_att = lax.cond(jnp.any(in_drain), window_reads,
                                         lambda: (jnp.zeros((B, width), bool), jnp.zeros((B, width), jnp.int32),
                                                  jnp.zeros((B, width), jnp.int32)))
        return dict(is_end=is_end, is_arr=is_arr, now=now, want=want, victim=victim, has_victim=has_victim,
                    evicts=evicts, stop_t=stop_t, stopping=stopping, old_end=old_end, stop_m=stop_m,
                    stop_seg=stop_seg, cand=cand, entry=safe, entry_att=entry_att,
                    arr_att=state.task[b, ATT, arrived])

    r = _materialize(always, first_reads)
    is_end, is_arr, now, stop_t, stopping, evicts = (r[k] for k in ("is_end", "is_arr", "now", "stop_t",
                                                                    "stopping", "evicts"))
    cand, entry = r["cand"], r["entry"]

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
        # tries before it failed as they would one by one.
        steps_w = steps_of(entry, r["entry_att"])
        ok = cand & lax.cond(jnp.any(cand), lambda: _any_feasible(cfg, st, free, st.demand[entry], steps_w,
                                                                  num_machines),
                             lambda: jnp.zeros(cand.shape, bool))
        has = jnp.any(ok, axis=1)
        off = jnp.argmax(ok, axis=1).astype(jnp.int32)
        chosen = _get(entry, off)
        jd = lax.cond(jnp.any(has), lambda: _pick(cfg, st, free, st.demand[chosen][:, None],
                                                  _get(steps_w, off)[:, None], None, num_machines)[:, 0],
                      lambda: jnp.full((B,), none))
        tried = cand & ((jnp.arange(width, dtype=jnp.int32)[None, :] <= off[:, None]) | ~has[:, None])
        try_t = jnp.where(is_arr, arrived, jnp.where(has, _get(entry, off), 0))
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
        return dict(chunk_low=chunk_low, j=j, failed=failed, ej=ej, found=found, ev_fits=ev_fits, has=has, off=off,
                    tried=tried, try_t=try_t, rem=task[b, REM, start_t], first=task[b, FIRST, start_t])

    q = _materialize(always, second_reads)
    j, failed, ev_fits, has, off, try_t = (q[k] for k in ("j", "failed", "ev_fits", "has", "off", "try_t"))
    trying = is_arr | has
    enter_evict = failed & q["found"]
    ev_gives_up = r["want"] & ~r["has_victim"]
    start_t = jnp.where(in_evict, ev_task, try_t)
    start_j = jnp.where(in_evict, ev_mach, j)
    starting = (trying & (j < Mp)) | ev_fits

    # ---- Writes: the try's attempt, the start, the queue.
    # Every try counts: the arrival's, and the drain candidates' up to the placed one.
    task = task.at[b, ATT, jnp.where(is_arr, try_t, task.shape[2])].add(1, mode="drop")
    task = _when(jnp.any(q["tried"]),
                 lambda t: t.at[b[:, None], ATT, jnp.where(q["tried"], entry, t.shape[2])].add(1, mode="drop"), task)
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
    # A failed arrival (not evicting), a victim, or an evicting task that gave up joins the
    # queue's tail; a placed drain candidate leaves its entry.
    enq_t = jnp.where(evicts, r["victim"], jnp.where(ev_gives_up, ev_task, arrived))
    enq = (failed & ~enter_evict) | evicts | ev_gives_up
    drained = has & (j < Mp)
    queue = _put(state.queue, tail, enq_t, enq)
    queue = _put(queue, pos + off, jnp.full_like(pos, -1), drained)
    nq = nq + enq.astype(jnp.int32) - drained.astype(jnp.int32)
    tail = tail + enq.astype(jnp.int32)

    # ---- Modes: a completion with tasks pending starts a drain; a drain ends after its last band.
    top = BANDS - 1 if cfg.preempt else 0
    pos = jnp.where(has, pos + off + 1, pos + width)
    band_done = in_drain & (pos >= tail)
    band = jnp.where(band_done, band - 1, band)
    pos = jnp.where(band_done, 0, pos)
    drain_ends = in_drain & ((band_done & (band < 0)) | (nq == 0))
    start_drain = is_end & (nq > 0)
    pos = jnp.where(start_drain, 0, pos)
    band = jnp.where(start_drain, top, band)
    bound = lax.cond(jnp.any(start_drain),
                     lambda: jnp.where(start_drain[:, None], jnp.max(free[:, :, :num_machines], axis=2), state.bound),
                     lambda: state.bound)
    mode = jnp.where(start_drain, DRAIN, jnp.where(enter_evict, EVICT, mode))
    mode = jnp.where(drain_ends | ev_fits | ev_gives_up, EVENT, mode)
    new = {ARRIVED: arrived + is_arr.astype(jnp.int32), NSEG: seg_no + starting.astype(jnp.int32), TAIL: tail,
           NQ: nq, NEVICT: ctl[:, NEVICT] + evicts.astype(jnp.int32), MODE: mode, NOW: now, POS: pos, BAND: band,
           EV_TASK: jnp.where(enter_evict, try_t, ev_task), EV_MACH: jnp.where(enter_evict, q["ej"], ev_mach)}
    ctl = jnp.stack([new[k] for k in range(len(new))], axis=1)
    state = EventState(free=free, end=end, chunk_min=chunk_min, task=task, seg=seg, queue=queue, ctl=ctl,
                       bound=bound)
    # Compacting moves entries, so never in the middle of a row's drain.
    crowded = (mode != DRAIN) & (tail > 2 * nq + QUEUE_WINDOW)
    return _when(jnp.any(crowded), lambda s: _compact(s, crowded), state)


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
    L = 3 * Np + 2 * QUEUE_WINDOW

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
                 rank=jnp.asarray(pad(inputs.evict_rank, INF)), genomes=genomes,
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
        queue=jnp.full((B, L), -1, jnp.int32),
        ctl=jnp.zeros((B, 11), jnp.int32),
        bound=jnp.zeros((B, R), jnp.float32))
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
                  evictions=counts[:, NEVICT].astype(np.int64), steps=steps)


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
