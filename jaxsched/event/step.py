"""One step of every row of a replay: the next event, one window of drain tries, or one eviction.

Each row is in one of three modes. EVENT: the next completion (then DRAIN if the
certifying pass leaves tries with a chance) or arrival (placed, or EVICT for a production
task with --preempt, or queued). DRAIN: the next candidates of the drain's list are tried,
a window at a time. EVICT: one victim leaves, and the evicting task starts once it fits.

A step is a composition of phases, each taking and returning the state. The two read
phases are materialized (`state.materialize`) before the writes that follow them, so
that XLA updates the carry in place.
"""

from __future__ import annotations

from typing import NamedTuple

import jax
import jax.numpy as jnp
from jax import lax

from ..packing import when
from .drain import block_bit, compact, drain_pass, list_more, raise_certificates, witnesses
from .inputs import BANDS, INF
from .placement import any_feasible, evict_machine, fits, fits_on, pick, victim
from .state import (C_QUEUED, C_TRIES, C_W1, C_W2, DRAIN, EVENT, EVICT, Q_BASE, Q_CLASS, Q_LIST, Q_SNAP, Q_TASK,
                    S_END, S_MACH, S_START, S_TASK, TASK_CHUNK, W_ANY, add64, get, materialize, put, rows)


class DrainWindow(NamedTuple):
    """The window of a DRAIN row's list being tried this step, each [B, W] (zeros elsewhere)."""

    cand: jax.Array  # bool: an entry of the current band
    qpos: jax.Array  # i32: its queue position
    entry: jax.Array  # i32: its task (0 where no entry)
    cls: jax.Array  # i32: its demand class
    entry_att: jax.Array  # i32: the attempt number of this try
    w1: jax.Array  # i32: its class's witnesses
    w2: jax.Array
    fw1: jax.Array  # bool: the task fits its witness now
    fw2: jax.Array
    drawn: jax.Array  # bool: the try needs draws (it may fit)


class EventReads(NamedTuple):
    """What a step reads of the state before any write, each [B]."""

    in_event: jax.Array  # bool: the row's mode at the start of the step
    in_drain: jax.Array
    in_evict: jax.Array
    arrived: jax.Array  # i32: the next arrival's task number
    is_end: jax.Array  # bool: an EVENT row's event is a completion
    is_arr: jax.Array  # bool: ... an arrival
    now: jax.Array  # i32: the step's tick
    want: jax.Array  # bool: an EVICT row's task does not fit yet
    victim: jax.Array  # i32: the next victim of an EVICT row
    has_victim: jax.Array  # bool
    evicts: jax.Array  # bool: the victim leaves this step
    stop_t: jax.Array  # i32: the task that stops (completes or is evicted)
    stopping: jax.Array  # bool
    old_end: jax.Array  # i32: its end tick
    stop_m: jax.Array  # i32: its machine, Mp where none stops
    stop_seg: jax.Array  # i32: its run segment, S where none stops
    start: jax.Array  # i32: the drain window's first list position
    win: DrainWindow
    enq_att: jax.Array  # i32: attempts of a victim or an evicting task that gives up
    arr_att: jax.Array  # i32: attempts of the next arrival


class TryReads(NamedTuple):
    """What a step reads after the stop, before the tries' writes, each [B]."""

    chunk_low: jax.Array  # i32: the stopped task's chunk minimum of end ticks, after the stop
    j: jax.Array  # i32: the tried task's machine, Mp where none
    failed: jax.Array  # bool: an arrival that fits nowhere
    ej: jax.Array  # i32: the machine to evict on
    found: jax.Array  # bool: ... there is one
    ev_fits: jax.Array  # bool: an EVICT row's task fits now
    has: jax.Array  # bool: a drain try of the window succeeds
    off: jax.Array  # i32: the first such try's place in the window
    scan: jax.Array  # bool: a failed try's class gets a certificate from a full scan
    at: jax.Array  # i32: the place of that try in the window
    tried: jax.Array  # bool[B, W]: the window's entries tried this step
    nw1: jax.Array  # i32[B, W]: the witnesses of the failed tries' classes that still fit
    nw2: jax.Array
    cw1: jax.Array  # i32: the full scan's witnesses
    cw2: jax.Array
    vw1: jax.Array  # i32: the witnesses of a rejoining victim's (or evicting task's) class
    vw2: jax.Array
    try_t: jax.Array  # i32: the task tried (arrival or drain candidate)
    rem: jax.Array  # i32: ticks left of the task that starts
    first: jax.Array  # i32: its first start, -1 never


class Outcome(NamedTuple):
    """What the step decided, each bool[B] or i32[B]."""

    enter_evict: jax.Array  # a failed production arrival evicts
    gives_up: jax.Array  # an EVICT row's task finds no more victims
    start_t: jax.Array  # the task that starts
    start_j: jax.Array  # its machine
    starting: jax.Array
    drained: jax.Array  # a drain candidate left the queue


def _steps_of(t, att, num_tasks):
    """The counter-hash step of attempt att of task t."""
    return t.astype(jnp.uint32) + att.astype(jnp.uint32) * jnp.uint32(num_tasks)


def _window(start, n):
    return start[:, None] + jnp.arange(n, dtype=jnp.int32)[None, :]


def _extend_lists(cfg, st, state):
    """DRAIN rows whose list runs short of a window: more of it listed first."""
    ctl = state.ctl
    width = cfg.window
    short = (ctl.mode == DRAIN) & (ctl.listed - ctl.pos < width) & (ctl.cursor < ctl.tail)

    def extend(s):
        c = s.ctl
        queue, cur, n = list_more(cfg, st, s.free, s.queue, s.blocks, s.classes, s.bound, c.tail, short, c.cursor,
                                  c.listed, c.pos + cfg.list_ahead * width)
        return s._replace(queue=queue, ctl=c._replace(cursor=cur, listed=n))

    return when(jnp.any(short), extend, state)


def _drain_window(cfg, st, state, in_drain):
    """(start, window) of each DRAIN row: its list's window at POS, of the current band.

    An entry whose class is certified to fit nowhere but on witnesses, none of which fits
    now, fails for sure (its try was counted at the drain's start): windows of such entries
    alone are passed over here, in one step.
    """
    L = state.queue.shape[2]
    b = rows(in_drain)
    ctl = state.ctl
    width = cfg.window

    def window_at(start):
        lanes = _window(start, width)
        listed = in_drain[:, None] & (lanes < ctl.listed[:, None])
        p = jnp.where(listed, state.queue[b[:, None], Q_LIST, jnp.minimum(lanes, L - 1)], 0)
        fields = state.queue[b[:, None, None], jnp.arange(Q_LIST, dtype=jnp.int32)[None, :, None], p[:, None, :]]
        safe = jnp.maximum(fields[:, Q_TASK], 0)
        cand = listed & (fields[:, Q_TASK] >= 0) & (st.band[safe] == ctl.band[:, None])
        cls = fields[:, Q_CLASS]
        of_class = state.classes[b[:, None, None], jnp.arange(C_TRIES + 1, dtype=jnp.int32)[None, :, None],
                                 cls[:, None, :]]
        # The drain's try was counted in C_TRIES at its start.
        att = fields[:, Q_BASE] + of_class[:, C_TRIES] - 1 - fields[:, Q_SNAP]
        w1, w2 = of_class[:, C_W1], of_class[:, C_W2]
        d = st.demand[safe]
        fw1, fw2 = fits_on(st, state.free, d, w1), fits_on(st, state.free, d, w2)
        drawn = cand & ((w1 == W_ANY) | fw1 | fw2)
        return DrainWindow(cand=cand, qpos=p, entry=safe, cls=cls, entry_att=att, w1=w1, w2=w2, fw1=fw1, fw2=fw2,
                           drawn=drawn)

    def window_reads():
        def barren(c):
            return in_drain & ~jnp.any(c[1].drawn, axis=1) & (c[0] < ctl.listed)

        def next_window(c):
            start = jnp.where(barren(c), jnp.minimum(c[0] + width, ctl.listed), c[0])
            return start, window_at(start)

        return lax.while_loop(lambda c: jnp.any(barren(c)), next_window, (ctl.pos, window_at(ctl.pos)))

    shapes = jax.eval_shape(window_reads)
    return lax.cond(jnp.any(in_drain), window_reads, lambda: jax.tree_util.tree_map(
        lambda x: jnp.zeros(x.shape, x.dtype), shapes))


def _event_reads(cfg, st, state, num_tasks) -> EventReads:
    """Each row's event (EVENT), next victim (EVICT) and window of tries (DRAIN)."""
    B, R, Mp = state.free.shape
    S = state.seg.shape[2]
    b = rows(state.end)
    ctl, tasks = state.ctl, state.tasks
    in_event, in_drain, in_evict = ctl.mode == EVENT, ctl.mode == DRAIN, ctl.mode == EVICT
    arrived = ctl.arrived
    # EVENT rows: the earliest completion (lowest task number among ties) or arrival.
    t_arr = jnp.where(arrived < num_tasks, st.arrival[jnp.minimum(arrived, st.arrival.shape[0] - 1)], INF)
    chunk = jnp.argmin(state.chunk_min, axis=1).astype(jnp.int32)
    t_end = get(state.chunk_min, chunk)
    is_end = in_event & (t_end <= t_arr) & (t_end < INF)
    is_arr = in_event & ~is_end & (arrived < num_tasks)
    now = jnp.where(in_event, jnp.where(is_end, t_end, t_arr), ctl.now)
    lanes = _window(chunk * TASK_CHUNK, TASK_CHUNK)
    done = get(lanes, jnp.argmin(state.end[b[:, None], lanes], axis=1).astype(jnp.int32))
    # EVICT rows: the next victim, unless the evicting task fits already.
    want = in_evict & ~fits(st, state.free, st.demand[ctl.ev_task], ctl.ev_mach)
    zeros_i, zeros_b = jnp.zeros(B, jnp.int32), jnp.zeros(B, bool)
    if cfg.preempt:
        vic, has_victim = lax.cond(jnp.any(want), lambda: victim(st, state, ctl.ev_mach), lambda: (zeros_i, zeros_b))
    else:
        vic, has_victim = zeros_i, zeros_b
    evicts = want & has_victim
    stop_t = jnp.where(is_end, done, vic)
    stopping = is_end | evicts
    start, win = _drain_window(cfg, st, state, in_drain)
    return EventReads(
        in_event=in_event, in_drain=in_drain, in_evict=in_evict, arrived=arrived, is_end=is_end, is_arr=is_arr,
        now=now, want=want, victim=vic, has_victim=has_victim, evicts=evicts, stop_t=stop_t, stopping=stopping,
        old_end=get(state.end, stop_t), stop_m=jnp.where(stopping, tasks.machine[b, stop_t], Mp),
        stop_seg=jnp.where(stopping, tasks.segment[b, stop_t], S), start=start, win=win,
        # The attempts of whoever joins the queue's tail: a victim or an evicting task that gave up.
        enq_att=tasks.attempts[b, jnp.where(evicts, vic, ctl.ev_task)], arr_att=tasks.attempts[b, arrived])


def _stop(st, state, r: EventReads):
    """The completed task or the victim stops: its resources back, its segment closed."""
    R = state.free.shape[1]
    b = rows(state.end)
    dims = jnp.arange(R, dtype=jnp.int32)[None, :]
    ctl = state.ctl
    return state._replace(
        free=state.free.at[b[:, None], dims, r.stop_m[:, None]].add(st.demand[r.stop_t], mode="drop"),
        end=put(state.end, r.stop_t, jnp.full_like(r.stop_t, INF), r.stopping),
        seg=state.seg.at[b, S_END, r.stop_seg].set(r.now, mode="drop"),
        tasks=state.tasks._replace(remaining=put(state.tasks.remaining, r.stop_t, r.old_end - r.now, r.evicts)),
        ctl=ctl._replace(now=r.now, evictions=ctl.evictions + r.evicts.astype(jnp.int32)))


def _try_reads(cfg, st, state, r: EventReads, num_machines, num_tasks) -> TryReads:
    """The step's tries against the state after the stop: an arrival (with the fallback), or a
    DRAIN row's window, and where an eviction would go."""
    B, R, Mp = state.free.shape
    b = rows(state.end)
    free, ctl, w = state.free, state.ctl, r.win
    none = jnp.int32(Mp)
    zeros_i, zeros_b = jnp.zeros(B, jnp.int32), jnp.zeros(B, bool)
    lane = jnp.arange(cfg.window, dtype=jnp.int32)[None, :]
    c = r.stop_t // TASK_CHUNK
    chunk_low = jnp.min(state.end[b[:, None], _window(c * TASK_CHUNK, TASK_CHUNK)], axis=1)
    # An arrival's try, with the fallback.
    ja = pick(cfg, st, free, st.demand[r.arrived][:, None], _steps_of(r.arrived, r.arr_att, num_tasks)[:, None],
              r.is_arr[:, None], num_machines)[:, 0]
    ja = jnp.where(r.is_arr, ja, none)
    # A drain's candidates in the window, all tried against the same state: a try succeeds
    # iff one of its machines is feasible, so the first that does is placed (scored), and the
    # tries before it failed as they would one by one. An entry certified to fit nowhere but
    # on its witnesses, none of which fits now, fails for sure: its try needs no draws.
    d_w = st.demand[w.entry]
    is_any = w.cand & (w.w1 == W_ANY)
    steps_w = _steps_of(w.entry, w.entry_att, num_tasks)
    if cfg.sample_k > 0:
        ok = w.drawn & lax.cond(jnp.any(w.drawn), lambda: any_feasible(cfg, st, free, d_w, steps_w, num_machines),
                                lambda: jnp.zeros(w.cand.shape, bool))
    else:  # a full scan succeeds iff the entry fits somewhere: on a witness, unless it has no certificate
        ok = w.drawn & jnp.where(is_any, lax.cond(jnp.any(is_any), lambda: any_feasible(
            cfg, st, free, d_w, steps_w, num_machines), lambda: jnp.zeros(w.cand.shape, bool)), w.fw1 | w.fw2)
    has = jnp.any(ok, axis=1)
    off = jnp.argmax(ok, axis=1).astype(jnp.int32)
    tried = w.cand & ((lane <= off[:, None]) | ~has[:, None])
    # The class of the first failed try without a certificate gets one, from a full scan of
    # the state it failed against (free space only shrinks until the drain ends).
    no_cert = tried & is_any & ~ok
    at = jnp.argmax(no_cert, axis=1).astype(jnp.int32)
    scan = jnp.any(no_cert, axis=1)
    chosen = get(w.entry, off)
    jd = lax.cond(jnp.any(has), lambda: pick(cfg, st, free, st.demand[chosen][:, None], get(steps_w, off)[:, None],
                                             None, num_machines)[:, 0],
                  lambda: jnp.full((B,), none))
    cw1, cw2 = lax.cond(jnp.any(scan), lambda: witnesses(st, free, st.demand[get(w.entry, at)], num_machines),
                        lambda: (zeros_i, zeros_i))
    try_t = jnp.where(r.is_arr, r.arrived, jnp.where(has, chosen, 0))
    j = jnp.where(r.is_arr, ja, jnp.where(has, jd, none))
    failed = r.is_arr & (j == none)
    if cfg.preempt:
        need = failed & (st.band[try_t] == BANDS - 1)
        ej, found = lax.cond(jnp.any(need), lambda: evict_machine(st, state, st.demand[try_t], need),
                             lambda: (zeros_i, zeros_b))
    else:
        ej, found = zeros_i, zeros_b
    ev_fits = r.in_evict & fits(st, free, st.demand[ctl.ev_task], ctl.ev_mach)
    start_t = jnp.where(r.in_evict, ctl.ev_task, try_t)
    # A victim or an evicting task that gave up joins the queue without a certificate: its
    # class gets one now, from a full scan.
    if cfg.preempt:
        rejoin = r.evicts | r.want & ~r.has_victim
        vw1, vw2 = lax.cond(jnp.any(rejoin), lambda: witnesses(
            st, free, st.demand[jnp.where(r.evicts, r.victim, ctl.ev_task)], num_machines), lambda: (zeros_i, zeros_i))
    else:
        vw1 = vw2 = zeros_i
    return TryReads(chunk_low=chunk_low, j=j, failed=failed, ej=ej, found=found, ev_fits=ev_fits, has=has, off=off,
                    scan=scan, at=at, tried=tried, nw1=jnp.where(w.fw1, w.w1, -1), nw2=jnp.where(w.fw2, w.w2, -1),
                    cw1=cw1, cw2=cw2, vw1=vw1, vw2=vw2, try_t=try_t,
                    rem=state.tasks.remaining[b, start_t], first=state.tasks.first_start[b, start_t])


def _outcome(state, r: EventReads, q: TryReads) -> Outcome:
    Mp = state.free.shape[2]
    ctl = state.ctl
    starting = ((r.is_arr | q.has) & (q.j < Mp)) | q.ev_fits
    return Outcome(enter_evict=q.failed & q.found, gives_up=r.want & ~r.has_victim,
                   start_t=jnp.where(r.in_evict, ctl.ev_task, q.try_t), start_j=jnp.where(r.in_evict, ctl.ev_mach, q.j),
                   starting=starting, drained=q.has & (q.j < Mp))


def _record_tries(state, r: EventReads, q: TryReads, o: Outcome):
    """Every try counts: the arrival's attempt here, the drain's in its class's C_TRIES (in the
    task's attempts when it starts); the failed tries' classes keep the witnesses that still
    fit, and the first failed one without a certificate gets the full scan's."""
    b = rows(state.end)
    Np, Cp = state.end.shape[1], state.classes.shape[2]
    tasks, w = state.tasks, r.win
    attempts = tasks.attempts.at[b, jnp.where(r.is_arr, q.try_t, Np)].add(1, mode="drop")
    attempts = put(attempts, q.try_t, get(w.entry_att, q.off) + 1, o.drained)
    certified = q.tried & (w.w1 != W_ANY)
    witness_fields = jnp.array([C_W1, C_W2], jnp.int32)[None, :, None]
    classes = when(jnp.any(certified), lambda cs: cs.at[b[:, None, None], witness_fields,
                                                        jnp.where(certified, w.cls, Cp)[:, None, :]].set(
        jnp.stack([q.nw1, q.nw2], axis=1), mode="drop"), state.classes)
    classes = classes.at[b[:, None], witness_fields[:, :, 0], jnp.where(q.scan, get(w.cls, q.at), Cp)[:, None]].set(
        jnp.stack([q.cw1, q.cw2], axis=1), mode="drop")
    classes = classes.at[b, C_QUEUED, jnp.where(o.drained, get(w.cls, q.off), Cp)].add(-1, mode="drop")
    ctl = state.ctl
    drawn, drawn_hi = add64(ctl.drawn, ctl.drawn_hi, jnp.sum(q.tried & w.drawn, axis=1, dtype=jnp.int32))
    return state._replace(tasks=tasks._replace(attempts=attempts), classes=classes,
                          ctl=ctl._replace(drawn=drawn, drawn_hi=drawn_hi))


def _start(st, state, r: EventReads, q: TryReads, o: Outcome):
    """The task that starts takes its machine's resources and opens a run segment."""
    R, Mp = state.free.shape[1:]
    b = rows(state.end)
    dims = jnp.arange(R, dtype=jnp.int32)[None, :]
    ctl, tasks = state.ctl, state.tasks
    S = state.seg.shape[2]
    chunk_min = put(state.chunk_min, r.stop_t // TASK_CHUNK, q.chunk_low, r.stopping)
    sm = jnp.where(o.starting, o.start_j, Mp)
    free = state.free.at[b[:, None], dims, sm[:, None]].add(-st.demand[o.start_t], mode="drop")
    end_tick = r.now + jnp.minimum(q.rem, INF - 1 - r.now)
    end = put(state.end, o.start_t, end_tick, o.starting)
    chunk_min = chunk_min.at[b, jnp.where(o.starting, o.start_t // TASK_CHUNK, chunk_min.shape[1])].min(
        end_tick, mode="drop")
    seg_no = ctl.segments
    tasks = tasks._replace(machine=put(tasks.machine, o.start_t, o.start_j, o.starting),
                           first_start=put(tasks.first_start, o.start_t, jnp.where(q.first < 0, r.now, q.first),
                                           o.starting),
                           segment=put(tasks.segment, o.start_t, seg_no, o.starting))
    at = jnp.where(o.starting, seg_no, S)
    seg = state.seg
    for field, value in ((S_TASK, o.start_t), (S_MACH, o.start_j), (S_START, r.now)):
        seg = seg.at[b, field, at].set(value, mode="drop")
    return state._replace(free=free, end=end, chunk_min=chunk_min, tasks=tasks, seg=seg,
                          ctl=ctl._replace(segments=seg_no + o.starting.astype(jnp.int32),
                                           arrived=r.arrived + r.is_arr.astype(jnp.int32)))


def _enqueue(st, state, r: EventReads, q: TryReads, o: Outcome):
    """A failed arrival (not evicting: certified to fit nowhere by its full scan), a victim, or
    an evicting task that gave up (neither certified) joins the queue's tail; a placed drain
    candidate leaves its entry."""
    b = rows(state.end)
    L, Cp = state.queue.shape[2], state.classes.shape[2]
    ctl, classes = state.ctl, state.classes
    tail = ctl.tail
    arrival_enq = q.failed & ~o.enter_evict
    enq_t = jnp.where(r.evicts, r.victim, jnp.where(o.gives_up, ctl.ev_task, r.arrived))
    enq = arrival_enq | r.evicts | o.gives_up
    enq_c = st.cls[enq_t]
    enq_fields = jnp.stack([enq_t, enq_c, jnp.where(arrival_enq, r.arr_att + 1, r.enq_att),
                            classes[b, C_TRIES, enq_c]], axis=1)
    queue = state.queue.at[b[:, None], jnp.arange(Q_LIST, dtype=jnp.int32)[None, :],
                           jnp.where(enq, tail, L)[:, None]].set(enq_fields, mode="drop")
    queue = queue.at[b, Q_TASK, jnp.where(o.drained, get(r.win.qpos, q.off), L)].set(-1, mode="drop")
    # A failed arrival's full scan certifies that its class fits nowhere.
    enq_w = jnp.stack([jnp.where(arrival_enq, -1, q.vw1), jnp.where(arrival_enq, -1, q.vw2),
                       classes[b, C_QUEUED, enq_c] + 1], axis=1)
    classes = classes.at[b[:, None], jnp.array([C_W1, C_W2, C_QUEUED], jnp.int32)[None, :],
                         jnp.where(enq, enq_c, Cp)[:, None]].set(enq_w, mode="drop")
    word, bit = block_bit(tail)
    NW = state.blocks.shape[2]
    blocks = state.blocks.at[b, enq_c, jnp.where(enq, word, NW)].set(
        state.blocks[b, enq_c, jnp.minimum(word, NW - 1)] | bit, mode="drop")
    return state._replace(queue=queue, classes=classes, blocks=blocks, ctl=ctl._replace(
        queued=ctl.queued + enq.astype(jnp.int32) - o.drained.astype(jnp.int32), tail=tail + enq.astype(jnp.int32)))


def _certify(cfg, st, state, r: EventReads, q: TryReads, o: Outcome, num_machines):
    """After a completion (which may start a drain) or an eviction, the certificates of the place
    that gained free space; a drain starts when its pass leaves it candidates.

    Returns:
        (state, rows whose drain starts bool[B], the drain's tries i32[B]).
    """
    ctl = state.ctl
    zeros_i = jnp.zeros_like(ctl.tail)
    start_drain = r.is_end & (ctl.queued > 0)
    certify = start_drain | (r.in_evict & (q.ev_fits | o.gives_up) & (ctl.queued > 0))
    classes = when(jnp.any(certify), lambda cs: raise_certificates(st, state.free, cs, certify, jnp.where(
        start_drain, r.stop_m, ctl.ev_mach)), state.classes)
    classes, bound, drain_tries = when(jnp.any(start_drain), lambda a: drain_pass(
        st, state.free, a[0], a[1], start_drain, num_machines), (classes, state.bound, zeros_i))
    queue, cursor, listed = when(jnp.any(start_drain), lambda a: list_more(
        cfg, st, state.free, a[0], state.blocks, classes, bound, ctl.tail, start_drain, zeros_i, zeros_i,
        jnp.full_like(ctl.tail, cfg.window), witnesses_fit=True), (state.queue, ctl.cursor, zeros_i))
    tries, tries_hi = add64(ctl.tries, ctl.tries_hi, drain_tries)
    state = state._replace(classes=classes, bound=bound, queue=queue, ctl=ctl._replace(
        listed=jnp.where(start_drain, listed, ctl.listed), cursor=jnp.where(start_drain, cursor, ctl.cursor),
        tries=tries, tries_hi=tries_hi))
    return state, start_drain & (listed > 0)


def _next_mode(cfg, state, r: EventReads, q: TryReads, o: Outcome, start_drain):
    """Each row's next mode: a drain walks its list once per band and ends after its last band."""
    ctl = state.ctl
    width = cfg.window
    top = BANDS - 1 if cfg.preempt else 0
    # (the list may grow, so a window past its end stops there)
    pos = jnp.where(q.has, r.start + q.off + 1, jnp.minimum(r.start + width, ctl.listed))
    band_done = r.in_drain & (pos >= ctl.listed) & (ctl.cursor >= ctl.tail)
    band = jnp.where(band_done, ctl.band - 1, ctl.band)
    pos = jnp.where(band_done, 0, pos)
    drain_ends = r.in_drain & ((band_done & (band < 0)) | (ctl.queued == 0))
    pos = jnp.where(start_drain, 0, pos)
    band = jnp.where(start_drain, top, band)
    mode = jnp.where(start_drain, DRAIN, jnp.where(o.enter_evict, EVICT, ctl.mode))
    mode = jnp.where(drain_ends | q.ev_fits | o.gives_up, EVENT, mode)
    return state._replace(ctl=ctl._replace(
        mode=mode, pos=pos, band=band, ev_task=jnp.where(o.enter_evict, q.try_t, ctl.ev_task),
        ev_mach=jnp.where(o.enter_evict, q.ej, ctl.ev_mach)))


def step(cfg, st, state, num_machines, num_tasks):
    """One step of every row: the next event, one window of drain tries, or one eviction."""
    state = _extend_lists(cfg, st, state)
    always = state.ctl.arrived[0] >= 0
    r = materialize(always, lambda: _event_reads(cfg, st, state, num_tasks))
    state = _stop(st, state, r)
    q = materialize(always, lambda: _try_reads(cfg, st, state, r, num_machines, num_tasks))
    o = _outcome(state, r, q)
    state = _record_tries(state, r, q, o)
    state = _start(st, state, r, q, o)
    state = _enqueue(st, state, r, q, o)
    state, start_drain = _certify(cfg, st, state, r, q, o, num_machines)
    state = _next_mode(cfg, state, r, q, o, start_drain)
    # Compacting moves entries, so never in the middle of a row's drain.
    ctl = state.ctl
    crowded = (ctl.mode != DRAIN) & (ctl.tail > 2 * ctl.queued + cfg.queue_window)
    return when(jnp.any(crowded), lambda s: compact(s, crowded), state)
