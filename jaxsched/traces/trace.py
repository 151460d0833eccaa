"""A loaded trace: the cluster, every task as a workload, and what loading counted."""

from __future__ import annotations

import dataclasses

import numpy as np

from ..types import Cluster, Workload


@dataclasses.dataclass(frozen=True)
class Trace:
    """A real trace as jaxsched uses it: one cluster and one workload of all tasks.

    Tasks are sorted by arrival (ties by their trace ids). `skipped` counts the rows
    or tasks that loading left out and why; `counts` holds the other facts it counted.
    """

    source: str  # "google2011" or "alibaba-gpu-v2023"
    cluster: Cluster
    workload: Workload
    window: tuple[float, float]  # seconds: start of the trace window, last event time seen
    skipped: dict[str, int]
    counts: dict[str, int]
    task_ids: np.ndarray  # [N] or [N, 2]: the trace's own task identity, e.g. (job ID, task index)
    machine_ids: np.ndarray  # [M]: the trace's own machine identity
    cache: str = "off"  # "hit": read from the cache; "written": parsed and cached; "off"
    default_instant: str = "busiest"  # the snapshot instant when none is given: "busiest" or "all"

    def take(self, index) -> "Trace":
        """The trace restricted to the tasks at `index` (integer array or boolean mask)."""
        index = np.asarray(index)
        return dataclasses.replace(self, workload=self.workload.take(index), task_ids=self.task_ids[index])

    def describe(self) -> dict:
        """JSON-ready facts about the trace: source, sizes, window, skips and counts."""
        return {
            "source": self.source,
            "machines": self.cluster.num_machines,
            "tasks": self.workload.num_tasks,
            "resources": list(self.cluster.resources),
            "window_s": [float(self.window[0]), float(self.window[1])],
            "skipped": dict(self.skipped),
            "counts": dict(self.counts),
        }
