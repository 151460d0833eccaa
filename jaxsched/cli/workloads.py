"""The workloads the commands run on: the synthetic generator, or a trace loaded with its
filters and cut to a snapshot, each with the JSON description a result carries."""

from __future__ import annotations

from typing import Any

import numpy as np

from ..errors import InputError
from .config import UsageError, tomllib


def load_trace(s: dict[str, Any], quiet: bool):
    """(trace, filters) of the trace settings."""
    from .. import progress
    from ..filters import Filters
    from ..traces import load_trace as load

    bar = None if quiet else progress.maybe("loading trace")
    trace = load(s["trace_dir"], s["trace_format"], cache_dir=s["cache_dir"], use_cache=not s["no_cache"],
                 pods=s["pod_list"], nodes=s["node_list"], progress=bar)
    filters = Filters(days=s["days"], min_priority=s["min_priority"], max_task_dim=s["max_task_dim"],
                      max_tasks=s["max_tasks"])
    return trace, filters


def trace_snapshot(s, trace, filters, at, within=None):
    """(cluster, workload, JSON description) of one snapshot of a loaded trace."""
    from ..filters import NoTaskAlive, snapshot_tasks

    try:
        index, chosen = snapshot_tasks(trace.workload, filters, trace.window[0], at, within)
    except NoTaskAlive as e:
        raise UsageError(f"--at: {e}") from None
    snap = trace.take(index)
    doc = dict(trace.describe(), trace_dir=s["trace_dir"], loaded_tasks=trace.workload.num_tasks,
               tasks=snap.workload.num_tasks, snapshot=chosen)
    return snap.cluster, snap.workload, doc


def synthetic_doc(cluster, workload, seed) -> dict:
    """The JSON description of a synthetic workload."""
    return {"source": "synthetic", "machines": cluster.num_machines, "tasks": workload.num_tasks,
            "resources": list(cluster.resources), "seed": seed}


def snapshot_workload(s: dict[str, Any], quiet: bool):
    """(cluster, workload, JSON description, cache state) of the synthetic workload or the trace snapshot.

    The cache state stays out of the JSON, which must not depend on what ran before.
    """
    if not s["trace_dir"]:
        from ..synthetic import synthetic_instance

        cluster, workload = synthetic_instance(s["machines"], s["rho"], s["seed"])
        return cluster, workload, synthetic_doc(cluster, workload, s["seed"]), None
    trace, filters = load_trace(s, quiet)
    return (*trace_snapshot(s, trace, filters, s["at"] or trace.default_instant), trace.cache)


def replay_workload(s: dict[str, Any], quiet: bool):
    """(cluster, workload, JSON description) of the synthetic arrival stream or the filtered trace."""
    if not s["trace_dir"]:
        from ..synthetic import synthetic_instance

        cluster, workload = synthetic_instance(s["machines"], s["rho"], s["seed"], event=True)
        return cluster, workload, dict(synthetic_doc(cluster, workload, s["seed"]), offered_load=s["rho"])
    from ..filters import apply_filters

    trace, filters = load_trace(s, quiet)
    index, dropped = apply_filters(trace.workload, filters, trace.window[0])
    if index.size == 0:
        raise InputError(f"the filters {filters.active()} leave no task")
    kept = trace.take(index)
    doc = dict(trace.describe(), trace_dir=s["trace_dir"], loaded_tasks=trace.workload.num_tasks,
               tasks=int(index.size), filters=filters.active(), dropped=dropped)
    return kept.cluster, kept.workload, doc


def tuning_problems(s: dict[str, Any], quiet: bool):
    """(train, held-out, JSON description) for tuning: the peak snapshot and one from the other half.

    Synthetic: the workload of the seed, and for held-out the one of seed + 1. Trace: the
    busiest instant of the (filtered) window, and the busiest instant of the second half
    of the window (the first half if the peak lies in the second). Traces packed whole
    (Alibaba pod lists) split at the middle of the window by arrival instead.
    """
    from ..evolve import Problem
    from ..filters import DAY_S

    if not s["trace_dir"]:
        from ..synthetic import synthetic_instance

        train = synthetic_instance(s["machines"], s["rho"], s["seed"])
        held = synthetic_instance(s["machines"], s["rho"], s["seed"] + 1)
        return Problem(*train), Problem(*held), {"train": synthetic_doc(*train, s["seed"]),
                                                 "heldout": synthetic_doc(*held, s["seed"] + 1)}
    trace, filters = load_trace(s, quiet)
    start, end = trace.window
    if s["days"] is not None:
        end = min(end, start + s["days"] * DAY_S)
    mid = 0.5 * (start + end)
    if trace.default_instant == "all":
        arrival = np.asarray(trace.workload.arrival)
        first, second = trace.take(arrival < mid), trace.take(arrival >= mid)
        if first.workload.num_tasks == 0 or second.workload.num_tasks == 0:
            raise InputError(f"{s['trace_dir']}: every task arrives in one half of the window; nothing to hold out")
        c1, w1, d1 = trace_snapshot(s, first, filters, "all")
        c2, w2, d2 = trace_snapshot(s, second, filters, "all")
        return Problem(c1, w1), Problem(c2, w2), {"train": d1, "heldout": d2, "split_at_s": mid}
    c1, w1, d1 = trace_snapshot(s, trace, filters, "busiest")
    peak = d1["snapshot"]["instant_s"]
    half = (mid, end) if peak < mid else (start, mid)
    c2, w2, d2 = trace_snapshot(s, trace, filters, "busiest", within=half)
    return Problem(c1, w1), Problem(c2, w2), {"train": d1, "heldout": d2}


def user_policies(s: dict[str, Any]) -> tuple[str, ...]:
    """Load --policy-file's policies and apply --policy-params to them; their names."""
    from ..user_policies import USER_POLICIES, load_policy_file, with_params

    names: tuple[str, ...] = ()
    if s.get("policy_file"):
        try:
            names = load_policy_file(s["policy_file"])
        except InputError as e:
            raise UsageError(f"--policy-file: {e}") from None
    if s.get("policy_params"):
        path = s["policy_params"]
        values = _read_params(path)
        for name, table in values.items():
            if name not in USER_POLICIES:
                raise UsageError(f"--policy-params: {path}: {name!r} is not a user policy (loaded: "
                                 f"{', '.join(USER_POLICIES) or 'none; give --policy-file'})")
            if not isinstance(table, dict):
                raise UsageError(f"--policy-params: {path}: {name!r} must be a table of parameters")
            try:
                with_params(name, table)
            except InputError as e:
                raise UsageError(f"--policy-params: {path}: {e}") from None
    return names


def _read_params(path: str) -> dict[str, Any]:
    import json
    import os

    if not os.path.isfile(path):
        raise UsageError(f"--policy-params: {path}: no such file")
    try:
        if path.endswith(".json"):
            with open(path) as f:
                doc = json.load(f)
        else:
            with open(path, "rb") as f:
                doc = tomllib.load(f)
    except (ValueError, UnicodeDecodeError) as e:  # json and tomllib errors say the line
        raise UsageError(f"--policy-params: {path}: {e}") from None
    if not isinstance(doc, dict):
        raise UsageError(f"--policy-params: {path}: expected a table per policy")
    return doc


def policies_and_genome(s: dict[str, Any]) -> tuple[str, ...]:
    """The --policy list, checked (placement methods such as cvxcluster after the scoring
    policies), after checking that --genome (if given) has 8 numbers."""
    from ..policies import GENOME_NAMES, PLACEMENT_METHODS, policy_names

    user_policies(s)
    parts = [p.strip() for p in s["policy"].split(",") if p.strip()]
    methods = tuple(dict.fromkeys(p for p in parts if p in PLACEMENT_METHODS))
    rest = ",".join(p for p in parts if p not in PLACEMENT_METHODS)
    try:
        policies = policy_names(rest) if rest or not methods else ()
    except KeyError as e:
        from ..gpushare import PAPER_POLICIES

        shared = [p for p in parts if p in PAPER_POLICIES]
        if shared:
            raise UsageError(f"--policy: {shared[0]} is a policy of the per-GPU sharing model: run it with "
                             f"`jaxsched gpushare --trace-dir DIR --policy {shared[0]}`") from None
        raise UsageError(f"--policy: {e.args[0]}") from None
    if s["genome"] is not None and len(s["genome"]) != len(GENOME_NAMES):
        raise UsageError(f"--genome: expected {len(GENOME_NAMES)} numbers ({','.join(GENOME_NAMES)}), "
                         f"got {len(s['genome'])}")
    return policies + methods
