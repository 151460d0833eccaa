"""jaxsched: cluster-scheduling placement policies as batched, vectorized JAX programs."""

__version__ = "0.1.0"

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
from .synthetic import synthetic_cluster, synthetic_instance, synthetic_workload
from .types import Cluster, PackState, Workload
from . import errors
from .errors import InputError

__all__ = [
    "ALPHA_EVOLVE_GENOME", "FAMILY", "InputError", "errors", "GENOME_NAMES", "REGISTRY", "Cluster", "Metrics", "PackConfig",
    "PackState", "Policy", "SnapshotResult", "Workload", "cluster_metrics", "get_policy", "pack",
    "policy_names", "run_snapshot", "score", "snapshot_metrics", "synthetic_cluster", "synthetic_instance",
    "synthetic_workload", "trial_keys", "trial_orders",
]
