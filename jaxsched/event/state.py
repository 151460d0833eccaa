"""The replay's carry and its traced inputs, every array with the leading row axis B
(policy x trial), and the small helpers that read and write one entry per row."""

from __future__ import annotations

from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np
from jax import lax

from .inputs import INF

TASK_CHUNK = 512  # tasks per chunk of the two-level minimum over end ticks
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
# Segment fields: the task, its machine, the start and the end tick of one run.
S_TASK, S_MACH, S_START, S_END = range(4)


class Control(NamedTuple):
    """The counters and mode of each row, each i32[B]."""

    arrived: jax.Array  # tasks arrived so far: the number of the next arrival
    segments: jax.Array  # run segments written
    tail: jax.Array  # length of the queue log
    queued: jax.Array  # entries in the queue
    evictions: jax.Array
    mode: jax.Array  # EVENT, DRAIN or EVICT
    now: jax.Array  # tick of the row's latest event
    pos: jax.Array  # DRAIN: the drain list's next window
    band: jax.Array  # DRAIN: the band being drained
    ev_task: jax.Array  # EVICT: the evicting task
    ev_mach: jax.Array  # EVICT: the machine it evicts on
    listed: jax.Array  # DRAIN: entries in the drain list
    cursor: jax.Array  # DRAIN: the queue position the listing has reached
    drawn: jax.Array  # drain tries that drew machines: low word (read as unsigned) of a 64-bit count
    drawn_hi: jax.Array  # its high word
    tries: jax.Array  # drain tries: low word of a 64-bit count
    tries_hi: jax.Array  # its high word


class Tasks(NamedTuple):
    """What each row knows of each task, each i32[B, Np]."""

    machine: jax.Array  # machine of its latest run
    remaining: jax.Array  # ticks left to run
    attempts: jax.Array  # placement tries so far (every try counts)
    first_start: jax.Array  # tick of its first start, -1 never started
    segment: jax.Array  # number of its latest run segment


class EventState(NamedTuple):
    """Carry of the replay, leading axis B = rows (policy x trial)."""

    free: jax.Array  # f32[B, R, Mp]
    end: jax.Array  # i32[B, Np]: end tick of each running task, INF otherwise
    chunk_min: jax.Array  # i32[B, Np / TASK_CHUNK]: min of `end` per chunk
    tasks: Tasks
    seg: jax.Array  # i32[B, 4, S]: run segments (fields S_*)
    queue: jax.Array  # i32[B, 5, L]: the pending log (fields Q_*), FIFO order, task -1 where removed
    classes: jax.Array  # i32[B, 4, Cp]: per demand class (fields C_*)
    blocks: jax.Array  # u32[B, Cp, L / 2048]: bit k of word w: block 32 w + k of the queue held the class
    bound: jax.Array  # f32[B, R]: max free per dimension at the start of the row's drain
    ctl: Control


class Static(NamedTuple):
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


def initial_state(cap: jax.Array, duration: np.ndarray, B: int, Np: int, S: int, L: int, Cp: int,
                  words: int) -> EventState:
    """The state before the first event: every machine free, nothing running or queued.

    Args:
        cap: f32[R, Mp] capacities (padding machines included).
        duration: i32[N] ticks each task runs.
        B, Np, S, L, Cp: rows, padded tasks, segment slots, queue slots, padded classes.
        words: bitmap words per class (L / 2048).
    """
    R, Mp = cap.shape
    N = len(duration)
    remaining = np.zeros((B, Np), np.int32)
    remaining[:, :N] = duration
    zeros = lambda: jnp.zeros((B, Np), jnp.int32)  # one buffer each: the state is donated
    return EventState(
        free=jnp.broadcast_to(cap[None], (B, R, Mp)) + 0.0,
        end=jnp.full((B, Np), INF, jnp.int32),
        chunk_min=jnp.full((B, Np // TASK_CHUNK), INF, jnp.int32),
        tasks=Tasks(machine=zeros(), remaining=jnp.asarray(remaining), attempts=zeros(),
                    first_start=jnp.full((B, Np), -1, jnp.int32), segment=zeros()),
        seg=jnp.full((B, 4, S), -1, jnp.int32),
        queue=jnp.full((B, Q_LIST + 1, L), -1, jnp.int32),
        classes=jnp.asarray(np.broadcast_to(np.array([-1, -1, 0, 0], np.int32)[None, :, None], (B, 4, Cp))),
        blocks=jnp.zeros((B, Cp, words), jnp.uint32),
        bound=jnp.zeros((B, R), jnp.float32),
        ctl=Control(*(jnp.zeros(B, jnp.int32) for _ in Control._fields)))


def add64(lo, hi, x):
    """(lo, hi) + x for a 64-bit count kept as two i32 words (lo read as unsigned), x >= 0."""
    lo_u = lax.bitcast_convert_type(lo, jnp.uint32)
    new = lo_u + x.astype(jnp.uint32)
    return lax.bitcast_convert_type(new, jnp.int32), hi + (new < lo_u).astype(jnp.int32)


def count64(lo: np.ndarray, hi: np.ndarray) -> np.ndarray:
    """The 64-bit counts i64[B] kept as two words (`add64`)."""
    return (np.asarray(hi).astype(np.int64) << 32) + (np.asarray(lo).astype(np.int64) & 0xFFFFFFFF)


def rows(x):
    """The row numbers 0..B-1 of an array with leading axis B."""
    return jnp.arange(x.shape[0], dtype=jnp.int32)


def get(a, idx):
    """a[b, idx[b]] for every row b (idx in range)."""
    return a[rows(a), idx]


def put(a, idx, value, mask):
    """a[b, idx[b]] = value[b] where mask[b]."""
    out_of_range = a.shape[1]
    return a.at[rows(a), jnp.where(mask, idx, out_of_range)].set(value, mode="drop")


def materialize(pred, fn):
    """fn()'s values, computed as a conditional that is always taken (pred is true at run time).

    XLA updates a carry array in place only when every read of its old value is ordered
    before the update; a read that fusion duplicates into an unrelated consumer is not,
    and the whole array is then copied every step. A conditional's results are computed
    once, in one place, so the later updates that use them are ordered after every read.
    """
    shapes = jax.eval_shape(fn)
    return lax.cond(pred, fn, lambda: jax.tree_util.tree_map(lambda x: jnp.zeros(x.shape, x.dtype), shapes))


def columns(a):
    """The last axis of `a` as a tuple of per-dimension arrays."""
    return tuple(a[..., x] for x in range(a.shape[-1]))
