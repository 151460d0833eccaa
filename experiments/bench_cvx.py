"""Benchmark: CvxCluster against exact HiGHS solvers, at scale, online, and next to the policies.

All parts in one run on this machine (workloads: jaxsched.cvx.instances.synthetic_problem,
with machine types, GPU servers and anti-affinity unless noted):

1. vs the exact MIP: on --mip-instances instances of about 1,000 tasks x 50 servers
   (synthetic 50 servers at rho 1.3, seeds 1..), CvxCluster's objective and wall time
   (stages 1 + 2, median of --repeats after a compiling call) against HiGHS MIP with a
   --mip-time-limit: gap to HiGHS's best solution and to the best proven bound (min of
   the LP optimum and HiGHS's MIP bound), and the speed ratio. Where HiGHS stops at its
   time limit, the ratio is against that limit: say so in any figure quoted.
2. price stage vs HiGHS LP: the same aggregated LP on the 785-server instance (rho 1.2):
   stage-1 time (median of --repeats) and dual objective against HiGHS's LP optimum and time.
3. scale: 128 copies of the 785-server instance (100,480 servers, 1.59 M tasks,
   proportional growth): one allocation after a first (compiling) one, reported
   separately: stage times and placement throughput (tasks/s of stage 2).
4. online: the 785-server cluster with the one-day arrival stream at offered load 0.9,
   rounds of 1 s at each --multipliers, --max-rounds rounds each: tasks/s, solve time per
   round (rounds with compilation left out), queue.
5. packing quality: the plain synthetic 785-machine snapshot at rho 1.2 (CPU, memory;
   no types or anti-affinity, which the scoring policies do not know): placed and
   priority-weighted objective of CvxCluster, best_fit and alpha_evolve, 3 trials.
6. online at scale: 128 copies of part 4's cluster and of its first hour of arrivals
   (100,480 servers), multipliers --large-multipliers, --large-rounds rounds each.

    python experiments/bench_cvx.py [--repeats 3] [--mip-time-limit 60] [--quick] [--out FILE]
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from jaxsched.cvx import (aggregate, allocate, band_weights, check_placement,  # noqa: E402
                          replicate, run_online, solve_lp, solve_mip, solve_prices, synthetic_problem)
from jaxsched.output import write_json_atomic  # noqa: E402
from jaxsched.snapshot import SnapshotConfig, run_snapshot  # noqa: E402
from jaxsched.synthetic import synthetic_instance  # noqa: E402

from benchlib import hardware  # noqa: E402


def median_time(fn, repeats):
    out, times = None, []
    for _ in range(repeats):
        t = time.perf_counter()
        out = fn()
        times.append(time.perf_counter() - t)
    return out, statistics.median(times)


def vs_mip(args):
    rows = []
    for seed in range(1, args.mip_instances + 1):
        p, _ = synthetic_problem(50, 1.3, seed)
        allocate(p, seed=seed)  # compile
        a, t_cvx = median_time(lambda: allocate(p, seed=seed), args.repeats)
        check_placement(p, a.placement)
        lp = solve_lp(p)
        mip = solve_mip(p, time_limit=args.mip_time_limit)
        check_placement(p, mip.placement)
        bound = min(lp.objective, mip.bound)
        rows.append({"seed": seed, "tasks": p.num_tasks, "servers": p.num_servers, "cvx_objective": a.objective,
                     "cvx_seconds": t_cvx, "mip_objective": mip.objective, "mip_bound": mip.bound,
                     "mip_optimal": mip.optimal, "mip_seconds": mip.seconds, "lp_objective": lp.objective,
                     "gap_to_mip_pct": 100 * (1 - a.objective / mip.objective) if mip.objective else float("nan"),
                     "gap_to_bound_pct": 100 * (1 - a.objective / bound), "speed_ratio": mip.seconds / t_cvx})
        r = rows[-1]
        print(f"  seed {seed}: {r['tasks']} tasks x {r['servers']} servers: CvxCluster {a.objective:.0f} in "
              f"{t_cvx * 1e3:.0f} ms; HiGHS MIP {'optimal' if mip.optimal else 'best'} {mip.objective:.0f} "
              f"(bound {mip.bound:.1f}) in {mip.seconds:.1f} s; LP bound {lp.objective:.1f}; CvxCluster "
              f"{r['gap_to_mip_pct']:+.2f}% vs the MIP's solution, within {r['gap_to_bound_pct']:.2f}% of the best "
              f"bound; {r['speed_ratio']:.0f}x faster{'' if mip.optimal else ' (HiGHS stopped at its time limit)'}",
              flush=True)
    return rows


def vs_lp(args):
    p, _ = synthetic_problem(200 if args.quick else 785, 1.2, 1)
    shapes = aggregate(p)
    solve_prices(p, shapes).dual.block_until_ready()  # compile
    pr, t_jax = median_time(lambda: solve_prices(p, shapes)._replace(dual=solve_prices(p, shapes).dual), 1)
    _, t_jax = median_time(lambda: solve_prices(p, shapes).dual.block_until_ready(), args.repeats)
    lp = solve_lp(p, shapes)
    out = {"tasks": p.num_tasks, "servers": p.num_servers, "shapes": len(shapes.count), "jax_seconds": t_jax,
           "jax_dual": float(pr.dual), "jax_iterations": int(pr.iterations), "highs_seconds": lp.seconds,
           "highs_objective": lp.objective, "dual_over_lp_pct": 100 * (float(pr.dual) / lp.objective - 1),
           "speed_ratio": lp.seconds / t_jax}
    print(f"  {p.num_tasks} tasks, {len(shapes.count)} shapes: JAX dual {float(pr.dual):.1f} ({out['jax_iterations']} "
          f"steps) in {t_jax:.2f} s; HiGHS LP {lp.objective:.1f} in {lp.seconds:.2f} s; dual "
          f"{out['dual_over_lp_pct']:+.3f}% of the optimum; {out['speed_ratio']:.1f}x faster", flush=True)
    return out


def scale(args):
    base, _ = synthetic_problem(785, 1.2, 1)
    copies = 8 if args.quick else 128
    p = replicate(base, copies)
    t = time.perf_counter()
    allocate(p, seed=1)
    first = time.perf_counter() - t
    a = allocate(p, seed=1)
    check_placement(p, a.placement)
    out = {"servers": p.num_servers, "tasks": p.num_tasks, "groups": p.num_groups, "first_call_seconds": first,
           "price_seconds": a.price_seconds, "price_iterations": int(a.prices.iterations),
           "place_seconds": a.place_seconds, "place_tasks_per_s": p.num_tasks / a.place_seconds,
           "objective_over_dual": a.objective / float(a.prices.dual), "placed": int(np.sum(a.placement >= 0))}
    print(f"  {p.num_servers:,} servers, {p.num_tasks:,} tasks, {p.num_groups:,} anti-affinity groups: stage 1 "
          f"{a.price_seconds:.1f} s ({out['price_iterations']} steps), stage 2 {a.place_seconds:.1f} s = "
          f"{out['place_tasks_per_s']:,.0f} tasks/s; objective {100 * out['objective_over_dual']:.2f}% of the dual "
          f"bound; first call (with compilation) {first:.1f} s", flush=True)
    return out


def online(args):
    p, w = synthetic_problem(785, 0.9, 1, event=True)
    rows = []
    for m in args.multipliers:
        r = run_online(p, w.arrival, w.duration, rate_multiplier=m, round_s=1.0, max_rounds=args.max_rounds)
        s = r.summary()
        rows.append(s)
        print(f"  x{m:g}: {s['rounds']} rounds, placed {s['placed']:,}, {s['tasks_per_s']:,.0f} tasks/s, solve "
              f"{1e3 * s['solve_s_mean']:.0f} ms mean / {1e3 * s['solve_s_max']:.0f} ms max per round "
              f"({s['compile_rounds']} compiling rounds left out), queue {s['queue_mean']:,.0f} mean / "
              f"{s['queue_max']:,} max", flush=True)
    return rows


def online_large(args):
    base, w = synthetic_problem(785, 0.9, 1, event=True)
    first_hour = np.flatnonzero(np.asarray(w.arrival) < 3600.0)
    copies = 8 if args.quick else 128
    p = replicate(base.tasks(first_hour), copies)
    arrival = np.tile(np.asarray(w.arrival)[first_hour], copies)
    duration = np.tile(np.asarray(w.duration)[first_hour], copies)
    rows = []
    for m in args.large_multipliers:
        r = run_online(p, arrival, duration, rate_multiplier=m, round_s=1.0, max_rounds=args.large_rounds)
        s = dict(r.summary(), servers=p.num_servers)
        rows.append(s)
        print(f"  {p.num_servers:,} servers, x{m:g}: {s['rounds']} rounds, placed {s['placed']:,}, "
              f"{s['tasks_per_s']:,.0f} tasks/s, solve {1e3 * s['solve_s_mean']:.0f} ms mean / "
              f"{1e3 * s['solve_s_max']:.0f} ms max per round ({s['compile_rounds']} compiling rounds left out), "
              f"queue {s['queue_mean']:,.0f} mean / {s['queue_max']:,} max", flush=True)
    return rows


def quality(args):
    cluster, workload = synthetic_instance(785, 1.2, 1)
    res = run_snapshot(cluster, workload, SnapshotConfig(("best_fit", "alpha_evolve", "cvxcluster"), trials=3, seed=1))
    u = band_weights(workload.priority).astype(np.float64)
    out = {}
    for p, name in enumerate(res.policies):
        obj = [float(u[res.placement[p, t] >= 0].sum()) for t in range(res.placement.shape[1])]
        out[name] = {"placed_fraction": float(np.mean(res.metrics.placed_fraction[p])),
                     "placed_weighted": float(np.mean(res.metrics.placed_weighted[p])),
                     "priority_objective": float(np.mean(obj)), "objective_share": float(np.mean(obj) / u.sum())}
        print(f"  {name:12s} placed {100 * out[name]['placed_fraction']:.2f}%, demand-weighted "
              f"{100 * out[name]['placed_weighted']:.2f}%, priority-weighted objective "
              f"{out[name]['priority_objective']:.0f} ({100 * out[name]['objective_share']:.2f}% of all)", flush=True)
    return out


PARTS = (
    ("1", "vs_mip", vs_mip, "CvxCluster vs HiGHS MIP (about 1,000 tasks x 50 servers)"),
    ("2", "vs_lp", vs_lp, "price stage vs HiGHS LP (aggregated LP, 785 servers)"),
    ("3", "scale", scale, "scale (785-server instance x copies)"),
    ("4", "online", online, "online rounds (785 servers, offered load 0.9, 1 s rounds)"),
    ("5", "quality", quality, "packing quality on the plain 785-machine snapshot, rho 1.2, 3 trials"),
    ("6", "online_large", online_large,
     "online rounds at scale (128 copies of part 4's cluster and first hour of arrivals)"),
)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--mip-instances", type=int, default=3)
    ap.add_argument("--mip-time-limit", type=float, default=60.0)
    ap.add_argument("--multipliers", type=lambda v: [float(x) for x in v.split(",")], default=[100, 1000, 10000])
    ap.add_argument("--max-rounds", type=int, default=60)
    ap.add_argument("--large-multipliers", type=lambda v: [float(x) for x in v.split(",")], default=[10, 100])
    ap.add_argument("--large-rounds", type=int, default=20)
    ap.add_argument("--parts", default="1,2,3,4,5,6", help="which parts to run (see the docstring)")
    ap.add_argument("--quick", action="store_true", help="small sizes (200 servers for the LP, 8 copies), to check "
                    "the script runs")
    ap.add_argument("--out", default="results/bench_cvx.json")
    args = ap.parse_args()
    if args.quick:
        args.repeats, args.mip_instances, args.mip_time_limit, args.max_rounds = 1, 1, 5.0, 10
        args.multipliers = [1000]
        args.large_multipliers, args.large_rounds = [100], 5
    hw = hardware()
    print(f"bench_cvx: {hw['cpu']}, {hw['cores']} cores, JAX {hw['jax']} on {hw['devices']} {hw['backend']} "
          f"device(s)", flush=True)
    doc = {"benchmark": "cvx", "hardware": hw, "settings": vars(args)}
    parts = args.parts.split(",")
    for number, key, run, title in PARTS:
        if number in parts:
            print(f"{number}. {title}:")
            doc[key] = run(args)
    if all(k in doc for k in ("vs_mip", "vs_lp", "scale")):
        mips = doc["vs_mip"]
        print(f"summary: CvxCluster within {max(r['gap_to_bound_pct'] for r in mips):.2f}% of the best proven bound "
              f"(worst of {len(mips)}), {statistics.median(r['speed_ratio'] for r in mips):.0f}x faster than HiGHS "
              f"MIP (median); price stage {doc['vs_lp']['speed_ratio']:.1f}x faster than HiGHS LP; "
              f"{doc['scale']['place_tasks_per_s']:,.0f} tasks/s placed at {doc['scale']['servers']:,} servers")
    if args.out:
        write_json_atomic(args.out, doc)
        print(f"wrote {args.out}")


if __name__ == "__main__":
    main()
