"""CvxCluster's gap to the proven bound over a family of instances, not one benchmark.

For each instance: CvxCluster's objective (`allocate`, the default PriceConfig) against the
best proven bound on the integer optimum, min(HiGHS LP optimum, HiGHS MIP bound); the gap
is 1 - objective / bound, an upper bound on the true gap to the optimum. The MIP (a
--mip-time-limit each) runs where the LP leaves a gap over --mip-above, to tighten it.

Kinds, each over sizes x loads x seeds of `synthetic_problem`:
- full: machine types, GPU servers, anti-affinity groups (the benchmark's kind);
- no_types, no_gpus, no_groups: one feature off;
- gpu_only: only the GPU servers and the GPU-demanding tasks;
- partly_used: 40% of the tasks already placed by CvxCluster itself, the rest to place on
  what is left, their group members held where they run;
- fragmented: 50% of the tasks already placed at random feasible servers (fragmented free
  capacity), members held;
- gpu_fragmented: gpu_only, fragmented.

With --isa, every instance is also run in a child process under
XLA_FLAGS=--xla_cpu_max_isa=ISA (e.g. AVX), and the two objectives are compared.

    python experiments/cvx_gap_family.py [--quick] [--isa AVX] [--out results/cvx_gap_family.json]
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import os
import subprocess
import sys
import time

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from jaxsched.cvx import allocate, check_placement, objective, solve_lp, solve_mip, synthetic_problem  # noqa: E402
from jaxsched.cvx.problem import ANY_TYPE  # noqa: E402
from jaxsched.output import write_json_atomic  # noqa: E402

from benchlib import hardware  # noqa: E402

KINDS = ("full", "no_types", "no_gpus", "no_groups", "gpu_only", "partly_used", "fragmented", "gpu_fragmented")


def servers(problem, keep):
    keep = np.flatnonzero(keep)
    return dataclasses.replace(problem, capacity=problem.capacity[keep], free=problem.free[keep],
                               server_type=problem.server_type[keep])


def gpu_only(problem):
    p = servers(problem, problem.capacity[:, 2] > 0)
    return p.tasks(np.flatnonzero(problem.demand[:, 2] > 0))


def random_fit(problem, rs):
    """Each task in turn at a random server it fits (type, capacity, one member of a group per server)."""
    free = problem.free.astype(np.float64).copy()
    used = set()
    placement = np.full(problem.num_tasks, -1, np.int32)
    for i in rs.permutation(problem.num_tasks):
        ok = np.all(problem.demand[i] <= free + 1e-6, axis=1)
        if problem.task_type[i] != ANY_TYPE:
            ok &= problem.server_type == problem.task_type[i]
        g = int(problem.group[i])
        if g >= 0:
            ok &= np.array([(g, j) not in used for j in range(len(free))])
        if ok.any():
            j = int(rs.choice(np.flatnonzero(ok)))
            placement[i] = j
            free[j] -= problem.demand[i]
            if g >= 0:
                used.add((g, j))
    return placement


def partly_used(problem, share, seed, how):
    """The tasks not in a random `share`, on the servers left after that share was placed
    (`how`: by CvxCluster, or at random), the placed members of each group held."""
    rs = np.random.default_rng([seed, 11])
    pre = rs.random(problem.num_tasks) < share
    first = problem.tasks(np.flatnonzero(pre))
    placement = allocate(first, seed=seed).placement if how == "cvx" else random_fit(first, rs)
    on = placement >= 0
    free = problem.free.astype(np.float64).copy()
    np.subtract.at(free, placement[on], first.demand[on])
    grouped = on & (first.group >= 0)
    rest = problem.tasks(np.flatnonzero(~pre))
    return dataclasses.replace(rest, free=np.maximum(free, 0).astype(np.float32),
                               held_group=first.group[grouped].astype(np.int32),
                               held_server=placement[grouped].astype(np.int32))


def instance(kind, M, rho, seed):
    flags = dict(types=kind != "no_types", gpus=kind != "no_gpus", anti_affinity=kind != "no_groups")
    problem, _ = synthetic_problem(M, rho, seed, **flags)
    if kind in ("gpu_only", "gpu_fragmented"):
        problem = gpu_only(problem)
    if kind == "partly_used":
        problem = partly_used(problem, 0.4, seed, "cvx")
    if kind in ("fragmented", "gpu_fragmented"):
        problem = partly_used(problem, 0.5, seed, "random")
    return problem


def grid(quick):
    sizes = (24, 60) if quick else (24, 60, 150)
    loads = (0.9, 2.0) if quick else (0.9, 1.3, 2.0)
    seeds = (0, 1)
    return [(k, M, rho, s) for k in KINDS for M in sizes for rho in loads for s in seeds]


def cvx_objectives(cases):
    """CvxCluster's objective on each case (run in this process)."""
    out = []
    for kind, M, rho, seed in cases:
        p = instance(kind, M, rho, seed)
        out.append(float(allocate(p, seed=seed).objective) if p.num_tasks else 0.0)
    return out


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true", help="2 sizes x 2 loads x 2 seeds per kind")
    ap.add_argument("--mip-time-limit", type=float, default=20.0)
    ap.add_argument("--mip-above", type=float, default=0.02, help="run the MIP where the LP gap exceeds this")
    ap.add_argument("--isa", help="also run every instance under XLA_FLAGS=--xla_cpu_max_isa=ISA")
    ap.add_argument("--child", help=argparse.SUPPRESS)  # JSON list of cases: print their objectives
    ap.add_argument("--out", default="results/cvx_gap_family.json")
    args = ap.parse_args()
    if args.child:
        print(json.dumps(cvx_objectives([tuple(c) for c in json.loads(args.child)])))
        return
    cases = grid(args.quick)
    other = None
    if args.isa:
        env = dict(os.environ, XLA_FLAGS=f"{os.environ.get('XLA_FLAGS', '')} --xla_cpu_max_isa={args.isa}".strip())
        text = subprocess.run([sys.executable, __file__, "--child", json.dumps(cases)], env=env, check=True,
                              capture_output=True, text=True).stdout
        other = json.loads(text.strip().splitlines()[-1])
    rows = []
    t0 = time.perf_counter()
    for n, (kind, M, rho, seed) in enumerate(cases):
        p = instance(kind, M, rho, seed)
        if p.num_tasks == 0:
            continue
        alloc = allocate(p, seed=seed)
        check_placement(p, alloc.placement)
        obj = float(objective(p, alloc.placement))
        lp = solve_lp(p)
        bound, mip_bound, mip_best = lp.objective, None, None
        if bound > 0 and 1 - obj / bound > args.mip_above:
            mip = solve_mip(p, args.mip_time_limit)
            mip_best = mip.objective if mip.found else None
            if np.isfinite(mip.bound):
                mip_bound = mip.bound
                bound = min(bound, mip.bound)
        row = dict(kind=kind, machines=M, rho=rho, seed=seed, servers=p.num_servers, tasks=p.num_tasks,
                   held=int(len(p.held_group)), objective=obj, lp=lp.objective, mip_bound=mip_bound,
                   mip_best=mip_best, bound=bound, gap=1 - obj / bound if bound > 0 else 0.0)
        if other is not None:
            row["objective_" + args.isa] = other[n]
        rows.append(row)
        print(f"{kind:15s} M={M:4d} rho={rho:.1f} s={seed} servers={p.num_servers:4d} tasks={p.num_tasks:6d} "
              f"held={row['held']:4d} gap={100 * row['gap']:.2f}%"
              + (f" (LP {100 * (1 - obj / lp.objective):.2f}%, MIP best {mip_best} of bound {mip_bound:.1f})"
                 if mip_bound is not None else "")
              + (f" {args.isa} objective {other[n] - obj:+.3f}" if other is not None else ""), flush=True)
    summary = {}
    for kind in KINDS + ("all",):
        sel = [r for r in rows if kind in ("all", r["kind"])]
        if sel:
            worst = max(sel, key=lambda r: r["gap"])
            summary[kind] = dict(instances=len(sel), mean_gap=float(np.mean([r["gap"] for r in sel])),
                                 worst_gap=worst["gap"], worst=f"{worst['kind']} M={worst['machines']} "
                                 f"rho={worst['rho']} seed={worst['seed']}")
    print("\nkind             instances  mean gap  worst gap  worst case")
    for kind, s in summary.items():
        print(f"{kind:15s} {s['instances']:10d} {100 * s['mean_gap']:8.2f}% {100 * s['worst_gap']:9.2f}%  {s['worst']}")
    if other is not None:
        diff = [r for r in rows if r["objective_" + args.isa] != r["objective"]]
        print(f"\n{len(diff)} of {len(rows)} instances give another objective under --xla_cpu_max_isa={args.isa}; "
              f"largest change {max((abs(r['objective_' + args.isa] - r['objective']) / r['bound'] for r in diff), default=0):.3%} of the bound")
    doc = dict(benchmark="cvx_gap_family", hardware=hardware(), seconds=time.perf_counter() - t0,
               mip_time_limit=args.mip_time_limit, mip_above=args.mip_above, isa=args.isa, summary=summary,
               rows=rows)
    write_json_atomic(args.out, doc)
    print(f"wrote {args.out}")


if __name__ == "__main__":
    main()
