"""Plain Python reading of CvxCluster's rounds in event mode (jaxsched/event/rounds.py docstring).

Every grid point recounts every queued class's copies on every server (no shortcut), and a
round's placement comes from `allocate(tick, free, candidates, held)`, so that the tests can
give it HiGHS's exact LP prices and the numpy greedy.
"""

from __future__ import annotations

import numpy as np

TOL = 1e-6


def copies(d, f):
    """Copies of demand d that fit free f on its own (floor((f + TOL) / d) over d > 0; zero demand: many)."""
    pos = d > 0
    if not pos.any():
        return 2**31
    return max(0, int(np.min(np.floor((f[pos] + TOL) / d[pos]))))


def rounds(capacity, demand, weight, group, arrival, duration, step, allocate):
    """(server, start tick) of each task (arrival order; -1 where never placed) and the round ticks."""
    cap = np.asarray(capacity, np.float64)
    demand = np.asarray(demand, np.float64)
    M, N = len(cap), len(demand)
    free = cap.copy()
    held = {}  # (group, server) -> running members
    running = []  # (end, task)
    queue = []
    server = np.full(N, -1)
    start = np.full(N, -1)
    ticks = []
    nxt = 0
    t0 = t = int(arrival[0])
    while True:
        for end, task in sorted(running):
            if end <= t:
                free[server[task]] += demand[task]
                if group[task] >= 0:
                    held[(group[task], server[task])] -= 1
        running = [(e, x) for e, x in running if e > t]
        while nxt < N and arrival[nxt] <= t:
            queue.append(nxt)
            nxt += 1
        classes = {}
        for task in queue:
            classes.setdefault((tuple(demand[task]), float(weight[task]), int(group[task])), []).append(task)
        cand = []
        for (d, _, g), tasks in classes.items():
            n = 0
            for j in range(M):
                c = copies(np.asarray(d), free[j])
                if g >= 0:
                    c = min(c, 1 - held.get((g, j), 0))
                n += max(c, 0)
            cand += tasks[:n]
        cand = sorted(cand)
        if cand:
            placement = allocate(len(ticks), t, free.copy(), cand, dict(held))
            ticks.append(t)
            for task, j in zip(cand, placement):
                if j < 0:
                    continue
                assert np.all(demand[task] <= free[j] + 1e-5), "the reference placed a task that does not fit"
                free[j] -= demand[task]
                if group[task] >= 0:
                    held[(group[task], j)] = held.get((group[task], j), 0) + 1
                server[task], start[task] = j, t
                running.append((t + int(duration[task]), task))
                queue.remove(task)
        upcoming = ([int(arrival[nxt])] if nxt < N else []) + ([min(running)[0]] if queue and running else [])
        if not upcoming:
            return server, start, ticks
        t = max(t + step, t0 + step * -(-(min(upcoming) - t0) // step))


def check_feasible(capacity, demand, group, segments, tol=1e-5):
    """Assert that the running tasks fit every server at every instant (ends before starts at one
    tick) and that no server holds two running members of one group."""
    cap = np.asarray(capacity, np.float64)
    used = np.zeros_like(cap)
    members = {}
    events = sorted([(int(s[3]), 0, int(s[0]), int(s[1])) for s in segments]
                    + [(int(s[2]), 1, int(s[0]), int(s[1])) for s in segments])
    for t, kind, task, j in events:
        sign = 1 if kind else -1
        used[j] += sign * np.asarray(demand[task], np.float64)
        if group[task] >= 0:
            members[(group[task], j)] = members.get((group[task], j), 0) + sign
            assert members[(group[task], j)] <= 1, f"two members of group {group[task]} on server {j} at tick {t}"
        assert np.all(used[j] <= cap[j] + tol), f"server {j} over capacity at tick {t}"
