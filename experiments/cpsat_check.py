"""One-off check: OR-Tools CP-SAT on the first instance of bench_cvx part 1, against CvxCluster.

Not a dependency: `pip install ortools` first. Demands and free capacity are scaled to
integers (demand rounded up, capacity down, so every CP-SAT placement is feasible),
weights are the 1/2/4 priority weights, anti-affinity is at most one task of a group per
server. 60 s on 2 workers; prints CP-SAT's status, best objective and bound.

    python experiments/cpsat_check.py
"""
import os
import sys
import time

import numpy as np
from ortools.sat.python import cp_model

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
from jaxsched.cvx import allocate  # noqa: E402
from jaxsched.cvx.instances import synthetic_problem  # noqa: E402

p, _ = synthetic_problem(50, 1.3, 1)
S = 10000
d = np.ceil(p.demand.astype(np.float64) * S).astype(int); f = np.floor(p.free.astype(np.float64) * S).astype(int)
N, M = d.shape[0], f.shape[0]
m = cp_model.CpModel(); x = {}
for i in range(N):
    for j in range(M):
        if (p.task_type[i] in (-1, p.server_type[j])) and np.all(d[i] <= f[j]):
            x[i, j] = m.NewBoolVar("")
for i in range(N):
    m.AddAtMostOne([x[i, j] for j in range(M) if (i, j) in x])
for j in range(M):
    for r in range(d.shape[1]):
        m.Add(sum(int(d[i, r]) * x[i, j] for i in range(N) if (i, j) in x) <= int(f[j, r]))
for g in range(p.num_groups):
    mem = np.flatnonzero(p.group == g)
    for j in range(M):
        m.AddAtMostOne([x[i, j] for i in mem if (i, j) in x])
w = np.round(p.weight).astype(int)
m.Maximize(sum(int(w[i]) * v for (i, j), v in x.items()))
s = cp_model.CpSolver(); s.parameters.max_time_in_seconds = 60; s.parameters.num_workers = 2
t = time.perf_counter(); st = s.Solve(m)
print("cpsat", s.StatusName(st), s.ObjectiveValue(), s.BestObjectiveBound(), time.perf_counter() - t, "greedy", allocate(p).objective)
