"""jaxsched: cluster-scheduling placement policies as batched, vectorized JAX programs."""

__version__ = "0.1.0"

# The problem's data
from .types import Cluster, PackState, Workload
from .errors import InputError

# Workloads: the synthetic generator and real traces, filtered and cut to snapshots
from .synthetic import synthetic_cluster, synthetic_event_workload, synthetic_instance, synthetic_workload
from .traces import Trace, load_alibaba_gpu, load_google2011, load_trace
from .filters import Filters, alive_at, apply_filters, busiest_instant, snapshot_tasks

# Policies and the batched packing
from .policies import (ALPHA_EVOLVE_GENOME, FAMILY, GENOME_NAMES, REGISTRY, Policy, Terms, get_policy,
                       policy_names, score)
from .user_policies import check_policy, load_policy_file, policy, with_params
from .packing import PackConfig, pack
from .rng import trial_keys, trial_orders

# Experiments
from .metrics import Metrics, cluster_metrics, snapshot_metrics
from .snapshot import SnapshotConfig, SnapshotResult, run_snapshot
from .event import EventConfig, EventResult, EventRunConfig, Replay, replay, run_event
from .report import build_report
from . import cvx, errors

__all__ = [
    # data
    "Cluster", "InputError", "PackState", "Workload", "errors",
    # workloads
    "Filters", "Trace", "alive_at", "apply_filters", "busiest_instant", "load_alibaba_gpu", "load_google2011",
    "load_trace", "snapshot_tasks", "synthetic_cluster", "synthetic_event_workload", "synthetic_instance",
    "synthetic_workload",
    # policies and packing
    "ALPHA_EVOLVE_GENOME", "FAMILY", "GENOME_NAMES", "PackConfig", "Policy", "REGISTRY", "Terms", "check_policy",
    "get_policy", "load_policy_file", "pack", "policy", "policy_names", "score", "trial_keys", "trial_orders",
    "with_params",
    # experiments
    "EventConfig", "EventResult", "EventRunConfig", "Metrics", "Replay", "SnapshotConfig", "SnapshotResult",
    "build_report", "cluster_metrics", "cvx", "replay", "run_event", "run_snapshot", "snapshot_metrics",
]
