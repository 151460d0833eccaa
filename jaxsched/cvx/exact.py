"""Exact references for CvxCluster, solved by HiGHS through scipy.optimize.

- `solve_lp`: the aggregated LP relaxation of stage 1 (variables x_ik per task and
  shape), its optimum and its shadow prices (the duals of the shape capacity rows).
- `solve_mip`: the integer placement problem itself (a binary x_ij per task and
  server), its best solution and HiGHS's proven bound, within its time limit.

Both run HiGHS in a child process: Ctrl-C stops it at once, and a MIP that does not return
by its time limit (HiGHS looks at its clock only now and then) is stopped there.
"""

from __future__ import annotations

import dataclasses
import os
import pickle
import subprocess
import sys
import time

import numpy as np
import scipy.sparse as sp
from scipy.optimize import Bounds, LinearConstraint, linprog, milp

from .problem import ANY_TYPE, CvxProblem, Shapes, aggregate, allowed, shape_budgets


@dataclasses.dataclass(frozen=True)
class LPSolution:
    """Optimum of the aggregated LP and its duals."""

    objective: float
    x: np.ndarray  # f64[N, K]
    prices: np.ndarray  # f64[K, R], duals of the capacity rows (>= 0)
    group_prices: np.ndarray  # f64[K, G], duals of the anti-affinity rows
    seconds: float


@dataclasses.dataclass(frozen=True)
class MIPSolution:
    """Best integer placement HiGHS found, and its bound on the optimum."""

    objective: float
    bound: float  # upper bound on the optimum (= objective when proven optimal)
    optimal: bool
    placement: np.ndarray  # i32[N], server of each task, -1 unplaced
    seconds: float
    status: str
    found: bool = True  # False: HiGHS stopped (its time limit) without any integer solution


def _pairs(mask: np.ndarray):
    i, k = np.nonzero(mask)
    return i.astype(np.int64), k.astype(np.int64)


def _rows(problem: CvxProblem, i, col, cols: int, cap_rows, group_rows):
    """Constraint matrix over variables (task i, column col), columns = shapes or servers.

    Rows: one per task (sum <= 1); one per (column, resource); one per (column, group)
    for the groups present.
    """
    N, R = problem.demand.shape
    V = len(i)
    v = np.arange(V)
    blocks = [sp.csr_matrix((np.ones(V), (i, v)), shape=(N, V))]
    d = problem.demand.astype(np.float64)
    for r in range(R):
        blocks.append(sp.csr_matrix((d[i, r], (col, v)), shape=(cols, V)))
    g = problem.group[i]
    on = g >= 0
    if on.any():
        G = problem.num_groups
        blocks.append(sp.csr_matrix((np.ones(int(on.sum())), (g[on] * cols + col[on], v[on])), shape=(G * cols, V)))
    A = sp.vstack(blocks, format="csr")
    b = np.concatenate([np.ones(N)] + [cap_rows[:, r] for r in range(R)] +
                       ([group_rows.T.reshape(-1)] if on.any() else []))
    return A, b, on.any()


def solve_lp(problem: CvxProblem, shapes: Shapes | None = None) -> LPSolution:
    """Solve the aggregated LP max sum u_i x_ik (see module doc) with HiGHS (in a child
    process, so that Ctrl-C stops it at once)."""
    return _in_child("_solve_lp", (problem, shapes))


def _solve_lp(problem: CvxProblem, shapes: Shapes | None) -> LPSolution:
    shapes = aggregate(problem) if shapes is None else shapes
    K = len(shapes.count)
    N, R = problem.demand.shape
    B, A_g = shape_budgets(problem, shapes)
    i, k = _pairs(allowed(problem, shapes))
    A, b, has_groups = _rows(problem, i, k, K, B, A_g)
    c = -problem.weight.astype(np.float64)[i]
    t0 = time.perf_counter()
    res = linprog(c, A_ub=A, b_ub=b, bounds=(0, None), method="highs")
    seconds = time.perf_counter() - t0
    if res.status != 0:
        raise RuntimeError(f"HiGHS LP failed: {res.message}")
    x = np.zeros((N, K))
    x[i, k] = res.x
    duals = -np.asarray(res.ineqlin.marginals)
    prices = duals[N:N + K * R].reshape(R, K).T
    G = problem.num_groups
    gp = duals[N + K * R:].reshape(G, K).T if has_groups else np.zeros((K, G))
    return LPSolution(objective=float(-res.fun), x=x, prices=prices, group_prices=gp, seconds=seconds)


KILL_GRACE_S = 0.5  # past the time limit, a MIP solve that has not returned is stopped
HAND_BACK_S = 0.05  # share of the time limit kept for handing the solution back


def solve_mip(problem: CvxProblem, time_limit: float = 60.0, rel_gap: float = 1e-4) -> MIPSolution:
    """Solve the per-server integer placement problem with HiGHS MIP, within `time_limit`
    seconds of wall time from this call, the model's construction included.

    HiGHS looks at its clock only now and then (not during a long presolve), and scipy's
    hand-over of a large model is outside that clock; so the solve runs in a child process,
    given the time left, and is stopped KILL_GRACE_S past the limit if it has not returned:
    then the result has no solution (`found` False) and says so in its status.
    """
    start = time.monotonic()
    deadline = start + float(time_limit)
    outcome = _in_child("_solve_mip", (problem, deadline, float(time_limit), float(rel_gap)),
                        timeout=time_limit + KILL_GRACE_S)
    if outcome is None:
        return MIPSolution(0.0, float("inf"), False, np.full(problem.num_tasks, -1, np.int32),
                           time.monotonic() - start,
                           f"stopped at the {time_limit:g} s time limit before HiGHS returned", found=False)
    return dataclasses.replace(outcome, seconds=time.monotonic() - start)


def _in_child(name: str, args: tuple, timeout: float | None = None):
    """This module's `name`(*args) in a child interpreter: its result, or None where it ran
    past `timeout` seconds and was stopped; its error is raised again here. A fresh
    interpreter: never a fork of one running JAX's threads, and no re-import of the caller's
    main module; the arguments and the answer are pickled through its stdin and stdout."""
    code = f"from jaxsched.cvx import exact; exact._child({name!r})"
    child = subprocess.Popen([sys.executable, "-c", code], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                             stderr=subprocess.PIPE)
    try:
        out, err = child.communicate(pickle.dumps(args), timeout=timeout)
    except subprocess.TimeoutExpired:
        return None
    finally:  # also on Ctrl-C
        if child.poll() is None:
            child.kill()
            child.communicate()
    if child.returncode != 0 or not out:
        tail = err.decode(errors="replace").strip().splitlines()[-1:] or ["no message"]
        raise RuntimeError(f"the HiGHS process failed (exit code {child.returncode}): {tail[0]}")
    outcome = pickle.loads(out)
    if isinstance(outcome, BaseException):
        raise outcome
    return outcome


def _child(name: str) -> None:
    """The child process of `_in_child`: the arguments from stdin, the answer (or the error
    raised) to stdout."""
    answer = os.fdopen(os.dup(1), "wb")
    os.dup2(2, 1)  # what HiGHS itself prints goes to stderr, not into the answer
    args = pickle.load(sys.stdin.buffer)
    try:
        outcome = globals()[name](*args)
    except Exception as e:  # noqa: BLE001 (raised again in the parent)
        outcome = e
    answer.write(pickle.dumps(outcome))
    answer.close()


def _solve_mip(problem: CvxProblem, deadline: float, time_limit: float, rel_gap: float) -> MIPSolution:
    """Build the MIP and solve it with what is left before `deadline` (a time.monotonic value);
    `solve_mip` sets the result's seconds (the whole call's)."""
    M = problem.num_servers
    type_ok = (problem.task_type[:, None] == ANY_TYPE) | (problem.task_type[:, None] == problem.server_type[None, :])
    fits = np.all(problem.demand[:, None, :] <= problem.free[None, :, :] + 1e-6, axis=2)
    i, j = _pairs(type_ok & fits)
    N = problem.num_tasks
    if len(i) == 0:
        return MIPSolution(0.0, 0.0, True, np.full(N, -1, np.int32), 0.0, "nothing fits")
    A, b, _ = _rows(problem, i, j, M, problem.free.astype(np.float64), problem.allowance().T.astype(np.float64))
    c = -problem.weight.astype(np.float64)[i]
    left = deadline - time.monotonic() - HAND_BACK_S * time_limit
    res = milp(c, constraints=LinearConstraint(A, -np.inf, b), integrality=np.ones(len(i)), bounds=Bounds(0, 1),
               options={"time_limit": max(left, 0.01), "mip_rel_gap": rel_gap})
    placement = np.full(N, -1, np.int32)
    if res.x is None:
        return MIPSolution(0.0, float("inf"), False, placement, 0.0, res.message, found=False)
    on = res.x > 0.5
    placement[i[on]] = j[on]
    obj = float(-res.fun)
    bound = float(-getattr(res, "mip_dual_bound", res.fun))
    return MIPSolution(objective=obj, bound=max(bound, obj), optimal=res.status == 0, placement=placement,
                       seconds=0.0, status=res.message)


def exact_summary(lp: LPSolution, mip: MIPSolution) -> dict:
    """The exact references as JSON: the LP optimum, the MIP's best and bound, their times."""
    return {"lp_objective": lp.objective, "lp_seconds": lp.seconds,
            "mip_objective": mip.objective if mip.found else None,
            "mip_bound": mip.bound if np.isfinite(mip.bound) else None, "mip_optimal": mip.optimal,
            "mip_found": mip.found, "mip_seconds": mip.seconds, "mip_status": mip.status}
