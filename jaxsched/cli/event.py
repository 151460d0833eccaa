"""`jaxsched event`: replay the arrival stream through a discrete-event scheduler."""

from __future__ import annotations

import argparse
import time

import numpy as np

from .common import check_memory, check_sources, check_writable, describe_devices, envelope, printer, \
    settings_doc, synthetic_tasks, write_result
from .config import UsageError, resolve
from .options import GENOME, JSON, MACHINES, POLICY, POLICY_FILE, POLICY_PARAMS, RHO, SAMPLE_K, SEED, SLOT, \
    TRACE_WINDOW_OPTIONS, TRIALS, Option, band_weightings, dest_flag, flag, path, positive_float, positive_int
from .workloads import policies_and_genome, replay_workload

OPTIONS = (
    MACHINES,
    RHO.but(help="synthetic offered load in (0, 10]: tasks are drawn until total demand x mean duration / the one-day "
            "arrival horizon reaches RHO of capacity in the binding dimension"),
    TRIALS.but(default=1, help="replays per policy, each with its own random draws (common random numbers "
               "across policies)"),
    POLICY.but(default="best_fit,alpha_evolve", help="comma-separated policies, or 'all'; 'cvxcluster' adds "
               "CvxCluster's allocation rounds beside them (not part of 'all')"),
    POLICY_FILE, POLICY_PARAMS,
    SAMPLE_K.but(default=64, help="score K machines drawn at random per try; an arrival whose draws all miss gets "
                 "a full scan, a retry from the queue does not (0: always full scan)"),
    Option("preempt", flag, False, "Borg-style priorities: the queue drains production (priority >= 9) first, "
           "and an arriving production task that fits nowhere may evict tasks of priority < 9"),
    Option("max-evictions", positive_int, None, "with --preempt: room for this many evictions per replay "
           "(default: the task count); more is an error, never a silent cap", "N"),
    SEED,
    SLOT.but(help="standard slot per dimension (slot_loss, min_strand)"),
    GENOME.but(help="w0,w1,w2,w3,w4,w5,p1,p2 for the 'family' policy"),
    JSON.but(help="write the figures per policy and trial as JSON (atomically)"),
    Option("util-csv", path, None, "write a utilization time series per policy (and trial) to "
           "PREFIX_<policy>[_t<trial>].csv", "PREFIX"),
    Option("util-dt", positive_float, 300.0, "bucket width of the --util-csv series in seconds (at most "
           "1,000,000 rows per file)", "S"),
    Option("cvx-round-s", positive_float, 1.0, "with cvxcluster in --policy: simulated seconds between its "
           "allocation rounds (docs/event.md)", "S"),
    Option("cvx-band-weights", band_weightings, ((1.0, 2.0, 4.0),), "with cvxcluster in --policy: utility of a "
           "placed free, middle and production task (priority 0-1, 2-8, 9-11); several weightings separated "
           "by '/' run as rows cvxcluster_w1-2-4, ...", "F,M,P[/..]"),
) + TRACE_WINDOW_OPTIONS
CVX_ONLY = ("cvx_round_s", "cvx_band_weights")


EVENT_TASK_BYTES = 32  # per (row, task): the replay's per-task state and its segment log, about

HELP = "replay the arrival stream through a discrete-event scheduler"
DESCRIPTION = ("Replay arrivals through each policy with a pending queue (and Borg-style preemption "
               "with --preempt), every policy and trial batched in one JAX loop; report utilization "
               "over the steady-state window, placement latency percentiles and queue statistics per "
               "policy.")


def csv_paths(prefix: str, policies, trials: int) -> dict[tuple[str, int], str]:
    """The --util-csv file of each (policy, trial)."""
    return {(p, t): f"{prefix}_{p}{'' if trials == 1 else f'_t{t}'}.csv" for p in policies for t in range(trials)}


def run(args: argparse.Namespace) -> int:
    """Replay the arrivals of the synthetic workload or a trace through each policy."""
    s, given = resolve(args, "event", OPTIONS)
    check_sources(s, given)
    check_writable(s["json"])
    from .. import progress
    from ..output import format_event_table, write_csv_atomic

    policies = policies_and_genome(s)
    cvx = "cvxcluster" in policies
    for k in CVX_ONLY:
        if k in given and not cvx:
            raise UsageError(f"{dest_flag(k)}: only with cvxcluster in --policy")
    if s["max_evictions"] is not None and not s["preempt"]:
        raise UsageError("--max-evictions: only with --preempt")
    from ..event import EventRunConfig, run_event
    from ..event.run import row_names, timing_summary

    cfg = EventRunConfig(policies=policies, trials=s["trials"], seed=s["seed"], sample_k=s["sample_k"],
                         preempt=s["preempt"], slot=s["slot"], genome=s["genome"], max_evictions=s["max_evictions"],
                         cvx_round_s=s["cvx_round_s"], cvx_band_weights=s["cvx_band_weights"])
    rows = row_names(cfg)
    paths = csv_paths(s["util_csv"], rows, s["trials"]) if s["util_csv"] else {}
    for p in paths.values():
        check_writable(p, "--util-csv")

    from ..event.stats import SERIES_CAP, utilization_series

    say = printer(args.quiet)
    if not s["trace_dir"]:
        check_memory(s, len(rows), s["machines"], synthetic_tasks(s), 2, EVENT_TASK_BYTES, estimated=True)
    t0 = time.perf_counter()
    cluster, workload, source = replay_workload(s, args.quiet)
    check_memory(s, len(rows), cluster.num_machines, workload.num_tasks, cluster.num_resources, EVENT_TASK_BYTES)
    span = float(np.max(np.asarray(workload.arrival) + np.asarray(workload.duration)))
    if paths and span / s["util_dt"] > SERIES_CAP:
        raise UsageError(f"--util-dt {s['util_dt']:g}: a {span:,.0f} s replay would give more than "
                         f"{SERIES_CAP:,} rows per file")
    bar = None if args.quiet else progress.maybe("replaying")
    round_bar = None if args.quiet or not cvx else progress.maybe("cvxcluster rounds")
    result = run_event(cluster, workload, cfg, progress=bar, round_progress=round_bar)
    wall = time.perf_counter() - t0
    rep = result.replay
    settings = settings_doc(s, ("util_csv",) + (() if cvx else CVX_ONLY)) | {"policy": list(policies)}
    timing = dict(timing_summary(result.timing), wall_s=wall)
    doc = envelope("event", args, settings, workload=source, tick_s=rep.inputs.tick_s, policies=result.summary(),
                   timing=timing)
    for (p, t), csv in paths.items():
        b = rows.index(p) * s["trials"] + t
        series = utilization_series(rep.segments[b], np.asarray(workload.arrival), np.asarray(workload.demand),
                                    np.asarray(cluster.capacity), rep.inputs.tick_s, s["util_dt"])
        header = ["time_s", "running", "pending"] + [f"util_{r}" for r in cluster.resources]
        write_csv_atomic(csv, header, series)
    write_result(s["json"], doc)
    where = "synthetic" if not s["trace_dir"] else f"{source['source']} trace"
    say(f"event: {where}, {cluster.num_machines} machines, {workload.num_tasks} tasks, {s['trials']} trial(s), "
        f"sample_k={s['sample_k'] or 'full scan'}, preempt={'on' if s['preempt'] else 'off'}, seed {s['seed']}, "
        f"{describe_devices()}, {wall:.1f}s")
    say(format_event_table(result.summary(), cluster.resources, s["preempt"] or cvx))
    for name, fig in result.summary().items():
        if "cvx" in fig:
            x = dict(fig["cvx"], **timing["cvxcluster"][name])
            say(f"{name}: {x['rounds']:.0f} rounds every {s['cvx_round_s']:g} s, {x['tasks_per_s']:,.0f} tasks/s "
                f"placed per second of allocation, round {1e3 * x['round_s_mean']:.1f} ms mean / "
                f"{1e3 * x['round_s_p99']:.1f} ms p99 ({x['compile_rounds']:.0f} rounds that compiled left out), "
                f"{x['allocation_s']:.1f} s allocating; "
                + ("never evicts (with --preempt too: bands act through the utilities)" if s["preempt"] else
                   "band weights " + ",".join(f"{v:g}" for v in x["band_weights"])))
    for p in list(paths.values()) + ([s["json"]] if s["json"] else []):
        say(f"wrote {p}")
    return 0
