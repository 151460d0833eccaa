"""Plain numpy reference of CvxCluster's stage 2 (jaxsched/cvx/greedy.py docstring).

Given the prices, in float64: net utilities, the task order, each task's shape order,
then for each task the first shape with a feasible server: the first feasible of the
SAMPLES drawn servers, else the feasible server of the shape with the smallest hash.
Shapes are computed here from the raw servers. The counter hash is tests/reference_event's.
"""

from __future__ import annotations

import numpy as np

from reference_event import counter_bits

SAMPLES = 16
TOL = 1e-6


def shapes(capacity, server_type):
    """Shape of each server (lexicographic order of (type, capacity)) and the members of each shape."""
    key = np.concatenate([np.asarray(server_type, np.float64)[:, None], np.asarray(capacity, np.float64)], 1)
    uniq, inv = np.unique(key, axis=0, return_inverse=True)
    inv = inv.reshape(-1)
    return uniq, inv, [np.flatnonzero(inv == k) for k in range(len(uniq))]


def greedy(capacity, free, server_type, demand, weight, task_type, group, group_free, lam, mu,
           sample_words, scan_words):
    """Server of each task (-1 unplaced) placed greedily at prices lam f[K, R], mu f[K, G]."""
    free = np.array(free, np.float64)
    demand = np.asarray(demand, np.float64)
    gfree = np.array(group_free, np.int64)
    uniq, shape_of, members = shapes(capacity, server_type)
    K, N = len(uniq), len(demand)
    shape_cap, shape_type = uniq[:, 1:], uniq[:, 0].astype(int)
    ok_type = (task_type[:, None] == -1) | (task_type[:, None] == shape_type[None, :])
    fits_empty = np.all(demand[:, None, :] <= shape_cap[None] + 1e-6, axis=2)
    lam, mu = np.asarray(lam, np.float64), np.asarray(mu, np.float64)
    v = weight[:, None] - demand @ lam.T
    for i in range(N):
        if group[i] >= 0:
            v[i] -= mu[:, group[i]]
    v = np.where(ok_type & fits_empty, v, -np.inf)
    tot = np.array([np.asarray(capacity, np.float64)[m].sum(0) for m in members])
    left = np.array([free[m].sum(0) for m in members])
    share = np.array([min([left[k, r] / tot[k, r] for r in range(tot.shape[1]) if tot[k, r] > 0] or [1.0])
                      for k in range(K)])
    order = sorted(range(N), key=lambda i: (-v[i].max(), i))
    placement = np.full(N, -1)

    def feasible(i, j):
        if np.any(demand[i] > free[j] + TOL):
            return False
        return group[i] < 0 or gfree[group[i], j] > 0

    for i in order:
        prefs = sorted((k for k in range(K) if v[i, k] > -np.inf), key=lambda k: (-v[i, k], -share[k], k))
        for k in prefs:
            m = members[k]
            bits = counter_bits(sample_words, i, k * SAMPLES + np.arange(SAMPLES))
            drawn = [int(m[int(b) % len(m)]) for b in bits]
            chosen = next((j for j in drawn if feasible(i, j)), None)
            if chosen is None:
                h = counter_bits(scan_words, i, m)
                cands = [(int(h[x]), int(j)) for x, j in enumerate(m) if feasible(i, j)]
                chosen = min(cands)[1] if cands else None
            if chosen is not None:
                placement[i] = chosen
                free[chosen] -= demand[i]
                if group[i] >= 0:
                    gfree[group[i], chosen] -= 1
                break
    return placement, v
