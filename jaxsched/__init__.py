"""jaxsched: cluster-scheduling placement policies as batched, vectorized JAX programs.

Every name below is importable from the package itself (`jaxsched.pack`, `jaxsched.run_snapshot`);
each loads its module on first use, so that `import jaxsched` (and the command line) does not
pay for JAX, pyarrow or SciPy before they are needed.
"""

from __future__ import annotations

import importlib

__version__ = "0.1.0"

# name -> the submodule that defines it
_EXPORTS = {
    # The problem's data
    "Cluster": "types", "PackState": "types", "Workload": "types", "InputError": "errors",
    # Workloads: the synthetic generator and real traces, filtered and cut to snapshots
    "synthetic_cluster": "synthetic", "synthetic_event_workload": "synthetic", "synthetic_instance": "synthetic",
    "synthetic_workload": "synthetic",
    "Trace": "traces", "load_alibaba_gpu": "traces", "load_google2011": "traces", "load_trace": "traces",
    "Filters": "filters", "alive_at": "filters", "apply_filters": "filters", "busiest_instant": "filters",
    "snapshot_tasks": "filters",
    # Policies and the batched packing
    "ALPHA_EVOLVE_GENOME": "policies", "FAMILY": "policies", "GENOME_NAMES": "policies", "REGISTRY": "policies",
    "Policy": "policies", "Terms": "policies", "get_policy": "policies", "policy_names": "policies",
    "score": "policies",
    "check_policy": "user_policies", "load_policy_file": "user_policies", "policy": "user_policies",
    "with_params": "user_policies",
    "PackConfig": "packing", "pack": "packing",
    "trial_keys": "rng", "trial_orders": "rng",
    # Experiments
    "Metrics": "metrics", "cluster_metrics": "metrics", "snapshot_metrics": "metrics",
    "SnapshotConfig": "snapshot", "SnapshotResult": "snapshot", "run_snapshot": "snapshot",
    "EventConfig": "event", "EventResult": "event", "EventRunConfig": "event", "Replay": "event", "replay": "event",
    "run_event": "event",
    "build_report": "report",
}
_SUBMODULES = ("cvx", "errors")

__all__ = sorted(_EXPORTS) + list(_SUBMODULES)


def __getattr__(name: str):
    if name in _EXPORTS:
        value = getattr(importlib.import_module(f".{_EXPORTS[name]}", __name__), name)
    elif name in _SUBMODULES:
        value = importlib.import_module(f".{name}", __name__)
    else:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    globals()[name] = value
    return value


def __dir__():
    return sorted(set(globals()) | set(__all__))
