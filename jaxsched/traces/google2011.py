"""The Google 2011 cluster trace (clusterdata-2011-2): task_events and machine_events.

Schema: docs/traces.md (gzipped CSV part files, no header, times in
microseconds, resources normalized to the largest machine). The workload it yields,
one task per (job ID, task index):

- arrival: the task's first SUBMIT; requests, priority, scheduling class and the
  different-machines flag: from its first SUBMIT that carries CPU and memory requests;
- duration: from its first SCHEDULE to its final terminal event (EVICT, FAIL, FINISH,
  KILL, LOST) when no SCHEDULE follows that event; a task with no such end runs to the
  trace end (the last event time seen in the files read);
- events at 2^63-1 ("after the window") are ignored; time 0 means "before the window";
- skipped and counted: tasks with no SUBMIT, with no request on any SUBMIT, or never
  scheduled in the files read.
- machines: capacity at the machine's first ADD; machines whose first ADD has an empty
  CPU or memory field, or that are never added, are skipped and counted.

Part files are streamed one at a time: each is reduced to one row per task (first,
min and max of the fields above), and the reductions are merged as they accumulate,
so memory grows with the number of tasks, never with the number of event rows.
"""

from __future__ import annotations

import collections
import functools
import glob
import itertools
import os
from concurrent.futures import ThreadPoolExecutor
from typing import Callable

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from ..devices import cores
from ..errors import InputError
from ..types import Cluster, Workload
from . import cache as trace_cache
from .csvfile import Column, numpy_column, read_csv, require_present, require_range
from .trace import Trace

SOURCE = "google2011"
PARSER_VERSION = 1  # bump when the semantics change: old cache entries are then never read
SENTINEL = 2**63 - 1
WINDOW_START_US = 600_000_000
US = 1e6
SUBMIT, SCHEDULE, EVICT, FAIL, FINISH, KILL, LOST = range(7)
TERMINAL = (EVICT, FAIL, FINISH, KILL, LOST)
# What each event type (0-8) is to the reduction; UPDATE_PENDING and UPDATE_RUNNING (7, 8) are dropped.
_OTHER, _SUBMIT, _SCHEDULE, _TERMINAL = range(4)
_EVENT_KIND = np.array([_SUBMIT, _SCHEDULE] + [_TERMINAL] * len(TERMINAL) + [_OTHER, _OTHER], np.int8)
_FMAX = float(np.finfo(np.float64).max)

TASK_COLUMNS = (
    Column("time", "int", "time"), Column("missing", "int", "missing info"), Column("job", "int", "job ID"),
    Column("index", "int", "task index"), Column("machine", "int", "machine ID"),
    Column("event", "int", "event type"), Column("user", "str", "user"),
    Column("sched_class", "int", "scheduling class"), Column("priority", "int", "priority"),
    Column("cpu", "float", "CPU request"), Column("mem", "float", "memory request"),
    Column("disk", "float", "disk space request"),
    Column("different_machines", "int", "different-machines restriction"),
)
_TASK = {c.name: c for c in TASK_COLUMNS}
_TASK_READ = ("time", "job", "index", "event", "sched_class", "priority", "cpu", "mem", "disk",
              "different_machines")

MACHINE_COLUMNS = (
    Column("time", "int", "time"), Column("machine", "int", "machine ID"), Column("event", "int", "event type"),
    Column("platform", "str", "platform ID"), Column("cpu", "float", "CPUs"), Column("mem", "float", "Memory"),
)
_MACHINE = {c.name: c for c in MACHINE_COLUMNS}

# A task's key packs (job ID, task index) into one int64 so that rows reduce with one
# stable sort; the trace's job IDs stay below 2^39 and its task indices below 2^24.
JOB_BITS, INDEX_BITS = 39, 24
_NONE_MIN = np.iinfo(np.int64).max  # "no value" of a min-reduced field
# Each event row becomes one row of these fields, and rows of one task reduce to one:
#   submit_time, sched_time: min over SUBMIT, SCHEDULE rows (else _NONE_MIN);
#   last: max of 2 x sequence number + (1 if terminal) over SCHEDULE and terminal rows,
#         so its low bit says whether the task's last such event is a terminal one;
#   last_time: max time over those rows (times never decrease, so it is that event's);
#   cpu, mem, disk, flags: from the first SUBMIT row with requests (cpu NaN: none yet).
_MIN_FIELDS = ("submit_time", "sched_time")
_MAX_FIELDS = ("last", "last_time")
_REQ_FIELDS = ("cpu", "mem", "disk", "flags")  # flags = priority | class << 4 | different machines << 6
MERGE_MIN_ROWS = 1 << 22  # merge part reductions once they hold this many rows (and at least the merged table's)
MERGE_SPLIT_ROWS = 1 << 16  # a final merge this large is split into one key range per worker


def part_files(trace_dir: str, table: str) -> list[str]:
    """The part files of `table` (e.g. task_events) under trace_dir, in name order."""
    folder = os.path.join(trace_dir, table)
    if not os.path.isdir(folder):
        raise InputError(f"trace directory {trace_dir} has no {table}/ folder "
                         f"(expected {table}/part-*.csv.gz, as in the Google 2011 trace)")
    files = sorted(glob.glob(os.path.join(folder, "part-*.csv.gz")) + glob.glob(os.path.join(folder, "part-*.csv")))
    if not files:
        raise InputError(f"{folder}: no part-*.csv.gz files")
    return files


def _reduce(rows: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
    """One row per key: the min/max fields reduced, the request fields from the first row that has them.

    `rows` are in event order and the sort is stable, so "first" means earliest.
    """
    if len(rows["key"]) == 0:
        return dict(rows)
    order = np.argsort(rows["key"], kind="stable")
    key = rows["key"][order]
    starts = np.flatnonzero(np.r_[True, key[1:] != key[:-1]])
    out = {"key": key[starts]}
    for f in _MIN_FIELDS:
        out[f] = np.minimum.reduceat(rows[f][order], starts)
    for f in _MAX_FIELDS:
        out[f] = np.maximum.reduceat(rows[f][order], starts)
    n = len(key)
    first = np.minimum.reduceat(np.where(np.isnan(rows["cpu"][order]), n, np.arange(n)), starts)
    take = order[np.minimum(first, n - 1)]
    for f in _REQ_FIELDS:
        out[f] = rows[f][take]
    out["cpu"] = np.where(first < n, out["cpu"], np.nan)
    return out


def _concat(parts: list[dict[str, np.ndarray]]) -> dict[str, np.ndarray]:
    return {f: np.concatenate([p[f] for p in parts]) for f in parts[0]}


def _encode_part(t: pa.Table, path: str, part_no: int) -> tuple[dict[str, np.ndarray], dict[str, int]]:
    """The rows of one task_events part (read as `t`) that matter, in reduce form, and its counts.

    The counts say where the part's time order breaks, if it does: `back_row`, its first
    live row earlier than a previous row of the part (-1: none), and `first_row` and
    `first_time`, its first live row, for the check against the parts before it.
    """
    require_present(t, [_TASK[n] for n in ("time", "job", "index", "event", "priority")], path, header=False)
    time, event = numpy_column(t, "time"), numpy_column(t, "event")
    job, index, priority = numpy_column(t, "job"), numpy_column(t, "index"), numpy_column(t, "priority")
    require_range(event, 0, 8, _TASK["event"], path, False)
    require_range(priority, 0, 11, _TASK["priority"], path, False)
    require_range(job, 0, (1 << JOB_BITS) - 1, _TASK["job"], path, False)
    require_range(index, 0, (1 << INDEX_BITS) - 1, _TASK["index"], path, False)
    cpu, mem, disk = (numpy_column(t, n) for n in ("cpu", "mem", "disk"))
    for name, values in (("cpu", cpu), ("mem", mem), ("disk", disk)):
        require_range(values, 0.0, _FMAX, _TASK[name], path, False)
    live = time != SENTINEL
    all_live = bool(live.all())
    live_time = time if all_live else np.where(live, time, -1)
    # Event order is row order; times must not decrease, within a part or across parts.
    if all_live:  # the first row earlier than the running max is the first one earlier than its predecessor
        back = np.flatnonzero(time[1:] < time[:-1])[:1] + 1
    else:
        back = np.flatnonzero(live & (live_time < np.maximum.accumulate(np.r_[-1, live_time[:-1]])))
    first = int(np.argmax(live)) if live.any() else -1
    kind = _EVENT_KIND[event]
    if not all_live:
        kind = np.where(live, kind, _OTHER)
    keep = None if bool((kind != _OTHER).all()) else np.flatnonzero(kind != _OTHER)

    def kept(a):
        return a if keep is None else a[keep]

    kind, tk, cpu, mem = kept(kind), kept(time), kept(cpu), kept(mem)
    submit, sched, s_or_t = kind == _SUBMIT, kind == _SCHEDULE, kind >= _SCHEDULE
    seq = (np.int64(part_no) << np.int64(32)) + (np.arange(len(time)) if keep is None else keep)
    flags = (kept(priority) | (kept(numpy_column(t, "sched_class", 0)) << 4)
             | ((kept(numpy_column(t, "different_machines", 0)) != 0).astype(np.int64) << 6))
    rows = {
        "key": (kept(job) << np.int64(INDEX_BITS)) | kept(index),
        "submit_time": np.where(submit, tk, _NONE_MIN), "sched_time": np.where(sched, tk, _NONE_MIN),
        "last": np.where(s_or_t, 2 * seq + (kind == _TERMINAL), -1), "last_time": np.where(s_or_t, tk, -1),
        "cpu": np.where(submit & ~np.isnan(mem), cpu, np.nan), "mem": mem,
        "disk": np.nan_to_num(kept(disk), nan=0.0), "flags": flags.astype(np.int16),
    }
    counts = {"event_rows": t.num_rows, "sentinel_rows": int(np.sum(~live)),
              "last_time_us": int(live_time.max(initial=-1)), "back_row": int(back[0]) if back.size else -1,
              "back_time": int(time[back[0]]) if back.size else -1,
              "first_row": first, "first_time": int(time[first]) if first >= 0 else -1}
    return rows, counts


def _check_order(path: str, c: dict[str, int], prev_time: int) -> None:
    """Raise InputError naming the first line of a part whose time is earlier than a previous event's."""
    rows = [r for r in (c["back_row"], c["first_row"] if 0 <= c["first_time"] < prev_time else -1) if r >= 0]
    if rows:
        row = min(rows)
        time = c["first_time"] if row == c["first_row"] else c["back_time"]
        raise InputError(f"{path}, line {row + 1}: time {time} is earlier than a previous "
                         f"event's (part files must be in time order)")


def _read_part(path: str, part_no: int):
    """One task_events part read, encoded and reduced to one row per task (a worker thread's job)."""
    table = read_csv(path, TASK_COLUMNS, _TASK_READ)
    rows, counts = _encode_part(table, path, part_no)
    del table
    return _reduce(rows), counts  # a part's own rows first: fewer to merge, and sorted while in cache


# Cached task columns whose values repeat (requests, flags, job IDs); the times and task indices are stored plain.
DICTIONARY_COLUMNS = ("job", "job_code", "cpu", "mem", "disk", "priority", "sched_class", "different_machines",
                      "observed_end")


def _reduce_tasks(files: list[str], progress, machine_files: list[str]):
    """All task_events parts, streamed: (the per-task reduction, the event counts, the machine table).

    One worker thread per core reads, encodes and reduces parts (pyarrow, ISA-L and
    numpy release the GIL), at most two parts a worker ahead of this thread, which
    checks their time order and merges their reductions in part order; the machine
    events are the workers' last job.
    """
    merged, pending, pending_rows = [], [], 0
    counts = {"event_rows": 0, "sentinel_rows": 0, "last_time_us": 0}
    workers = max(1, min(cores(), len(files)))
    jobs = iter([functools.partial(_read_part, f, i) for i, f in enumerate(files)]
                + [functools.partial(_machine_table, machine_files)])
    with ThreadPoolExecutor(workers) as pool:
        ahead = collections.deque(pool.submit(job) for job in itertools.islice(jobs, 2 * workers))
        for part_no, path in enumerate(files):
            part, c = ahead.popleft().result()
            job = next(jobs, None)
            if job is not None:
                ahead.append(pool.submit(job))
            _check_order(path, c, counts["last_time_us"])
            counts["event_rows"] += c["event_rows"]
            counts["sentinel_rows"] += c["sentinel_rows"]
            counts["last_time_us"] = max(counts["last_time_us"], c["last_time_us"])
            pending.append(part)
            pending_rows += len(part["key"])
            if pending_rows >= max(MERGE_MIN_ROWS, len(merged[0]["key"]) if merged else 0):
                merged, pending, pending_rows = [_reduce(_concat(merged + pending))], [], 0
            if progress is not None:
                progress(part_no + 1, len(files))
        reduced = _merge(merged + pending, pool, workers)
        return reduced, counts, ahead.popleft().result()


def _merge(parts: list[dict[str, np.ndarray]], pool: ThreadPoolExecutor, pieces: int) -> dict[str, np.ndarray]:
    """`_reduce` of the parts' reductions (each sorted by key), in `pieces` key ranges reduced on `pool`.

    A key's rows all fall in one range and keep their part order there, so the pieces,
    joined in key order, are exactly the reduction of all the rows at once.
    """
    total = sum(len(p["key"]) for p in parts)
    if pieces <= 1 or total < MERGE_SPLIT_ROWS:
        return _reduce(_concat(parts))
    sample = np.sort(np.concatenate([p["key"][:: max(1, len(p["key"]) // 256)] for p in parts]))
    bounds = np.unique(sample[(np.arange(1, pieces) * len(sample)) // pieces])
    cuts = [np.r_[0, np.searchsorted(p["key"], bounds), len(p["key"])] for p in parts]
    jobs = [pool.submit(lambda j=j: _reduce(_concat([{f: a[c[j]:c[j + 1]] for f, a in p.items()}
                                                       for p, c in zip(parts, cuts)])))
            for j in range(len(bounds) + 1)]
    return _concat([job.result() for job in jobs])


def _task_table(r: dict[str, np.ndarray], trace_end_us: int) -> tuple[pa.Table, dict[str, int]]:
    """The cached task table (sorted by arrival) from the merged per-task reduction."""
    no_submit = r["submit_time"] == _NONE_MIN
    no_request = ~no_submit & np.isnan(r["cpu"])
    never = ~no_submit & ~no_request & (r["sched_time"] == _NONE_MIN)
    skipped = {"tasks_no_submit": int(no_submit.sum()), "tasks_no_request": int(no_request.sum()),
               "tasks_never_scheduled": int(never.sum())}
    ok = ~(no_submit | no_request | never)
    r = {f: v[ok] for f, v in r.items()}
    ended = (r["last"] & 1) == 1  # the last SCHEDULE-or-terminal event is a terminal one
    job, index = r["key"] >> np.int64(INDEX_BITS), r["key"] & np.int64((1 << INDEX_BITS) - 1)
    # The reduction is sorted by key, i.e. by (job, index): a stable sort on arrival alone
    # breaks its ties by (job, index), and dense job numbers are a running count of new jobs.
    order = np.argsort(r["submit_time"], kind="stable")
    job_code = np.cumsum(np.r_[False, job[1:] != job[:-1]])
    flags = r["flags"]
    cols = {
        "job": job, "index": index, "job_code": job_code.astype(np.int32),
        "arrival_us": r["submit_time"], "start_us": r["sched_time"],
        "end_us": np.where(ended, r["last_time"], trace_end_us), "observed_end": ended,
        "cpu": r["cpu"], "mem": r["mem"], "disk": r["disk"],
        "priority": (flags & 15).astype(np.int8), "sched_class": ((flags >> 4) & 3).astype(np.int8),
        "different_machines": (flags >> 6) & 1 == 1,
    }
    return pa.table({f: v[order] for f, v in cols.items()}), skipped


def _machine_table(files: list[str]) -> tuple[pa.Table, dict[str, int]]:
    """Machines with their capacity at first ADD, by machine ID."""
    parts = []
    for path in files:
        t = read_csv(path, MACHINE_COLUMNS)
        require_present(t, [_MACHINE[n] for n in ("time", "machine", "event")], path, header=False)
        require_range(numpy_column(t, "event"), 0, 2, _MACHINE["event"], path, False)
        for name in ("cpu", "mem"):
            require_range(numpy_column(t, name), 0.0, _FMAX, _MACHINE[name], path, False)
        parts.append(t.filter(pc.not_equal(t.column("time"), SENTINEL)))
    events = pa.concat_tables(parts)
    seen = pc.count_distinct(events.column("machine")).as_py()
    adds = events.filter(pc.equal(events.column("event"), 0))
    keep_nulls = pc.ScalarAggregateOptions(skip_nulls=False)
    first = adds.group_by("machine", use_threads=False).aggregate(
        [("cpu", "first", keep_nulls), ("mem", "first", keep_nulls), ("platform", "first", keep_nulls)])
    empty = pc.or_(first.column("cpu_first").is_null(), first.column("mem_first").is_null())
    ok = first.filter(pc.invert(empty))
    table = pa.table({"machine": ok.column("machine"), "cpu": ok.column("cpu_first"),
                      "mem": ok.column("mem_first"), "platform": ok.column("platform_first")}
                     ).sort_by("machine")
    skipped = {"machines_empty_capacity": int(pc.sum(empty).as_py() or 0),
               "machines_never_added": int(seen - first.num_rows)}
    return table, skipped


def _to_trace(tasks: pa.Table, machines: pa.Table, meta: dict, cache_state: str) -> Trace:
    if machines.num_rows == 0:
        raise InputError("the trace's machine_events add no machine with a capacity")
    cap = np.stack([numpy_column(machines, "cpu"), numpy_column(machines, "mem")], 1).astype(np.float32)
    demand = np.stack([numpy_column(tasks, "cpu"), numpy_column(tasks, "mem")], 1).astype(np.float32)
    arrival = numpy_column(tasks, "arrival_us")
    start, end = numpy_column(tasks, "start_us"), numpy_column(tasks, "end_us")
    workload = Workload(
        demand=demand, priority=numpy_column(tasks, "priority").astype(np.int32),
        arrival=arrival / US, duration=(end - start) / US,
        sched_class=numpy_column(tasks, "sched_class").astype(np.int32),
        different_machines=numpy_column(tasks, "different_machines").astype(bool),
        job=numpy_column(tasks, "job_code"),
    )
    counts = dict(meta["counts"], tasks_without_observed_end=int(np.sum(~numpy_column(tasks, "observed_end"))))
    return Trace(
        source=SOURCE, cluster=Cluster(capacity=cap), workload=workload,
        window=(WINDOW_START_US / US, meta["counts"]["last_time_us"] / US),
        skipped=dict(meta["skipped"]), counts=counts,
        task_ids=np.stack([numpy_column(tasks, "job"), numpy_column(tasks, "index")], 1),
        machine_ids=numpy_column(machines, "machine"), cache=cache_state,
    )


def load_google2011(trace_dir: str, cache_dir: str | None = None, use_cache: bool = True,
                    progress: Callable[[int, int], None] | None = None) -> Trace:
    """Load the task_events and machine_events part files under `trace_dir`.

    A parsed copy is cached as Parquet (see `traces.cache`) and read back on the next
    load of the same files.

    Args:
        trace_dir: the directory holding task_events/ and machine_events/.
        cache_dir: where the parsed copy is cached (default: see docs/traces.md).
        use_cache: read and write that cache.
        progress: progress(parts done, parts) while parsing.

    Returns:
        The Trace of the part files read.

    Raises:
        InputError: a missing directory or part file, a corrupt gzip or a malformed row,
            naming the file and line.
    """
    if not os.path.isdir(trace_dir):
        raise InputError(f"trace directory {trace_dir}: no such directory")
    task_files = part_files(trace_dir, "task_events")
    machine_files = part_files(trace_dir, "machine_events")
    cache_dir = cache_dir or trace_cache.default_cache_dir()
    prefix, key = trace_cache.cache_key(SOURCE, PARSER_VERSION, trace_dir, task_files + machine_files)
    if use_cache:
        hit = trace_cache.read_entry(cache_dir, key)
        if hit is not None:
            tables, meta = hit
            return _to_trace(tables["tasks"], tables["machines"], meta, "hit")
    reduced, counts, (machines, machine_skips) = _reduce_tasks(task_files, progress, machine_files)
    tasks, skipped = _task_table(reduced, counts["last_time_us"])
    meta = {"source": SOURCE, "parser_version": PARSER_VERSION, "counts": counts,
            "skipped": {**skipped, **machine_skips},
            "files": [os.path.relpath(f, trace_dir) for f in task_files + machine_files]}
    if use_cache:
        trace_cache.write_entry(cache_dir, prefix, key, {"tasks": tasks, "machines": machines}, meta,
                                dictionary={"tasks": DICTIONARY_COLUMNS})
    return _to_trace(tasks, machines, meta, "written" if use_cache else "off")
