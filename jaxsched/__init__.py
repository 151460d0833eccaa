"""jaxsched: cluster-scheduling placement policies as batched, vectorized JAX programs."""

__version__ = "0.1.0"

from .event import EventConfig, EventResult, Replay, replay, run_event
from .filters import Filters, alive_at, apply_filters, busiest_instant, snapshot_tasks
from .metrics import Metrics, cluster_metrics, snapshot_metrics
from .packing import PackConfig, pack
from .policies import (
    ALPHA_EVOLVE_GENOME,
    FAMILY,
    GENOME_NAMES,
    REGISTRY,
    Policy,
    get_policy,
    policy_names,
    score,
)
from .rng import trial_keys, trial_orders
from .snapshot import SnapshotResult, run_snapshot
from .synthetic import synthetic_cluster, synthetic_event_workload, synthetic_instance, synthetic_workload
from .traces import Trace, load_alibaba_gpu, load_google2011, load_trace
from .types import Cluster, PackState, Workload
from .report import build_report
from . import cvx, errors
from .errors import InputError

__all__ = [
    "ALPHA_EVOLVE_GENOME", "EventConfig", "EventResult", "FAMILY", "Replay", "replay", "run_event", "InputError", "errors", "GENOME_NAMES", "REGISTRY", "Cluster", "Filters",
    "Metrics", "PackConfig", "PackState", "Policy", "SnapshotResult", "Trace", "Workload", "alive_at",
    "apply_filters", "busiest_instant", "cluster_metrics", "get_policy", "load_alibaba_gpu", "load_google2011",
    "load_trace", "pack", "policy_names", "run_snapshot", "score", "snapshot_metrics", "snapshot_tasks",
    "synthetic_cluster", "synthetic_event_workload", "synthetic_instance", "synthetic_workload", "trial_keys", "trial_orders",
    "build_report", "cvx",
]
