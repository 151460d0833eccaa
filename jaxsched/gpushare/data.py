"""The Alibaba GPU v2023 ("openb") node and pod lists as the GPU-sharing model reads them:
integer milli-CPU, MiB and milli-GPU per physical GPU, GPU models, and each pod's allowed models.

docs/spec/GPU_SHARING.md, section 1 (semantics and results: docs/gpushare.md).
"""

from __future__ import annotations

import dataclasses
import os

import numpy as np

from ..errors import InputError
from ..traces.alibaba_gpu import NODE_COLUMNS, POD_COLUMNS, csv_folder, read_list
from ..traces.csvfile import line_of, numpy_column

MILLI = 1000  # milli-GPU in one physical GPU


@dataclasses.dataclass(frozen=True)
class GpuCluster:
    """Nodes with CPU, memory and physical GPUs of one model each."""

    names: np.ndarray  # object[N], the node names (sn)
    cpu: np.ndarray  # i64[N], milli-CPU
    mem: np.ndarray  # i64[N], MiB
    gpus: np.ndarray  # i32[N], physical GPUs
    model: np.ndarray  # i32[N], index into `models` (-1: no GPU)
    models: tuple[str, ...]  # the GPU models present, sorted

    @property
    def num_nodes(self) -> int:
        return int(len(self.cpu))

    @property
    def total_gpus(self) -> int:
        return int(self.gpus.sum())

    @property
    def max_gpus(self) -> int:
        return int(self.gpus.max(initial=0))


@dataclasses.dataclass(frozen=True)
class PodList:
    """Pods as requests: CPU, memory, GPU count and milli-GPU per GPU, allowed GPU models."""

    name: str  # the list's name (default, cpu050, ...)
    names: np.ndarray  # object[P], pod names
    cpu: np.ndarray  # i64[P], milli-CPU
    mem: np.ndarray  # i64[P], MiB
    num_gpu: np.ndarray  # i32[P], k
    milli: np.ndarray  # i32[P], m: milli-GPU on each of its GPUs (0 for a CPU-only pod)
    spec: np.ndarray  # object[P], the gpu_spec text ('' = any model)
    spec_mask: np.ndarray  # i64[P], bit g: model g allowed (every bit where any model is)

    @property
    def num_pods(self) -> int:
        return int(len(self.cpu))

    @property
    def gpu_demand(self) -> np.ndarray:
        """i64[P], k * m: each pod's milli-GPU."""
        return self.num_gpu.astype(np.int64) * self.milli

    def take(self, index) -> "PodList":
        """The pods at `index` (an integer array), in that order."""
        index = np.asarray(index)
        fields = {f.name: getattr(self, f.name)[index] for f in dataclasses.fields(self) if f.name != "name"}
        return dataclasses.replace(self, **fields)


def _integers(values: np.ndarray, what: str, path: str) -> np.ndarray:
    bad = np.isfinite(values) & (values != np.round(values))
    if np.any(bad):
        row = int(np.argmax(bad))
        raise InputError(f"{path}, line {line_of(row, True)}: {what} {values[row]} is not a whole number")
    return values


def load_cluster(path: str) -> GpuCluster:
    """The nodes of an openb node list.

    Raises:
        InputError: a missing file or column, a malformed row, a GPU node without a model,
            naming the file and line.
    """
    table = read_list(path, NODE_COLUMNS, ("sn", "cpu_milli", "memory_mib", "gpu"))
    if table.num_rows == 0:
        raise InputError(f"{path}: no nodes")
    gpus = _integers(numpy_column(table, "gpu"), "gpu", path).astype(np.int32)
    model_text = table.column("model").to_pylist() if "model" in table.column_names else [None] * table.num_rows
    for row, (g, m) in enumerate(zip(gpus, model_text)):
        if g > 0 and not m:
            raise InputError(f"{path}, line {line_of(row, True)}: a node with {g} GPUs needs a model")
    models = tuple(sorted({m for g, m in zip(gpus, model_text) if g > 0}))
    index = {m: i for i, m in enumerate(models)}
    return GpuCluster(names=np.asarray(table.column("sn").to_pylist(), dtype=object),
                      cpu=_integers(numpy_column(table, "cpu_milli"), "cpu_milli", path).astype(np.int64),
                      mem=_integers(numpy_column(table, "memory_mib"), "memory_mib", path).astype(np.int64),
                      gpus=gpus, model=np.asarray([index[m] if g > 0 else -1 for g, m in zip(gpus, model_text)],
                                                  np.int32), models=models)


def load_pods(path: str, cluster: GpuCluster, name: str = "") -> PodList:
    """The pods of an openb pod list, checked against the cluster they are to run on.

    Raises:
        InputError: a missing file or column, a malformed row, a pod asking for more GPUs
            than any node has, a share outside 0..1000 milli, a multi-GPU pod asking for
            part of a GPU, or a gpu_spec naming a model the cluster lacks; each naming the
            file and line.
    """
    table = read_list(path, POD_COLUMNS, ("name", "cpu_milli", "memory_mib", "num_gpu"))
    k = _integers(numpy_column(table, "num_gpu"), "num_gpu", path).astype(np.int32)
    raw = numpy_column(table, "gpu_milli") if "gpu_milli" in table.column_names else np.full(len(k), np.nan)
    raw = _integers(raw, "gpu_milli", path)
    for row in np.flatnonzero(k > 0):
        where = f"{path}, line {line_of(int(row), True)}"
        if not np.isfinite(raw[row]):
            raise InputError(f"{where}: a pod with {k[row]} GPUs needs gpu_milli")
        if not 0 < raw[row] <= MILLI:
            raise InputError(f"{where}: gpu_milli {raw[row]:g} is outside 1..{MILLI}")
        if k[row] > 1 and raw[row] != MILLI:
            raise InputError(f"{where}: a pod of {k[row]} GPUs must take whole GPUs (gpu_milli {MILLI}), "
                             f"got {raw[row]:g}")
    too_many = k > cluster.max_gpus
    if np.any(too_many):
        row = int(np.argmax(too_many))
        raise InputError(f"{path}, line {line_of(row, True)}: the pod asks for {k[row]} GPUs; the largest "
                         f"node has {cluster.max_gpus}")
    milli = np.where(k > 0, np.nan_to_num(raw), 0).astype(np.int32)
    text = table.column("gpu_spec").to_pylist() if "gpu_spec" in table.column_names else [None] * len(k)
    index = {m: i for i, m in enumerate(cluster.models)}
    everything = (1 << len(cluster.models)) - 1
    masks = np.full(len(k), everything, np.int64)
    for row, t in enumerate(text):
        if not t or k[row] == 0:  # the simulator reads gpu_spec only for GPU pods
            continue
        mask = 0
        for model in t.split("|"):
            if model not in index:
                raise InputError(f"{path}, line {line_of(row, True)}: gpu_spec names GPU model {model!r}, which "
                                 f"no node has (models: {', '.join(cluster.models)})")
            mask |= 1 << index[model]
        masks[row] = mask
    spec = np.asarray([t if (t and kk > 0) else "" for t, kk in zip(text, k)], dtype=object)
    return PodList(name=name, names=np.asarray(table.column("name").to_pylist(), dtype=object),
                   cpu=_integers(numpy_column(table, "cpu_milli"), "cpu_milli", path).astype(np.int64),
                   mem=_integers(numpy_column(table, "memory_mib"), "memory_mib", path).astype(np.int64),
                   num_gpu=k, milli=milli, spec=spec, spec_mask=masks)


def load_gpushare(trace_dir: str, pods: str = "default", nodes: str = "gpu_node") -> tuple[GpuCluster, PodList]:
    """The cluster and the pod list of an openb experiment.

    Args:
        trace_dir: the directory holding the openb lists (in it or in csv/).
        pods: the pod list openb_pod_list_<pods>.csv (default, cpu050, gpushare40, ...).
        nodes: the node list openb_node_list_<nodes>.csv (the paper's cluster: gpu_node).

    Returns:
        (cluster, pods).

    Raises:
        InputError: a missing directory, file or column, or a bad row, naming the file and line.
    """
    if not os.path.isdir(trace_dir):
        raise InputError(f"trace directory {trace_dir}: no such directory")
    folder = csv_folder(trace_dir)
    cluster = load_cluster(os.path.join(folder, f"openb_node_list_{nodes}.csv"))
    return cluster, load_pods(os.path.join(folder, f"openb_pod_list_{pods}.csv"), cluster, pods)
