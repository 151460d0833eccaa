"""The pending queue and its drains: class certificates, the class block bitmaps that lead a
drain to its candidates, the drain's start, and the compaction of the queue log.

A drain makes the reference's tries without the work of those certain to fail: tasks of one
demand and band form a class, whose certificate (the at most two machines it may still fit
on) shows most tries to fail without draws; those are counted per class, and only the
entries of classes that may fit are listed (through per-class bitmaps of queue blocks) and
tried.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
from jax import lax

from ..packing import when
from ..policies import FEASIBILITY_TOL, feasible
from .placement import fits_on
from .state import C_QUEUED, C_TRIES, C_W1, C_W2, Q_CLASS, Q_LIST, Q_TASK, W_ANY, materialize, rows

BLOCK_SHIFT, WORD_SHIFT = 6, 11  # class block bitmaps: blocks of 64 queue entries, 32 blocks a word
SPAN_WORDS = 8  # bitmap words read per iteration of a drain's listing (16,384 queue entries)


def witnesses(st, free, d, num_machines):
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


def class_fits(st, free, w):
    """bool[B, Cp]: each demand class fits machine w i32[B, Cp] now (False where w < 0)."""
    R = free.shape[1]
    return fits_on(st, free, jnp.broadcast_to(st.class_demand[None], w.shape + (R,)), w)


def raise_certificates(st, free, classes, which, x):
    """The class certificates of the rows `which` bool[B] after machine x i32[B] gained free space.

    Free space only shrinks but where a task stops (a completion, an eviction), so a class
    certified to fit nowhere but on its witnesses stays so, except that it may now fit on x:
    x joins its witnesses (witnesses that no longer fit leave; with no slot free, the
    certificate is dropped).
    """
    B, R, Mp = free.shape
    w1, w2 = classes[:, C_W1], classes[:, C_W2]
    any_ = w1 == W_ANY
    w1 = jnp.where(any_ | class_fits(st, free, w1), w1, -1)
    w2 = jnp.where(class_fits(st, free, w2), w2, -1)
    xc = x[:, None]
    fx = jnp.clip(x, 0, Mp - 1)
    fits_x = feasible(tuple(st.class_demand[None, :, r] for r in range(R)), tuple(
        free[rows(x), r, fx][:, None] for r in range(R)), tuple(st.inv[r, fx][:, None] for r in range(R)))
    joins = which[:, None] & fits_x & ~any_ & (w1 != xc) & (w2 != xc)
    full = joins & (w1 != -1) & (w2 != -1)
    w1n = jnp.where(full, W_ANY, jnp.where(joins & (w1 == -1), xc, w1))
    w2n = jnp.where(full, -1, jnp.where(joins & (w1 != -1) & (w2 == -1), xc, w2))
    keep = ~which[:, None]
    return classes.at[:, C_W1].set(jnp.where(keep, classes[:, C_W1], w1n)).at[:, C_W2].set(
        jnp.where(keep, classes[:, C_W2], w2n))


def block_bit(p):
    """The word of a queue position p in the class block bitmaps, and its block's bit there."""
    return p >> WORD_SHIFT, jnp.left_shift(jnp.uint32(1), ((p >> BLOCK_SHIFT) & 31).astype(jnp.uint32))


def _rebuild_blocks(queue, blocks, which):
    """The class block bitmaps of the rows `which` bool[B], rebuilt from their queues."""
    B, _, L = queue.shape
    Cp, NW = blocks.shape[1], blocks.shape[2]
    shape = (B, NW, 32, 1 << BLOCK_SHIFT)  # word, block (bit), position in the block
    cls = queue[:, Q_CLASS].reshape(shape)
    cls = jnp.where((queue[:, Q_TASK] >= 0).reshape(shape) & which[:, None, None, None], cls, Cp)
    b = rows(which)[:, None, None]
    w = jnp.arange(NW, dtype=jnp.int32)[None, :, None]

    def one_bit(j, new):  # the entries of one block per word: their writes to a word agree
        c = lax.dynamic_index_in_dim(cls, j, axis=2, keepdims=False)
        old = new[b, jnp.minimum(c, Cp - 1), w]
        return new.at[b, c, w].set(old | jnp.left_shift(jnp.uint32(1), j.astype(jnp.uint32)), mode="drop")

    new = lax.fori_loop(0, 32, one_bit, jnp.zeros_like(blocks))
    return jnp.where(which[:, None, None], new, blocks)


def compact(state, which):
    """Drop removed entries from the queue log of each row in `which`, keeping FIFO order."""
    L = state.queue.shape[2]

    def one(q, tail):
        live = (q[Q_TASK] >= 0) & (jnp.arange(L) < tail)
        idx = jnp.nonzero(live, size=L, fill_value=L)[0]
        return jnp.where((idx < L)[None, :], q[:Q_LIST, jnp.minimum(idx, L - 1)], -1)

    ctl = state.ctl
    packed = jax.vmap(one)(state.queue, ctl.tail)
    queue = state.queue.at[:, :Q_LIST].set(jnp.where(which[:, None, None], packed, state.queue[:, :Q_LIST]))
    return state._replace(queue=queue, ctl=ctl._replace(tail=jnp.where(which, ctl.queued, ctl.tail)),
                          blocks=_rebuild_blocks(queue, state.blocks, which))


def _list_candidates(queue, live, tail, count, positions):
    """Queue positions i32[B, n] that hold an entry of a `live` bool[B, Cp] class appended to
    the drain list (Q_LIST) at `count` i32[B], in order: (queue, count)."""
    B, n = positions.shape
    L = queue.shape[2]
    b = rows(tail)

    def reads():
        safe = jnp.minimum(positions, L - 1)
        task = queue[b[:, None], Q_TASK, safe]
        cls = jnp.maximum(queue[b[:, None], Q_CLASS, safe], 0)
        cand = (task >= 0) & (positions < tail[:, None]) & jnp.take_along_axis(live, cls, axis=1)
        return cand, count[:, None] + jnp.cumsum(cand, axis=1, dtype=jnp.int32) - 1

    cand, k = materialize(jnp.all(count >= 0), reads)
    queue = queue.at[b[:, None], Q_LIST, jnp.where(cand, k, L)].set(positions, mode="drop")
    return queue, count + jnp.sum(cand, axis=1, dtype=jnp.int32)


def _passing(st, bound, which):
    """bool[B, Cp]: the classes of the rows `which` bool[B] whose demand fits the drain's bound."""
    return which[:, None] & jnp.all(st.class_demand[None] <= bound[:, None, :] + FEASIBILITY_TOL, axis=2)


def _live_classes(st, free, classes, bound, which, witnesses_fit=False):
    """bool[B, Cp]: the classes of the rows `which` bool[B] whose queued entries a drain tries
    and that may fit somewhere now (no certificate, or a witness that fits). witnesses_fit:
    every witness is known to fit now (just after `raise_certificates`), so none is looked up."""
    w1, w2 = classes[:, C_W1], classes[:, C_W2]
    passes = _passing(st, bound, which)
    if witnesses_fit:
        may_fit = (w1 == W_ANY) | (w1 >= 0) | (w2 >= 0)
    else:
        may_fit = (w1 == W_ANY) | class_fits(st, free, w1) | class_fits(st, free, w2)
    return passes & (classes[:, C_QUEUED] > 0) & may_fit


def list_more(cfg, st, free, queue, blocks, classes, bound, tail, which, cursor, count, target,
              witnesses_fit=False):
    """More of the drain list of the rows `which` bool[B]: the entries of live classes from
    queue position `cursor` on, appended at `count` until it reaches `target` (or the queue
    ends): (queue, cursor, count).

    Listing as the drain goes leaves out the entries of classes that died meanwhile (their
    tries fail for sure). The class block bitmaps lead to the blocks of 64 entries that held
    a live class (at most `cfg.max_live` live classes a row; with more, every entry is read).
    """
    B, _, L = queue.shape
    Cp = blocks.shape[1]
    b = rows(tail)
    live = _live_classes(st, free, classes, bound, which, witnesses_fit)
    active = lambda cur, n: which & (n < target) & (cur < tail) & jnp.any(live, axis=1)
    few = jnp.all(jnp.sum(live, axis=1) <= cfg.max_live)
    span = SPAN_WORDS << WORD_SHIFT
    span_blocks = span >> BLOCK_SHIFT
    lane = jnp.arange(1 << BLOCK_SHIFT, dtype=jnp.int32)[None, None, :]
    bits = jnp.arange(32, dtype=jnp.uint32)[None, None, None, :]
    block_no = jnp.arange(span_blocks, dtype=jnp.int32)[None, :]
    group = cfg.group_blocks

    def by_blocks(c):
        ids = jax.vmap(lambda x: jnp.nonzero(x, size=cfg.max_live, fill_value=Cp)[0])(live).astype(jnp.int32)

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
            slot = jnp.where(hit, jnp.cumsum(hit, axis=1, dtype=jnp.int32) - 1, group)
            taken = jnp.full((B, group), -1, jnp.int32).at[b[:, None], slot].set(blk, mode="drop")
            pos = jnp.where(((taken >= 0) & go[:, None])[:, :, None], (taken << BLOCK_SHIFT)[:, :, None] + lane, L)
            queue, n = _list_candidates(queue, live, tail, n, pos.reshape(B, -1))
            more = jnp.sum(hit, axis=1) > group
            nxt = jnp.where(more, (taken[:, -1] + 1) << BLOCK_SHIFT, (first + span_blocks) << BLOCK_SHIFT)
            return queue, jnp.where(go, nxt, cur), n

        return lax.while_loop(lambda c: jnp.any(active(c[1], c[2])), body, c)

    def by_scan(c):
        def body(c):
            queue, cur, n = c
            go = active(cur, n)
            pos = jnp.where(go[:, None], cur[:, None] + jnp.arange(cfg.pass_chunk, dtype=jnp.int32)[None, :], L)
            queue, n = _list_candidates(queue, live, tail, n, pos)
            return queue, jnp.where(go, cur + cfg.pass_chunk, cur), n

        return lax.while_loop(lambda c: jnp.any(active(c[1], c[2])), body, c)

    c = when(few, by_blocks, (queue, cursor, count))
    c = when(~few, by_scan, c)
    # A row whose live classes are gone has nothing more to list.
    queue, cur, n = c
    return queue, jnp.where(which & ~jnp.any(live, axis=1), jnp.maximum(cur, tail), cur), n


def drain_pass(st, free, classes, old_bound, which, num_machines):
    """The start of a drain in the rows `which` bool[B]: (classes, bound f32[B, R] (`old_bound`
    elsewhere), the drain's tries i32[B]).

    A drain tries, once each, the entries whose demand fits the maximum free per dimension
    (`bound`) at its start: C_TRIES counts that try for their whole class. The entries of a
    class certified to fit nowhere fail for sure and need nothing more; the others, of the
    drain's live classes, are listed as the drain goes (`list_more`) and tried with draws.
    """
    bound = jnp.where(which[:, None], jnp.max(free[:, :, :num_machines], axis=2), old_bound)
    passes = _passing(st, bound, which)
    tries = jnp.sum(jnp.where(passes, classes[:, C_QUEUED], 0), axis=1, dtype=jnp.int32)
    return classes.at[:, C_TRIES].add(passes.astype(jnp.int32)), bound, tries
