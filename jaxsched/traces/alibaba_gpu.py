"""The Alibaba GPU cluster trace v2023 ("openb", Weng et al., ATC'23) as a 3-D workload.

Schema: docs/traces.md (CSV with a header; CPU in milli-cores,
memory in MiB, GPUs as a count or, for one-GPU pods, `gpu_milli` thousandths of one).
Resources are (cpu, mem, gpu), each normalized so that the largest node has 1.0.

- a pod's GPU demand is num_gpu, or gpu_milli / 1000 when num_gpu is 1; GPUs are one
  pooled dimension per node, so a GPU share is not pinned to one physical GPU;
- arrival = creation_time; duration = deletion_time - scheduled_time, or for a pod
  never scheduled (the Pending ones) deletion_time - creation_time: they are demand
  the trace's own scheduler could not place, and they are kept and counted; pod lists
  without times (multigpu*) arrive at 0 and never end;
- the snapshot default is every pod at once ("all"), the paper's methodology: its pod
  lists are meant to be packed whole (at the busiest instant only ~56 pods are alive);
- priority from QoS: LS and Guaranteed 9 (the production band), Burstable 4, BE 0;
- `gpu_spec` (allowed GPU models) is kept out of placement here and counted.
"""

from __future__ import annotations

import os

import numpy as np
import pyarrow as pa

from ..errors import InputError
from ..types import Cluster, Workload
from .csvfile import Column, line_of, numpy_column, read_csv, require_present, require_range
from .trace import Trace

SOURCE = "alibaba-gpu-v2023"
RESOURCES = ("cpu", "mem", "gpu")
QOS_PRIORITY = {"LS": 9, "Guaranteed": 9, "Burstable": 4, "BE": 0}
_FMAX = float(np.finfo(np.float64).max)

NODE_COLUMNS = (Column("sn", "str", "sn"), Column("cpu_milli", "float", "cpu_milli"),
                Column("memory_mib", "float", "memory_mib"), Column("gpu", "float", "gpu"),
                Column("model", "str", "model"))
POD_COLUMNS = (Column("name", "str", "name"), Column("cpu_milli", "float", "cpu_milli"),
               Column("memory_mib", "float", "memory_mib"), Column("num_gpu", "float", "num_gpu"),
               Column("gpu_milli", "float", "gpu_milli"), Column("gpu_spec", "str", "gpu_spec"),
               Column("qos", "str", "qos"), Column("pod_phase", "str", "pod_phase"),
               Column("creation_time", "float", "creation_time"), Column("deletion_time", "float", "deletion_time"),
               Column("scheduled_time", "float", "scheduled_time"))
_POD = {c.name: c for c in POD_COLUMNS}
_NODE = {c.name: c for c in NODE_COLUMNS}
_TIMES = ("creation_time", "deletion_time", "scheduled_time")


def csv_folder(trace_dir: str) -> str:
    """The folder holding the openb_*.csv files: trace_dir itself or its csv/."""
    for folder in (trace_dir, os.path.join(trace_dir, "csv")):
        if os.path.isfile(os.path.join(folder, "openb_node_list_all_node.csv")) or os.path.isfile(
                os.path.join(folder, "openb_node_list_gpu_node.csv")):
            return folder
    raise InputError(f"trace directory {trace_dir} has no openb_node_list_*.csv (in it or in csv/)")


def _header(path: str) -> list[str]:
    with open(path, encoding="utf-8", errors="replace") as f:
        return f.readline().strip().split(",")


def read_list(path: str, columns, required) -> pa.Table:
    """One openb list: the columns present of `columns`, `required` ones mandatory, numbers >= 0."""
    if not os.path.isfile(path):
        raise InputError(f"{path}: no such file")
    present = [c for c in columns if c.name in _header(path)]
    missing = [n for n in required if n not in {c.name for c in present}]
    if missing:
        raise InputError(f"{path}: missing column(s) {', '.join(missing)}")
    table = read_csv(path, present, [c.name for c in present], header=True)
    require_present(table, [c for c in present if c.name in required], path, header=True)
    for c in present:
        if c.kind == "float":
            require_range(numpy_column(table, c.name), 0.0, _FMAX, c, path, True)
    return table


def load_alibaba_gpu(trace_dir: str, pods: str = "default", nodes: str = "all_node") -> Trace:
    """Load openb_node_list_<nodes>.csv and openb_pod_list_<pods>.csv under trace_dir.

    Args:
        trace_dir: the directory holding the lists (in it or in csv/).
        pods: the pod list's name (default, cpu050, gpushare40, multigpu20, ...).
        nodes: the node list's name (all_node or gpu_node).

    Returns:
        The Trace, with resources (cpu, mem, gpu) normalized to the largest node.

    Raises:
        InputError: a missing file or column, or a malformed row, naming the file and line.
    """
    if not os.path.isdir(trace_dir):
        raise InputError(f"trace directory {trace_dir}: no such directory")
    folder = csv_folder(trace_dir)
    node_path = os.path.join(folder, f"openb_node_list_{nodes}.csv")
    pod_path = os.path.join(folder, f"openb_pod_list_{pods}.csv")
    n = read_list(node_path, NODE_COLUMNS, ("sn", "cpu_milli", "memory_mib"))
    cap = np.stack([numpy_column(n, "cpu_milli"), numpy_column(n, "memory_mib"),
                    numpy_column(n, "gpu", 0.0) if "gpu" in n.column_names else np.zeros(n.num_rows)], 1)
    if cap.shape[0] == 0:
        raise InputError(f"{node_path}: no nodes")
    scale = cap.max(axis=0)
    scale[scale == 0] = 1.0
    p = read_list(pod_path, POD_COLUMNS, ("name", "cpu_milli", "memory_mib", "num_gpu"))
    num_gpu = numpy_column(p, "num_gpu")
    gpu_milli = numpy_column(p, "gpu_milli") if "gpu_milli" in p.column_names else np.full(p.num_rows, np.nan)
    gpu = np.where((num_gpu == 1) & ~np.isnan(gpu_milli), gpu_milli / 1000.0, num_gpu)
    demand = np.stack([numpy_column(p, "cpu_milli"), numpy_column(p, "memory_mib"), gpu], 1) / scale

    counts = {"pods": p.num_rows, "nodes": n.num_rows}
    if all(t in p.column_names for t in _TIMES):
        created, deleted = numpy_column(p, "creation_time"), numpy_column(p, "deletion_time")
        scheduled = numpy_column(p, "scheduled_time")
        counts["pods_never_scheduled"] = int(np.sum(np.isnan(scheduled)))
        last = float(np.nanmax(np.concatenate([created, deleted, scheduled]))) if p.num_rows else 0.0
        deleted = np.where(np.isnan(deleted), last, deleted)
        start = np.where(np.isnan(scheduled), created, scheduled)
        bad = (deleted < start) | (start < created)
        if np.any(bad):
            row = int(np.argmax(bad))
            raise InputError(f"{pod_path}, line {line_of(row, True)}: times out of order "
                             f"(creation <= scheduled <= deletion is required)")
        arrival, duration = created, deleted - start
    else:  # a pod list without times: everything is present at once, for good
        last = 0.0
        arrival, duration = np.zeros(p.num_rows), np.full(p.num_rows, np.inf)
    if "qos" in p.column_names:
        qos = p.column("qos").to_pylist()
        unknown = [i for i, q in enumerate(qos) if q not in QOS_PRIORITY]
        if unknown:
            raise InputError(f"{pod_path}, line {line_of(unknown[0], True)}: unknown qos {qos[unknown[0]]!r} "
                             f"(known: {', '.join(QOS_PRIORITY)})")
        priority = np.asarray([QOS_PRIORITY[q] for q in qos], np.int32)
    else:
        priority = np.zeros(p.num_rows, np.int32)
    if "gpu_spec" in p.column_names:
        counts["pods_gpu_spec_not_enforced"] = int(p.num_rows - p.column("gpu_spec").null_count)
    names = np.asarray(p.column("name").to_pylist(), dtype=object)
    order = np.argsort(arrival, kind="stable")
    workload = Workload(demand=demand[order].astype(np.float32), priority=priority[order],
                        arrival=arrival[order], duration=duration[order], resources=RESOURCES)
    return Trace(source=SOURCE, cluster=Cluster(capacity=(cap / scale).astype(np.float32), resources=RESOURCES),
                 workload=workload, window=(0.0, last), skipped={}, counts=counts, default_instant="all",
                 task_ids=names[order], machine_ids=np.asarray(n.column("sn").to_pylist(), dtype=object))
