"""Many binary searches advanced together, several levels a round (a 2^depth-ary search).

Compaction and inflation (docs/spec/POLICIES.md) are defined by binary search over a predicate
("the workload still packs 100%"). A round evaluates, for every search at once, all
the points the binary search could visit in its next `depth` steps, the 2^depth - 1
nodes of its decision tree, in one batched call, then walks the tree with the
outcomes. Every search thus visits exactly the points the sequential binary search
visits and returns its answer, even where the predicate is not monotone. Points known
to fail beforehand (`known_false`) are not evaluated: the walk takes the outcome the
evaluation would have given, and before each round a search steps past such midpoints
at once, so that every round evaluates a point of every search still running (rather
than some searches idling a round while others pack).
"""

from __future__ import annotations

from typing import Callable

import numpy as np

Evaluate = Callable[[np.ndarray, np.ndarray], np.ndarray]  # (candidates i64[B, C], needed bool[B, C]) -> bool[B, C]
KnownFalse = Callable[[np.ndarray], np.ndarray]  # candidates i64[B, C] -> bool[B, C]


def _step(lo, hi, outcome, first):
    """One binary-search step on [lo, hi] given the predicate at its midpoint.

    first (bool, per search): find the smallest x with pred(x), pred(hi) known true;
    else the largest x with pred(x), pred(lo) known true.
    """
    mid_f, mid_l = (lo + hi) // 2, (lo + hi + 1) // 2
    new_lo = np.where(first, np.where(outcome, lo, mid_f + 1), np.where(outcome, mid_l, lo))
    new_hi = np.where(first, np.where(outcome, mid_f, hi), np.where(outcome, hi, mid_l - 1))
    return new_lo, new_hi


def _midpoint(lo, hi, first):
    return np.where(first, (lo + hi) // 2, (lo + hi + 1) // 2)


def bisect(lo, hi, evaluate: Evaluate, find="first", depth: int = 1,
           progress: Callable[[int], None] | None = None, known_false: KnownFalse | None = None) -> np.ndarray:
    """Binary-search answers of B searches on integer ranges [lo_b, hi_b]: i64[B].

    find="first": the smallest x with pred(x), given pred(hi) is true;
    find="last": the largest x with pred(x), given pred(lo) is true;
    or one of those per search (a sequence of B).
    Each round calls evaluate(candidates i64[B, C], needed bool[B, C]) once with
    2^depth - 1 candidates per search; a finished search's candidates repeat its answer.
    `needed` marks the candidates whose outcome the walk will read (their search is still
    in play there and they are not known to fail): evaluate may skip the others.
    progress(round) is called after each round. known_false(candidates) -> bool[B, C]:
    candidates where pred is certainly false, taken as failing without evaluation (a
    search steps past known-false midpoints before a round; a round where every candidate
    still in play is known false skips `evaluate`).
    """
    lo, hi = np.array(lo, np.int64, ndmin=1), np.array(hi, np.int64, ndmin=1)
    kinds = np.broadcast_to(np.asarray(find), lo.shape)
    if not np.all(np.isin(kinds, ("first", "last"))):
        raise ValueError(f"find must be 'first' or 'last', got {find!r}")
    first = kinds == "first"
    rounds = 0
    while True:
        if known_false is not None:
            lo, hi = _skip_known_false(lo, hi, first, known_false)
        if not np.any(lo < hi):
            break
        # Breadth-first tree: node i's children are 2i+1 (outcome true) and 2i+2 (false).
        ranges = [(lo, hi)]
        for i in range(2**depth - 1):
            l, h = ranges[i]
            active = l < h
            for outcome in (True, False):
                nl, nh = _step(l, h, np.full(l.shape, outcome), first)
                ranges.append((np.where(active, nl, l), np.where(active, nh, h)))
        cands = np.stack([np.where(l < h, _midpoint(l, h, first), l) for l, h in ranges[: 2**depth - 1]], 1)
        live = np.stack([l < h for l, h in ranges[: 2**depth - 1]], 1)
        known = np.zeros(cands.shape, bool) if known_false is None else np.asarray(known_false(cands), bool)
        needed = live & ~known
        outcome = np.zeros(cands.shape, bool)  # a known failure fails, as evaluate would say
        if np.any(needed):
            outcome = np.asarray(evaluate(cands, needed), bool) & ~known
        node = np.zeros(lo.shape, np.int64)
        rows = np.arange(lo.size)
        for _ in range(depth):
            active = lo < hi
            r = outcome[rows, node]
            new_lo, new_hi = _step(lo, hi, r, first)
            lo, hi = np.where(active, new_lo, lo), np.where(active, new_hi, hi)
            node = 2 * node + np.where(r, 1, 2)
        rounds += 1
        if progress is not None:
            progress(rounds)
    return lo


def _skip_known_false(lo, hi, first, known_false: KnownFalse):
    """The searches walked past every midpoint known to fail, as their next steps would go
    (outcome false, no evaluation), until each has a midpoint that needs one or is done."""
    while True:
        live = lo < hi
        skip = live & np.asarray(known_false(_midpoint(lo, hi, first)[:, None]), bool)[:, 0]
        if not np.any(skip):
            return lo, hi
        new_lo, new_hi = _step(lo, hi, np.zeros(lo.shape, bool), first)
        lo, hi = np.where(skip, new_lo, lo), np.where(skip, new_hi, hi)


def bisect_sequential(lo: int, hi: int, pred: Callable[[int], bool], find: str = "first") -> int:
    """The plain binary search of the spec, one predicate call per step (the reference)."""
    while lo < hi:
        if find == "first":
            mid = (lo + hi) // 2
            lo, hi = (lo, mid) if pred(mid) else (mid + 1, hi)
        else:
            mid = (lo + hi + 1) // 2
            lo, hi = (mid, hi) if pred(mid) else (lo, mid - 1)
    return lo
