"""Workload filters, the busiest instant and trace snapshots through the CLI."""

import json
import os

import numpy as np
import pytest

from jaxsched import cli
from jaxsched.errors import InputError
from jaxsched.filters import Filters, alive_at, apply_filters, busiest_instant, snapshot_tasks
from jaxsched.types import Workload

from cli_runner import results_of
from test_traces import ALIBABA, GOOGLE, needs_samples


def workload(arrival, duration, demand=None, priority=None):
    n = len(arrival)
    demand = np.full((n, 2), 0.1, np.float32) if demand is None else np.asarray(demand, np.float32)
    priority = np.zeros(n, np.int32) if priority is None else np.asarray(priority, np.int32)
    return Workload(demand, priority, np.asarray(arrival, float), np.asarray(duration, float))


def test_busiest_instant_is_earliest_maximum_with_half_open_lives():
    # Lives: [0,10) [5,15) [10,20) [10,11) [12,12): at 10 the first ends as two start.
    w = workload([0, 5, 10, 10, 12], [10, 10, 10, 1, 0])
    assert busiest_instant(w) == (10.0, 3)
    np.testing.assert_array_equal(alive_at(w, 10.0), [False, True, True, True, False])
    np.testing.assert_array_equal(alive_at(w, 12.0), [False, True, True, False, False])  # zero length: never alive
    assert busiest_instant(workload([0, 1, 2], [1, 1, 1])) == (0.0, 1)  # ties: the earliest


def test_filters_compose_in_order():
    w = workload(arrival=[0, 100, 86_000, 87_000, 90_000, 200_000], duration=[1] * 6,
                 demand=[[0.1, 0.1], [0.95, 0.1], [0.1, 0.1], [0.2, 0.3], [0.1, 0.1], [0.1, 0.1]],
                 priority=[9, 10, 0, 11, 9, 9])
    index, dropped = apply_filters(w, Filters(days=1, min_priority=9, max_task_dim=0.9, max_tasks=2),
                                   window_start=600)
    # days keeps arrivals < 87,000 s: tasks 0-2 (task 3 arrives at 87,000: out); priority drops task 2;
    # max_task_dim drops task 1; max_tasks keeps the first 2 of what is left (only task 0 is).
    assert list(index) == [0]
    assert dropped == {"days": 3, "min_priority": 1, "max_task_dim": 1, "max_tasks": 0}
    index, dropped = apply_filters(w, Filters(max_tasks=3))
    assert list(index) == [0, 1, 2] and dropped == {"max_tasks": 3}
    assert apply_filters(w, Filters())[0].size == 6


def test_snapshot_tasks_modes_and_errors():
    w = workload([0, 5, 10], [10, 10, 10])
    idx, info = snapshot_tasks(w, Filters())
    assert list(idx) == [0, 1] and info["instant_s"] == 5.0 and info["instant"] == "busiest"
    idx, info = snapshot_tasks(w, Filters(), at=12.0)
    assert list(idx) == [1, 2] and info["instant"] == "given"
    assert list(snapshot_tasks(w, Filters(), at="all")[0]) == [0, 1, 2]
    with pytest.raises(InputError, match="no task is alive"):
        snapshot_tasks(w, Filters(), at=100.0)
    with pytest.raises(InputError, match="leave no task"):
        snapshot_tasks(w, Filters(min_priority=11))


def _snapshot_json(tmp_path, name, args, capsys):
    path = tmp_path / f"{name}.json"
    code = cli.main(["snapshot", *args, "--trials", "2", "--json", str(path), "--quiet"])
    assert code == 0, capsys.readouterr().err
    return results_of(path)


@needs_samples
def test_trace_snapshot_cli_filters_and_same_json_cold_and_warm(tmp_path, capsys):
    d = tmp_path / "g"
    (d / "task_events").mkdir(parents=True)
    part = "part-00001-of-00500.csv.gz"
    os.symlink(os.path.join(GOOGLE, "task_events", part), d / "task_events" / part)
    os.symlink(os.path.join(GOOGLE, "machine_events"), d / "machine_events")
    args = ["--trace-dir", str(d), "--cache-dir", str(tmp_path / "cache"), "--min-priority", "9",
            "--max-task-dim", "0.9", "--policy", "best_fit,alpha_evolve", "--sample-k", "16"]
    cold = _snapshot_json(tmp_path, "cold", args, capsys)
    warm = _snapshot_json(tmp_path, "warm", args, capsys)
    assert cold == warm
    doc = json.loads(cold)
    wl = doc["workload"]
    assert wl["source"] == "google2011" and wl["snapshot"]["instant"] == "busiest"
    assert wl["tasks"] == wl["snapshot"]["alive_tasks"] > 0
    assert set(wl["snapshot"]["dropped"]) == {"min_priority", "max_task_dim"}
    assert doc["policies"]["best_fit"]["placed"]["mean"] <= wl["tasks"]


@needs_samples
def test_alibaba_snapshot_runs_with_three_dimensions(tmp_path, capsys):
    doc = json.loads(_snapshot_json(tmp_path, "ali", ["--trace-dir", ALIBABA, "--policy", "best_fit,cosine",
                                                      "--max-tasks", "3000"], capsys))
    assert doc["workload"]["resources"] == ["cpu", "mem", "gpu"] and doc["workload"]["tasks"] == 3000
    assert doc["workload"]["snapshot"]["instant"] == "all"
    assert "utilization_gpu" in doc["policies"]["cosine"] and "stranding_gpu" in doc["policies"]["cosine"]


@pytest.mark.parametrize("args, message", [
    (["--days", "1"], "--days: only for a real trace"),
    (["--trace-dir", "/nonexistent-trace"], "no such directory"),
    (["--trace-dir", ".", "--machines", "10"], "--machines: only for the synthetic workload"),
    (["--at", "soon", "--trace-dir", "."], "--at: expected 'busiest', 'all'"),
    (["--min-priority", "12", "--trace-dir", "."], "--min-priority: expected a trace priority 0..11"),
])
def test_trace_flag_errors(args, message, capsys):
    code = cli.main(["snapshot", *args, "--quiet"])
    err = capsys.readouterr().err
    assert code == 2 and message in err and err.count("\n") == 1
