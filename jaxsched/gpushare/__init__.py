"""GPU-sharing clusters: the Alibaba openb experiments of the FGD paper (Weng et al., ATC'23),
every (policy, seed) run batched (docs/spec/GPU_SHARING.md; docs/gpushare.md).

Nodes hold physical GPUs of 1000 milli-GPU each; a share pod takes its part of ONE GPU, a
multi-GPU pod whole GPUs, and `gpu_spec` restricts a pod's GPU models. Modules: `data`
(the node and pod lists), `workload` (one seed's arrivals and node ranks; the typical
pods), `policies` (the paper's six), `frag` (fragmentation and FGD's score), `engine`
(the batched simulation), `metrics` (the paper's curves), `experiment` (all of it), `family`
(a parameterized score with the paper's policies as points) and `search` (searching it).
"""

from .data import GpuCluster, PodList, load_cluster, load_gpushare, load_pods
from .engine import Trajectories, gpu_policy, simulate
from .experiment import PAPER_SEEDS, GpuShareConfig, GpuShareResult, run_gpushare
from .metrics import Curves, curves
from .policies import PAPER_POLICIES, GpuPolicy
from .workload import Run, TypicalPods, arrivals, typical_pods

__all__ = ["Curves", "GpuCluster", "GpuPolicy", "GpuShareConfig", "GpuShareResult", "PAPER_POLICIES",
           "PAPER_SEEDS", "PodList", "Run", "Trajectories", "TypicalPods", "arrivals", "curves", "gpu_policy",
           "load_cluster", "load_gpushare", "load_pods", "run_gpushare", "simulate", "typical_pods"]
