"""Plain-Python reference of event mode (docs/event.md): a heapq discrete-event loop.

One policy and one trial at a time, float64 numpy for the scores (tests/reference.py),
Python lists and a heap for the queue and the running tasks, and its own numpy reading
of the counter hash that draws the machines. No code is shared with jaxsched.event.
"""

from __future__ import annotations

import heapq
import time

import numpy as np

from reference import feasible, scores

INF = 2**31 - 1
TOL = 1e-6
PRODUCTION = 9
MASK = 0xFFFFFFFF


def _mix(x):
    x ^= x >> 16
    x = (x * 0x7FEB352D) & MASK
    x ^= x >> 15
    x = (x * 0x846CA68B) & MASK
    return x ^ (x >> 16)


def counter_bits(words, step, lanes):
    """The counter hash of (trial words, step, lanes) as uint64 numpy arithmetic modulo 2^32."""
    lanes = np.asarray(lanes, np.uint64)
    h = _mix(np.uint64((int(step) ^ int(words[0])) & MASK))
    h = _mix(np.uint64(h) ^ ((lanes * np.uint64(0x9E3779B9)) & np.uint64(MASK)))
    return _mix((h + np.uint64(int(words[1]))) & np.uint64(MASK))


def replay(cap, demand, arrival, duration, priority, name, sample_k=0, preempt=False, swords=(0, 0),
           nwords=(0, 0), genome=None, slot=(0.05, 0.05), exact_scores=False, stats=None, deadline=None):
    """Replay tasks 0..N-1 (in arrival order, integer ticks) through one policy.

    Returns (segments [(task, machine, start, end)] in start order, first start per task
    or -1, evictions, near_tie): near_tie says some choice had a runner-up on a machine of
    another state within 1e-5 of the best score, where float32 rounding may decide; with
    exact_scores (scores computed exactly in float32 too, as on grid inputs), exact ties
    are not near ties.

    stats (a dict), when given, gets the counts of events (arrivals and completions) and of
    drain tries; deadline (a time.perf_counter() value) stops the replay early, with
    stats["stopped"] set (a benchmark's way to time a replay too long to finish).
    """
    stats = {} if stats is None else stats
    stats.update(events=0, drain_tries=0, stopped=False)
    cap = np.asarray(cap, np.float64)
    demand = np.asarray(demand, np.float64)
    M = cap.shape[0]
    N = len(arrival)
    free = cap.copy()
    band = [(2 if p >= PRODUCTION else 1 if p >= 2 else 0) if preempt else 0 for p in priority]
    remaining = [int(x) for x in duration]
    attempts = [0] * N
    first = [-1] * N
    running = {}  # task -> [end, machine, segment number]
    heap = []
    queue = []
    segments = []
    evictions = 0
    near_tie = False

    def check_tie(s, machines):
        nonlocal near_tie
        best = s.max()
        near = (s >= best - 1e-5 * max(1.0, abs(best))) & ~(exact_scores & (s == best))
        close = np.concatenate([machines[s == best][:1], machines[near]])
        states = {tuple(free[j]) + tuple(cap[j]) for j in close}
        near_tie |= len(states) > 1

    def noise_for(step, machines):
        if name != "random":
            return None
        return (counter_bits(nwords, step, machines) >> np.uint64(8)).astype(np.float64) * 2.0**-24

    def try_place(t, fallback):
        step = (t + attempts[t] * N) & MASK
        attempts[t] += 1
        d = demand[t]
        if sample_k > 0:
            idx = (counter_bits(swords, step, np.arange(sample_k)) % np.uint64(M)).astype(np.int64)
            s = scores(name, d, free[idx], cap[idx], genome, noise_for(step, idx), slot)
            if np.any(s > -np.inf):
                check_tie(s, idx)
                return int(np.min(idx[s == s.max()]))
            if not fallback:
                return -1
        s = scores(name, d, free, cap, genome, noise_for(step, np.arange(M)), slot)
        if not np.any(s > -np.inf):
            return -1
        check_tie(s, np.arange(M))
        return int(np.argmax(s))

    def start(t, j, now):
        free[j] -= demand[t]
        end = now + min(remaining[t], INF - 1 - now)
        running[t] = [end, j, len(segments)]
        heapq.heappush(heap, (end, t))
        if first[t] < 0:
            first[t] = now
        segments.append([t, j, now, -1])

    def stop(t, now):
        end, j, seg = running.pop(t)
        free[j] += demand[t]
        segments[seg][3] = now

    def evict_for(t, now):
        nonlocal evictions
        d = demand[t]
        victims_on = {}
        for v, (end, j, _) in running.items():
            if priority[v] < PRODUCTION:
                victims_on.setdefault(j, []).append(v)
        best, best_short = -1, np.inf
        for j in range(M):
            freed = free[j] + sum((demand[v] for v in victims_on.get(j, [])), np.zeros_like(d))
            if not feasible(d, freed[None], cap[j][None])[0]:
                continue
            short = float(np.sum(np.maximum(d - free[j], 0.0)))
            if short < best_short:
                best, best_short = j, short
        if best < 0:
            return -1
        order = sorted(victims_on.get(best, []), key=lambda v: (priority[v], -float(np.sum(demand[v])), v))
        for v in order:
            if feasible(d, free[best][None], cap[best][None])[0]:
                break
            remaining[v] = running[v][0] - now
            stop(v, now)
            queue.append(v)
            evictions += 1
        return best if feasible(d, free[best][None], cap[best][None])[0] else -1

    def drain(now):
        ub = free.max(axis=0)
        for b in ((2, 1, 0) if preempt else (0,)):
            kept = []
            for t in queue:
                if band[t] == b and np.all(demand[t] <= ub + TOL):
                    stats["drain_tries"] += 1
                    j = try_place(t, False)
                    if j >= 0:
                        start(t, j, now)
                        continue
                kept.append(t)
            queue[:] = kept
            if not queue:
                break

    a = 0
    while True:
        if deadline is not None and time.perf_counter() > deadline:
            stats["stopped"] = True
            break
        while heap and (heap[0][1] not in running or running[heap[0][1]][0] != heap[0][0]):
            heapq.heappop(heap)
        t_end = heap[0][0] if heap else INF
        t_arr = int(arrival[a]) if a < N else INF
        if heap and t_end <= t_arr:
            _, t = heapq.heappop(heap)
            stats["events"] += 1
            stop(t, t_end)
            if queue:
                drain(t_end)
        elif a < N:
            t = a
            a += 1
            stats["events"] += 1
            j = try_place(t, True)
            if j < 0 and preempt and priority[t] >= PRODUCTION:
                j = evict_for(t, t_arr)
            if j >= 0:
                start(t, j, t_arr)
            else:
                queue.append(t)
        else:
            break
    return segments, first, evictions, near_tie
