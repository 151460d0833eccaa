"""`jaxsched cvx`: CvxCluster on a snapshot (optionally checked against HiGHS) or in online rounds."""

from __future__ import annotations

import argparse
from typing import Any

import numpy as np

from .common import check_writable, describe_devices, envelope, printer, settings_doc, write_result
from .config import UsageError, resolve
from .options import JSON, MACHINES, RHO, SEED, TRACE_ONLY, TRACE_OPTIONS, TRIALS, Option, dest_flag, flag, \
    float_list, positive_float, positive_int
from .workloads import load_trace, replay_workload, trace_snapshot

OPTIONS = (
    MACHINES.but(default=785, help="synthetic cluster size (servers)"),
    RHO.but(default=1.2, help="synthetic load in (0, 10] (snapshot: total demand / capacity in the binding dimension; "
            "--online: offered load of the one-day arrival stream)"),
    SEED.but(help="random seed of the workload and of the server draws"),
    TRIALS.but(default=1, help="allocations with different random server draws"),
    Option("no-gpus", flag, False, "synthetic: no GPU dimension (default: 10% GPU servers, 5% GPU tasks)"),
    Option("no-types", flag, False, "synthetic: no machine types (default: 2 types, 10% of tasks pinned to one)"),
    Option("no-anti-affinity", flag, False, "synthetic: no anti-affinity (default: 10% of tasks in jobs of "
           "2-16 that need distinct servers)"),
    Option("replicate", positive_int, 1, "proportional growth: N disjoint copies of the servers and tasks "
           "(785 x 128 = 100,480 servers)", "N"),
    Option("gap-tol", positive_float, 2e-3, "stage 1 stops when (dual - primal) / tasks <= this, in utility "
           "units (a free-band task is worth 1)", "X"),
    Option("max-iters", positive_int, 1000, "stage 1: at most this many dual steps (not converging is reported)",
           "N"),
    Option("exact", flag, False, "also solve the LP exactly and the integer problem with HiGHS (the MIP stops "
           "at --mip-time-limit and reports its bound)"),
    Option("mip-time-limit", positive_float, 60.0, "seconds for the HiGHS MIP", "S"),
    Option("online", flag, False, "rounds over the arriving task queue instead of one snapshot"),
    Option("rate-multiplier", float_list, (1.0,), "--online: arrival-rate multipliers, one run each", "X,.."),
    Option("round-s", positive_float, 1.0, "--online: simulated seconds between rounds", "S"),
    Option("max-rounds", positive_int, None, "--online: stop each run after this many rounds (reported)", "N"),
    JSON.but(help="write the results as JSON (atomically)"),
) + TRACE_OPTIONS
SYNTHETIC_ONLY = ("machines", "rho", "no_gpus", "no_types", "no_anti_affinity")
ONLINE_ONLY = ("rate_multiplier", "round_s", "max_rounds")


HELP = "CvxCluster: LP prices by JAX dual descent, then price-driven greedy placement"
DESCRIPTION = ("Allocate a snapshot (or, with --online, an arriving queue in rounds) with CvxCluster "
               "(Nnorom, Boyd, Levis 2026): shadow prices of the LP relaxation over server shapes from"
               " a JAX first-order dual method, then a greedy placement by net utility with machine "
               "types, GPUs and anti-affinity; --exact checks it against HiGHS.")


def _check(s: dict[str, Any], given: set[str]) -> None:
    if s["trace_dir"]:
        wrong = [k for k in SYNTHETIC_ONLY if k in given]
        if wrong:
            raise UsageError(f"{dest_flag(wrong[0])} is for the synthetic workload, not with --trace-dir")
    else:
        wrong = [k for k in TRACE_ONLY if k in given]
        if wrong:
            raise UsageError(f"{dest_flag(wrong[0])} needs --trace-dir")
    if not s["online"]:
        wrong = [k for k in ONLINE_ONLY if k in given]
        if wrong:
            raise UsageError(f"{dest_flag(wrong[0])} needs --online")
    elif s["exact"]:
        raise UsageError("--exact checks one snapshot; it does not combine with --online")
    if any(m <= 0 for m in s["rate_multiplier"]):
        raise UsageError("--rate-multiplier: every multiplier must be > 0")


def _problem(s: dict[str, Any], quiet: bool):
    """(problem, workload or None, JSON description) of the cvx settings."""
    from ..cvx import aggregate, from_snapshot, replicate, synthetic_problem

    if not s["trace_dir"]:
        problem, workload = synthetic_problem(s["machines"], s["rho"], s["seed"], gpus=not s["no_gpus"],
                                              types=not s["no_types"], anti_affinity=not s["no_anti_affinity"],
                                              event=s["online"])
        doc = {"source": "synthetic", "machines": s["machines"], "rho": s["rho"], "seed": s["seed"]}
    elif s["online"]:
        cluster, workload, doc = replay_workload(s, quiet)
        problem = from_snapshot(cluster, workload)
    else:
        trace, filters = load_trace(s, quiet)
        cluster, workload, doc = trace_snapshot(s, trace, filters, s["at"] or trace.default_instant)
        problem = from_snapshot(cluster, workload)
    if s["replicate"] > 1:
        problem = replicate(problem, s["replicate"])
        workload = None if workload is None else workload.tile(s["replicate"])
    doc.update(servers=problem.num_servers, tasks=problem.num_tasks, resources=list(problem.resources),
               shapes=len(aggregate(problem).count), anti_affinity_groups=problem.num_groups,
               machine_types=int(problem.server_type.max()) + 1, replicate=s["replicate"])
    return problem, workload, doc


def _online(s, args, problem, workload, cfg, say) -> list[dict]:
    from .. import progress
    from ..cvx import run_online

    runs = []
    for mult in s["rate_multiplier"]:
        bar = None if args.quiet else progress.maybe(f"online x{mult:g}")
        r = run_online(problem, workload.arrival, workload.duration, mult, s["round_s"], s["seed"], cfg,
                       s["max_rounds"], progress=bar)
        x = r.summary()
        runs.append(x)
        say(f"x{mult:g}: {x['rounds']} rounds, placed {x['placed']}/{x['tasks']}, {x['tasks_per_s']:,.0f} "
            f"tasks/s, solve {1e3 * x['solve_s_mean']:.0f} ms mean / {1e3 * x['solve_s_max']:.0f} ms max "
            f"({x['compile_rounds']} rounds with compilation left out), "
            f"queue {x['queue_mean']:.0f} mean / {x['queue_max']} max, latency p50 {x['latency_s_p50']:.1f} s "
            f"p99 {x['latency_s_p99']:.1f} s; {x['stop_reason']}")
    return runs


def _snapshot(s, problem, cfg, say, doc) -> None:
    from ..cvx import allocate, exact_summary, solve_lp, solve_mip, summarize

    allocs = [allocate(problem, s["seed"], t, cfg) for t in range(s["trials"])]
    x = doc["cvxcluster"] = summarize(problem, allocs, s["gap_tol"])
    dual, objs = x["dual"], x["objective"]
    say(f"stage 1: dual {dual:.2f}, primal {x['primal']:.2f}, {x['iterations']} steps, "
        f"{allocs[0].price_seconds:.2f} s (first call includes compilation)"
        + ("" if x["converged"] else f"; NOT converged to --gap-tol {s['gap_tol']:g} within --max-iters"))
    say(f"stage 2: objective {np.mean(objs):.1f} (mean of {len(objs)}), {100 * np.mean(objs) / dual:.2f}% of the "
        f"dual bound, placed {np.mean(x['placed']):.0f}/{problem.num_tasks}, "
        f"{np.median(x['place_seconds']):.3f} s")
    if s["exact"]:
        lp, mip = solve_lp(problem), solve_mip(problem, s["mip_time_limit"])
        doc["exact"] = exact_summary(lp, mip)
        best_bound = min(lp.objective, mip.bound)
        say(f"HiGHS LP: {lp.objective:.2f} in {lp.seconds:.2f} s (JAX dual {100 * (dual / lp.objective - 1):+.3f}%)")
        gap = f"CvxCluster within {100 * (1 - np.mean(objs) / best_bound):.2f}% of the best bound " \
              f"({best_bound:.1f}, the {'LP' if best_bound == lp.objective else 'MIP'}'s)" if best_bound > 0 else ""
        if mip.found:
            say(f"HiGHS MIP: {'optimal' if mip.optimal else 'best found'} {mip.objective:.1f}, bound "
                f"{mip.bound:.1f}, {mip.seconds:.1f} s ({mip.status}); {gap}")
        else:
            say(f"HiGHS MIP: found no solution in {mip.seconds:.1f} s ({mip.status}); {gap}")


def run(args: argparse.Namespace) -> int:
    """Allocate with CvxCluster: one snapshot (optionally checked against HiGHS) or online rounds."""
    s, given = resolve(args, "cvx", OPTIONS)
    _check(s, given)
    check_writable(s["json"])
    from ..cvx import PriceConfig

    say = printer(args.quiet)
    cfg = PriceConfig(gap_tol=s["gap_tol"], max_iters=s["max_iters"], anneal_iters=min(500, s["max_iters"]))
    problem, workload, source = _problem(s, args.quiet)
    say(f"cvx: {source['source']}, {problem.num_servers} servers in {source['shapes']} shapes, "
        f"{problem.num_tasks} tasks, resources {','.join(problem.resources)}, {problem.num_groups} anti-affinity "
        f"groups, {source['machine_types']} machine type(s), {describe_devices()}")
    doc = envelope("cvx", args, settings_doc(s, drop_unused=False), workload=source)
    if s["online"]:
        doc["online"] = _online(s, args, problem, workload, cfg, say)
    else:
        _snapshot(s, problem, cfg, say, doc)
    write_result(s["json"], doc)
    if s["json"]:
        say(f"wrote {s['json']}")
    return 0
