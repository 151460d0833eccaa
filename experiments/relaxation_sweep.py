"""Experiment: does the relaxation's gradient point the way the hard objective goes?

Workload: a synthetic snapshot (default 200 machines at rho 1.0, seed 1, where policies
differ), genomes on lines through alpha_evolve, genome = alpha_evolve + t e_k for a few
coordinates k (w4: best-fit term, w5: balance term, p2: shape power) and a grid of t,
for each of several temperatures. For every point it reports:

- hard: the real objective (`evolve.fitness`, full scan, the mean over --trials orders);
- relaxed: the relaxed objective of `relax.relaxed_objective`, same orders;
- grad: the component along the line of the gradient `jaxsched tune` follows;
- fd: the relaxed objective's own slope by central differences (step --h).

Per line and temperature: the Spearman rank correlation of relaxed and hard over the
grid, and at each interior grid point whether the sign of grad matches the sign of the
hard objective's change between the neighbouring grid points (counted only where that
change exceeds --min-gap, since the hard objective is piecewise constant).

    python experiments/relaxation_sweep.py [--machines 200] [--trials 2] [--temperatures 0.1,0.3,1] [--quick]
"""

from __future__ import annotations

import argparse
import os
import sys
import time

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from jaxsched.evolve import Problem, fitness  # noqa: E402
from jaxsched.output import write_json_atomic  # noqa: E402
from jaxsched.policies import ALPHA_EVOLVE_GENOME, GENOME_NAMES  # noqa: E402
from jaxsched.relax import RelaxConfig, relaxed_objective  # noqa: E402
from jaxsched.synthetic import synthetic_instance  # noqa: E402

from benchlib import hardware  # noqa: E402

LINES = {  # coordinate -> grid of t (added to alpha_evolve's value)
    "w4": [-4.0, -3.0, -2.0, -1.0, 0.0, 1.0, 2.0, 3.0, 4.0],
    "w5": [-4.0, -2.0, -1.0, 0.0, 1.0, 2.0, 4.0],
    "p2": [-0.75, -0.5, -0.25, 0.0, 0.5, 1.0, 2.0],
}


def spearman(x, y) -> float:
    """Rank correlation (average ranks for ties)."""
    def ranks(v):
        v = np.asarray(v, np.float64)
        order = np.argsort(v, kind="stable")
        r = np.empty(len(v))
        r[order] = np.arange(len(v), dtype=np.float64)
        for value in np.unique(v):
            r[v == value] = r[v == value].mean()
        return r
    rx, ry = ranks(x), ranks(y)
    if rx.std() == 0 or ry.std() == 0:
        return float("nan")
    return float(np.corrcoef(rx, ry)[0, 1])


def sweep_line(problem, base, k, grid, trials, cfg, h):
    """Rows (t, genome, hard, relaxed, grad, fd) along alpha_evolve + t e_k."""
    rows = []
    for t in grid:
        g = base.copy()
        g[k] += np.float32(t)
        hard = float(fitness(problem, g, trials, 1).mean())
        relaxed, grad = relaxed_objective(problem, g, trials=trials, seed=1, cfg=cfg, grad=True)
        e = np.zeros_like(g)
        e[k] = h
        fd = (relaxed_objective(problem, g + e, trials, 1, cfg) - relaxed_objective(problem, g - e, trials, 1, cfg))
        rows.append({"t": t, "genome": g.tolist(), "hard": hard, "relaxed": relaxed, "grad": float(grad[k]),
                     "fd": fd / (2 * h)})
    return rows


def agreement(rows, min_gap):
    """(matches, counted): interior points where sign(grad) = sign(hard[i+1] - hard[i-1])."""
    hard = np.array([r["hard"] for r in rows])
    grad = np.array([r["grad"] for r in rows[1:-1]])
    change = hard[2:] - hard[:-2]
    counted = np.abs(change) > min_gap
    return int(np.sum(np.sign(grad[counted]) == np.sign(change[counted]))), int(counted.sum())


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--machines", type=int, default=200)
    ap.add_argument("--rho", type=float, default=1.0)
    ap.add_argument("--trials", type=int, default=2)
    ap.add_argument("--temperatures", default="0.1,0.3,1")
    ap.add_argument("--sharpness", type=float, default=RelaxConfig.sharpness)
    ap.add_argument("--h", type=float, default=0.1, help="finite-difference step of fd")
    ap.add_argument("--min-gap", type=float, default=1e-3, help="hard change counted in the sign agreement")
    ap.add_argument("--quick", action="store_true", help="80 machines, 1 trial, the w4 line only")
    ap.add_argument("--out", default="results/relaxation_sweep.json")
    a = ap.parse_args()
    lines = dict(LINES)
    if a.quick:
        a.machines, a.trials, lines = 80, 1, {"w4": LINES["w4"]}
    temperatures = [float(x) for x in a.temperatures.split(",")]
    problem = Problem(*synthetic_instance(a.machines, a.rho, 1))
    base = np.asarray(ALPHA_EVOLVE_GENOME, np.float32)
    t0 = time.perf_counter()
    print(f"relaxation sweep: synthetic {a.machines} machines x {problem.workload.num_tasks} tasks at rho {a.rho}, "
          f"{a.trials} trials, sharpness {a.sharpness:g}, temperatures {temperatures}; genome = alpha_evolve + t e_k; "
          f"{hardware()['cpu']}")
    doc = {"experiment": "relaxation_sweep", "hardware": hardware(), "machines": a.machines, "rho": a.rho,
           "tasks": problem.workload.num_tasks, "trials": a.trials, "sharpness": a.sharpness, "h": a.h,
           "min_gap": a.min_gap, "runs": []}
    for tau in temperatures:
        cfg = RelaxConfig(temperature=tau, sharpness=a.sharpness)
        for coord, grid in lines.items():
            k = GENOME_NAMES.index(coord)
            rows = sweep_line(problem, base, k, grid, a.trials, cfg, a.h)
            agree, counted = agreement(rows, a.min_gap)
            rho_s = spearman([r["relaxed"] for r in rows], [r["hard"] for r in rows])
            doc["runs"].append({"temperature": tau, "coordinate": coord, "spearman": rho_s, "sign_agree": agree,
                                "sign_counted": counted, "rows": rows})
            print(f"\ntemperature {tau:g}, line {coord} = {base[k]:g} + t")
            print(f"{'t':>6}  {'hard%':>8}  {'relaxed%':>8}  {'grad':>10}  {'fd':>10}")
            for r in rows:
                print(f"{r['t']:6.2f}  {100 * r['hard']:8.3f}  {100 * r['relaxed']:8.3f}  {r['grad']:10.5f}  "
                      f"{r['fd']:10.5f}")
            print(f"Spearman(relaxed, hard) = {rho_s:.2f}; sign(grad) = sign(hard change) at {agree}/{counted} "
                  f"interior points where the change exceeds {a.min_gap:g}")
    print("\nsummary: temperature, line, Spearman, sign agreement")
    for tau in temperatures:
        runs = [r for r in doc["runs"] if r["temperature"] == tau]
        agree, counted = sum(r["sign_agree"] for r in runs), sum(r["sign_counted"] for r in runs)
        print(f"  {tau:g}: " + "; ".join(f"{r['coordinate']} {r['spearman']:.2f} {r['sign_agree']}/{r['sign_counted']}"
                                         for r in runs) + f"; all lines {agree}/{counted}")
    doc["wall_s"] = time.perf_counter() - t0
    write_json_atomic(a.out, doc)
    print(f"\n{doc['wall_s']:.0f}s; wrote {a.out}")


if __name__ == "__main__":
    main()
