"""jaxsched: cluster-scheduling placement policies as batched, vectorized JAX programs.

Every name below is importable from the package itself (`jaxsched.pack`, `jaxsched.run_snapshot`);
each loads its module on first use, so that `import jaxsched` (and the command line) does not
pay for JAX, pyarrow or SciPy before they are needed.
"""

from __future__ import annotations

from .lazy import lazy_names

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


__getattr__, __dir__ = lazy_names(__name__, _EXPORTS, _SUBMODULES)
