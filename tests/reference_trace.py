"""Plain-Python reference reading of the Google 2011 trace semantics (csv module, dicts).

Written from the rules of docs/traces.md event by event, with no code shared with
jaxsched.traces, so the tests compare two independent readings; the load benchmark
times it as its baseline.
"""

from __future__ import annotations

import csv
import glob
import gzip
import os

SENTINEL = 2**63 - 1
TERMINAL = {2, 3, 4, 5, 6}


def _num(s, kind):
    return None if s == "" else kind(s)


def load_tasks(trace_dir):
    """{(job, index): dict(arrival_us, start_us, end_us, cpu, mem, priority, ...)} and skip counts."""
    files = sorted(glob.glob(os.path.join(trace_dir, "task_events", "part-*.csv.gz")))
    tasks = {}
    last_time = 0
    for path in files:
        with gzip.open(path, "rt", newline="") as f:
            for row in csv.reader(f):
                time = int(row[0])
                if time == SENTINEL:
                    continue
                last_time = max(last_time, time)
                key = (int(row[2]), int(row[3]))
                event = int(row[5])
                task = tasks.setdefault(key, {"arrival_us": None, "req": None, "start_us": None,
                                              "last": None})
                if event == 0:
                    if task["arrival_us"] is None:
                        task["arrival_us"] = time
                    cpu, mem = _num(row[9], float), _num(row[10], float)
                    if task["req"] is None and cpu is not None and mem is not None:
                        task["req"] = (cpu, mem, _num(row[11], float) or 0.0, int(row[8]),
                                       _num(row[7], int) or 0, bool(_num(row[12], int) or 0))
                elif event == 1:
                    if task["start_us"] is None:
                        task["start_us"] = time
                    task["last"] = ("schedule", time)
                elif event in TERMINAL:
                    task["last"] = ("end", time)
    out, skipped = {}, {"tasks_no_submit": 0, "tasks_no_request": 0, "tasks_never_scheduled": 0}
    for key, t in tasks.items():
        if t["arrival_us"] is None:
            skipped["tasks_no_submit"] += 1
        elif t["req"] is None:
            skipped["tasks_no_request"] += 1
        elif t["start_us"] is None:
            skipped["tasks_never_scheduled"] += 1
        else:
            # `last` is the latest of the SCHEDULE and terminal events: an end only if no SCHEDULE follows.
            ended = t["last"][0] == "end"
            cpu, mem, disk, prio, cls, diff = t["req"]
            out[key] = {"arrival_us": t["arrival_us"], "start_us": t["start_us"],
                        "end_us": t["last"][1] if ended else last_time, "cpu": cpu, "mem": mem, "disk": disk,
                        "priority": prio, "sched_class": cls, "different_machines": diff}
    return out, skipped, last_time


def load_machines(trace_dir):
    """{machine ID: (cpu, mem)} at first ADD, and the number skipped for an empty capacity."""
    first_add = {}
    for path in sorted(glob.glob(os.path.join(trace_dir, "machine_events", "part-*.csv.gz"))):
        with gzip.open(path, "rt", newline="") as f:
            for row in csv.reader(f):
                if int(row[0]) == SENTINEL or int(row[2]) != 0:
                    continue
                first_add.setdefault(int(row[1]), (_num(row[4], float), _num(row[5], float)))
    machines = {m: c for m, c in first_add.items() if c[0] is not None and c[1] is not None}
    return machines, len(first_add) - len(machines)
