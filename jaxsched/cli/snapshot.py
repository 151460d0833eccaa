"""`jaxsched snapshot`: pack a snapshot with every policy over shuffled trials."""

from __future__ import annotations

import argparse
import textwrap
import time

from .. import progress
from .common import check_memory, check_sources, check_writable, describe_devices, envelope, settings_doc, \
    slot_for, synthetic_tasks, write_result
from .config import resolve
from .options import GENOME, JSON, MACHINES, POLICY, POLICY_FILE, POLICY_PARAMS, RHO, SAMPLE_K, SEED, SLOT, TRACE_OPTIONS, TRIALS, Option, \
    choice, flag, positive_int
from .workloads import policies_and_genome, snapshot_workload

OPTIONS = (
    MACHINES, RHO, TRIALS,
    POLICY.but(help="comma-separated policies, or 'all' (see `jaxsched policies`); 'cvxcluster' adds the "
               "CvxCluster allocator (not part of 'all')"),
    POLICY_FILE, POLICY_PARAMS,
    SAMPLE_K, SEED, SLOT, GENOME, JSON,
    Option("no-compaction", flag, False, "skip compaction (the smallest share of machines, in random "
           "order, that still packs everything; binary search, median over trials)"),
    Option("no-inflation", flag, False, "skip inflation (the largest multiplier of the workload that "
           "still packs 100%, resolution 0.005)"),
    Option("inflate-mode", choice("scale", "clone"), "scale", "inflation by scaling every demand "
           "(scale) or by adding copies of tasks drawn with replacement (clone)", "MODE"),
    Option("search-depth", positive_int, 1, "binary-search levels per batched round of compaction and "
           "inflation: 2^D - 1 candidates per search and round (same answers for any D; 1 is fastest on "
           "a CPU, larger D cuts the rounds where devices are idle, as on a GPU)", "D"),
) + TRACE_OPTIONS


HELP = "pack a snapshot with every policy over shuffled trials"
DESCRIPTION = ("Pack a synthetic snapshot with each policy over shuffled trials and report placed, "
               "utilization, holes and stranding per policy.")


def columns(resources, searches=()) -> list[tuple]:
    """The stdout table's (metric, header, scale[, digits]) columns for these dimensions and searches."""
    cols = [("placed_fraction", "placed%", 100.0), ("placed_weighted", "placed_w%", 100.0)]
    cols += [(f"utilization_{r}", f"util_{r}%", 100.0) for r in resources]
    cols += [("holes", "holes%", 100.0)]
    cols += [(f"stranding_{r}", f"strand_{r}%", 100.0) for r in resources]
    return cols + [(k, h, 1.0, 3) for k, h in (("compaction", "compaction"), ("inflation", "inflation")) if k in searches]


def _describe_snapshot(source: dict, cache_state: str) -> str:
    snap = source["snapshot"]
    when = "every task" if snap["instant"] == "all" else f"alive at t={snap['instant_s']:g}s ({snap['instant']})"
    skipped = ", ".join(f"{k} {v}" for k, v in source["skipped"].items() if v)
    return (f"{source['source']} trace ({source['loaded_tasks']} tasks loaded, cache {cache_state}"
            f"{'; skipped: ' + skipped if skipped else ''}), {when}")


def _search_bars(quiet: bool):
    """(search_progress, close): one ticker per search metric, each closed when the next starts."""
    tickers = {}

    def search_bar(name, rounds):
        if quiet:
            return
        for other in [k for k in tickers if k != name]:
            tickers.pop(other).close()
        tickers.setdefault(name, progress.Ticker(name, "round"))(rounds)

    def close():
        for ticker in tickers.values():
            ticker.close()

    return search_bar, close


def run(args: argparse.Namespace) -> int:
    """Run the snapshot experiment on the synthetic workload or a trace snapshot."""
    from ..output import format_table, overload_note
    from ..snapshot import SnapshotConfig, run_snapshot

    s, given = resolve(args, "snapshot", OPTIONS)
    check_sources(s, given)
    policies = policies_and_genome(s)
    slot_for(s, 3 if s["trace_dir"] else 2)
    check_writable(s["json"])

    if not s["trace_dir"]:
        check_memory(s, len(policies), s["machines"], synthetic_tasks(s), 2, estimated=True)
    t0 = time.perf_counter()
    cluster, workload, source, cache_state = snapshot_workload(s, args.quiet)
    check_memory(s, len(policies), cluster.num_machines, workload.num_tasks, cluster.num_resources)
    slot = slot_for(s, cluster.num_resources)
    bar = None if args.quiet else progress.maybe("packing")
    search_bar, close_bars = _search_bars(args.quiet)
    cfg = SnapshotConfig(policies=policies, trials=s["trials"], seed=s["seed"], sample_k=s["sample_k"], slot=slot,
                         genome=s["genome"], compact=not s["no_compaction"],
                         inflate=None if s["no_inflation"] else s["inflate_mode"], search_depth=s["search_depth"])
    result = run_snapshot(cluster, workload, cfg, progress=bar, search_progress=search_bar)
    close_bars()
    wall = time.perf_counter() - t0
    summary = result.summary()
    doc = envelope("snapshot", args, settings_doc(s) | {"policy": list(policies), "slot": list(slot)},
                   workload=source, policies=summary)
    write_result(s["json"], doc)
    if not args.quiet:
        where = "synthetic" if not s["trace_dir"] else _describe_snapshot(source, cache_state)
        print(f"snapshot: {where}, {cluster.num_machines} machines, {workload.num_tasks} tasks, "
              f"{s['trials']} trials, sample_k={s['sample_k'] or 'full scan'}, seed {s['seed']}, "
              f"{describe_devices()}, {wall:.1f}s")
        print(format_table(summary, columns(result.resources, result.searches)))
        note = overload_note(summary)
        if note:
            print(textwrap.fill(note, 100))
        if s["json"]:
            print(f"wrote {s['json']}")
    return 0
