"""Real cluster traces as jaxsched clusters and workloads (Google 2011, Alibaba GPU 2023)."""

from __future__ import annotations

import os
from typing import Callable

from ..errors import InputError
from .alibaba_gpu import load_alibaba_gpu
from .google2011 import load_google2011
from .trace import Trace

FORMATS = ("google2011", "alibaba-gpu")


def detect_format(trace_dir: str) -> str:
    """'google2011' (task_events/ present) or 'alibaba-gpu' (openb_*.csv present)."""
    if not os.path.isdir(trace_dir):
        raise InputError(f"trace directory {trace_dir}: no such directory")
    if os.path.isdir(os.path.join(trace_dir, "task_events")):
        return "google2011"
    for folder in (trace_dir, os.path.join(trace_dir, "csv")):
        if os.path.isdir(folder) and any(f.startswith("openb_node_list_") for f in os.listdir(folder)):
            return "alibaba-gpu"
    raise InputError(f"trace directory {trace_dir}: neither a Google 2011 trace (task_events/, "
                     f"machine_events/) nor an Alibaba GPU trace (openb_node_list_*.csv)")


def load_trace(trace_dir: str, fmt: str = "auto", cache_dir: str | None = None, use_cache: bool = True,
               pods: str = "default", nodes: str = "all_node",
               progress: Callable[[int, int], None] | None = None) -> Trace:
    """Load the trace under `trace_dir` in format `fmt` (or the one detected).

    Args:
        trace_dir: a Google 2011 directory (task_events/, machine_events/) or an Alibaba GPU
            v2023 one (openb_*.csv, in it or in csv/).
        fmt: "google2011", "alibaba-gpu" or "auto" (detected from the files).
        cache_dir: where a Google 2011 trace's parsed copy is cached (default: see docs/traces.md).
        use_cache: read and write that cache.
        pods: Alibaba GPU trace: the pod list openb_pod_list_<pods>.csv.
        nodes: Alibaba GPU trace: the node list openb_node_list_<nodes>.csv.
        progress: progress(parts done, parts) while parsing.

    Returns:
        The Trace: its cluster, every task as one workload, and what loading skipped and counted.

    Raises:
        InputError: a missing directory or file, or a malformed row, naming the file and line.
    """
    fmt = detect_format(trace_dir) if fmt == "auto" else fmt
    if fmt == "google2011":
        return load_google2011(trace_dir, cache_dir=cache_dir, use_cache=use_cache, progress=progress)
    if fmt == "alibaba-gpu":
        return load_alibaba_gpu(trace_dir, pods=pods, nodes=nodes)
    raise InputError(f"unknown trace format {fmt!r} (known: auto, {', '.join(FORMATS)})")


__all__ = ["FORMATS", "Trace", "detect_format", "load_alibaba_gpu", "load_google2011", "load_trace"]
