"""Trace loaders: semantics on hand-built part files, the real samples against a csv-module
reference, the Parquet cache, and clear errors on bad input."""

import gzip
import os
import shutil

import numpy as np
import pytest

from jaxsched import cli
from jaxsched.errors import InputError
from jaxsched.traces import google2011, load_alibaba_gpu, load_google2011, load_trace

import reference_trace
from samples import ALIBABA, GOOGLE, needs_samples

S = 2**63 - 1


def task_row(time, job, index, event, cpu="", mem="", prio=0, cls=0, diff="", missing=""):
    return [time, missing, job, index, "", event, "user", cls, prio, cpu, mem, "" if cpu == "" else 0.001, diff]


def write_parts(folder, parts):
    os.makedirs(folder, exist_ok=True)
    for i, rows in enumerate(parts):
        with gzip.open(os.path.join(folder, f"part-{i:05d}-of-{len(parts):05d}.csv.gz"), "wt") as f:
            f.writelines(",".join(str(x) for x in r) + "\n" for r in rows)


MACHINES = [[0, 5, 0, "p", 0.5, 0.5], [0, 6, 0, "p", "", ""], [0, 8, 0, "q", 1, 1], [100, 7, 1, "p", "", ""],
            [1_000_000, 8, 1, "q", "", ""], [2_000_000, 8, 0, "q", 0.5, 0.25], [3_000_000, 6, 2, "p", 0.5, 0.5]]

# Two part files; expected values below are worked out by hand from the rules of docs/traces.md.
PARTS = [
    [
        task_row(0, 1, 0, 0, 0.1, 0.2, prio=9, cls=2, diff=1),
        task_row(0, 1, 0, 1),
        task_row(1_000_000, 1, 1, 0, 0.05, 0.05),
        task_row(1_000_000, 2, 0, 0, missing=2),  # SUBMIT without requests
        task_row(1_000_000, 2, 1, 0, 0.2, 0.2),
        task_row(1_000_000, 3, 1, 1),  # SCHEDULE of a task never submitted
        task_row(1_500_000, 3, 0, 0, missing=2),  # never gets a request
        task_row(1_600_000, 3, 0, 1),
        task_row(2_000_000, 1, 1, 1),
        task_row(2_000_000, 2, 0, 0, 0.1, 0.1, prio=4),
        task_row(2_000_000, 2, 1, 5),  # killed while pending: never scheduled
        task_row(3_000_000, 1, 1, 2),  # EVICT, later re-scheduled
        task_row(3_000_000, 2, 0, 1),
        task_row(3_000_000, 4, 0, 0, 0.3, 0.1, prio=11),
        task_row(3_000_000, 4, 0, 1),
    ],
    [
        task_row(4_000_000, 1, 1, 0, 0.3, 0.3),  # resubmission: requests stay those of the first SUBMIT
        task_row(4_000_000, 2, 0, 3),  # FAIL
        task_row(5_000_000, 1, 0, 4),  # FINISH
        task_row(5_000_000, 2, 0, 0, 0.1, 0.1, prio=4),
        task_row(6_000_000, 1, 1, 1),  # running at the trace end
        task_row(7_000_000, 2, 0, 5),  # KILL with no later SCHEDULE: the final terminal event
        task_row(S, 4, 0, 4),  # "after the window": ignored
        task_row(20_000_000, 5, 0, 0, 0.01, 0.01),
        task_row(20_000_000, 5, 0, 1),
        task_row(20_000_000, 5, 0, 4),
    ],
]
# (job, index): (arrival s, duration s, cpu, mem, priority, sched class, different machines)
EXPECTED = {
    (1, 0): (0.0, 5.0, 0.1, 0.2, 9, 2, True),
    (1, 1): (1.0, 18.0, 0.05, 0.05, 0, 0, False),
    (2, 0): (1.0, 4.0, 0.1, 0.1, 4, 0, False),
    (4, 0): (3.0, 17.0, 0.3, 0.1, 11, 0, False),
    (5, 0): (20.0, 0.0, 0.01, 0.01, 0, 0, False),
}


@pytest.fixture
def tiny(tmp_path):
    d = tmp_path / "trace"
    write_parts(d / "task_events", PARTS)
    write_parts(d / "machine_events", [MACHINES])
    return str(d)


@pytest.mark.parametrize("merge_rows", [1, 1 << 22])
def test_semantics_on_hand_built_trace(tiny, tmp_path, monkeypatch, merge_rows):
    monkeypatch.setattr(google2011, "MERGE_MIN_ROWS", merge_rows)  # 1: merge after every part
    tr = load_google2011(tiny, cache_dir=str(tmp_path / "cache"))
    assert [tuple(x) for x in tr.task_ids] == list(EXPECTED)  # sorted by arrival, then job, index
    w = tr.workload
    for i, (arr, dur, cpu, mem, prio, cls, diff) in enumerate(EXPECTED.values()):
        assert (w.arrival[i], w.duration[i]) == (arr, dur)
        np.testing.assert_array_equal(w.demand[i], np.float32([cpu, mem]))
        assert (w.priority[i], w.sched_class[i], bool(w.different_machines[i])) == (prio, cls, diff)
    assert list(w.job) == [0, 0, 1, 2, 3]
    assert tr.skipped == {"tasks_no_submit": 1, "tasks_no_request": 1, "tasks_never_scheduled": 1,
                          "machines_empty_capacity": 1, "machines_never_added": 1}
    assert tr.counts["sentinel_rows"] == 1 and tr.counts["tasks_without_observed_end"] == 2
    assert tr.window == (600.0, 20.0)
    assert list(tr.machine_ids) == [5, 8]
    np.testing.assert_array_equal(tr.cluster.capacity, np.float32([[0.5, 0.5], [1, 1]]))


@pytest.mark.parametrize("pieces", [1, 2, 3, 5])
def test_merge_in_key_ranges_equals_one_reduction(pieces):
    """The final merge, split into key ranges, is the reduction of all the rows at once."""
    from concurrent.futures import ThreadPoolExecutor
    rng = np.random.default_rng(pieces)
    n = 5000
    cpu = rng.random(n)
    cpu[rng.random(n) < 0.5] = np.nan  # the request comes from the first row that has one
    rows = {"key": rng.integers(0, 700, n), "submit_time": rng.integers(0, 10**6, n),
            "sched_time": rng.integers(0, 10**6, n), "last": rng.integers(-1, 10**6, n),
            "last_time": rng.integers(-1, 10**6, n), "cpu": cpu, "mem": rng.random(n), "disk": rng.random(n),
            "flags": rng.integers(0, 100, n).astype(np.int16)}
    cuts = [0, 1200, 1201, 3100, n]  # parts in event order, one of one row
    parts = [google2011._reduce({f: a[lo:hi] for f, a in rows.items()}) for lo, hi in zip(cuts, cuts[1:])]
    parts.append(google2011._reduce({f: a[:0] for f, a in rows.items()}))  # an empty part
    expected = google2011._reduce(rows)
    with ThreadPoolExecutor(2) as pool:
        google2011.MERGE_SPLIT_ROWS, saved = 1, google2011.MERGE_SPLIT_ROWS
        try:
            got = google2011._merge(parts, pool, pieces)
        finally:
            google2011.MERGE_SPLIT_ROWS = saved
    assert set(got) == set(expected)
    has_request = ~np.isnan(expected["cpu"])  # a task without one is skipped: its other request fields are moot
    assert 0 < has_request.sum() < len(has_request)
    for f in expected:
        keep = has_request if f in ("mem", "disk", "flags") else slice(None)
        np.testing.assert_array_equal(got[f][keep], expected[f][keep], err_msg=f)


def test_default_cache_is_the_users_never_the_trace_directory(tiny, tmp_path, monkeypatch):
    monkeypatch.delenv("JAXSCHED_CACHE_DIR", raising=False)
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    before = sorted(os.listdir(tiny))
    assert load_google2011(tiny).cache == "written"
    assert sorted(os.listdir(tiny)) == before  # a writable trace directory is left as it was
    assert len(os.listdir(tmp_path / "xdg" / "jaxsched" / "traces")) == 1
    assert load_google2011(tiny).cache == "hit"


def test_cache_hit_is_identical_and_never_stale(tiny, tmp_path):
    cache = str(tmp_path / "cache")
    cold = load_google2011(tiny, cache_dir=cache)
    warm = load_google2011(tiny, cache_dir=cache)
    assert (cold.cache, warm.cache) == ("written", "hit")
    for field in ("demand", "arrival", "duration", "priority", "sched_class", "different_machines", "job"):
        np.testing.assert_array_equal(getattr(cold.workload, field), getattr(warm.workload, field))
    assert cold.skipped == warm.skipped and cold.counts == warm.counts
    np.testing.assert_array_equal(cold.task_ids, warm.task_ids)
    # A part file changes: the next load parses again and replaces the old entry.
    write_parts(os.path.join(tiny, "task_events"), [PARTS[0], PARTS[1][:-3]])
    changed = load_google2011(tiny, cache_dir=cache)
    assert changed.cache == "written" and changed.workload.num_tasks == 4
    assert len(os.listdir(cache)) == 1
    assert load_google2011(tiny, cache_dir=cache, use_cache=False).cache == "off"


def _corrupt(tiny, name, lines):
    path = os.path.join(tiny, "task_events", name)
    with gzip.open(path, "wt") as f:
        f.writelines(lines)
    return path


def _rows(part):
    return [",".join(str(x) for x in r) + "\n" for r in PARTS[part]]


@pytest.mark.parametrize("edit, message", [
    (lambda rows: rows[:2] + ["1,,2,3,,0,u,0,0,0.1,0.1\n"] + rows[2:], "line 3: expected 13 columns, got 11"),
    (lambda rows: rows[:1] + ["0,,1,7,,0,u,0,0,abc,0.1,0,0\n"] + rows[1:], "line 2, column 10 (CPU request)"),
    (lambda rows: rows[:3] + ["0,,1,7,,0,u,0,0,-0.1,0.1,0,0\n"] + rows[3:], "line 4: CPU request -0.1"),
    (lambda rows: rows[:4] + ["0,,1,7,,12,u,0,0,0.1,0.1,0,0\n"] + rows[4:], "line 5: event type 12"),
    (lambda rows: rows[:1] + [",,1,7,,0,u,0,0,0.1,0.1,0,0\n"] + rows[1:], "line 2: time is empty"),
    (lambda rows: rows[:2] + ["10,,1,7,,0,u,0,0,0.1,0.1,0,0\n"] + rows[2:], "line 3: time 10 is earlier"),
    # Across parts: part 1 starts before part 0's last event (3 s), after a sentinel row or not.
    (lambda rows: ["2500000,,1,7,,0,u,0,0,0.1,0.1,0,0\n"] + rows, "line 1: time 2500000 is earlier"),
    (lambda rows: [f"{S},,4,0,,4,u,0,0,,,,\n", "2500000,,1,7,,0,u,0,0,0.1,0.1,0,0\n"] + rows,
     "line 2: time 2500000 is earlier"),
])
def test_bad_rows_name_file_and_line(tiny, tmp_path, edit, message):
    path = _corrupt(tiny, "part-00001-of-00002.csv.gz", edit(_rows(1)))
    cache = tmp_path / "cache"
    with pytest.raises(InputError) as e:
        load_google2011(tiny, cache_dir=str(cache))
    assert path in str(e.value) and message in str(e.value)
    assert not cache.exists() or not os.listdir(cache)  # nothing half-written


def test_truncated_gzip_names_the_file(tiny, tmp_path):
    path = os.path.join(tiny, "task_events", "part-00000-of-00002.csv.gz")
    body = gzip.compress(("".join(_rows(0)) * 4000).encode())
    with open(path, "wb") as f:
        f.write(body[: len(body) // 2])
    with pytest.raises(InputError, match="truncated or corrupt gzip after line") as e:
        load_google2011(tiny, cache_dir=str(tmp_path / "cache"))
    assert path in str(e.value)
    assert not os.path.exists(tmp_path / "cache") or not os.listdir(tmp_path / "cache")


def test_missing_directories(tmp_path):
    with pytest.raises(InputError, match="no such directory"):
        load_trace(str(tmp_path / "nope"))
    (tmp_path / "t" / "task_events").mkdir(parents=True)
    with pytest.raises(InputError, match="no part-"):
        load_google2011(str(tmp_path / "t"))
    with pytest.raises(InputError, match="neither a Google 2011 trace"):
        load_trace(str(tmp_path / "t" / "task_events"))


def test_cli_reports_bad_trace_in_one_line(tiny, tmp_path, capsys):
    _corrupt(tiny, "part-00001-of-00002.csv.gz", _rows(1)[:2] + ["1,2\n"])
    code = cli.main(["snapshot", "--trace-dir", tiny, "--cache-dir", str(tmp_path / "c"), "--quiet"])
    err = capsys.readouterr().err
    assert code == 2 and err.count("\n") == 1 and "line 3: expected 13 columns, got 2" in err
    assert "Traceback" not in err


@needs_samples
def test_real_sample_matches_csv_module_reference(tmp_path):
    """Parts 00000-00001 of the real trace: every task equal to the plain-Python reading."""
    d = tmp_path / "g"
    (d / "task_events").mkdir(parents=True)
    for part in ("part-00000-of-00500.csv.gz", "part-00001-of-00500.csv.gz"):
        os.symlink(os.path.join(GOOGLE, "task_events", part), d / "task_events" / part)
    os.symlink(os.path.join(GOOGLE, "machine_events"), d / "machine_events")
    tr = load_google2011(str(d), cache_dir=str(tmp_path / "cache"))
    want, skipped, last = reference_trace.load_tasks(str(d))
    assert tr.workload.num_tasks == len(want) > 100_000
    assert {k: v for k, v in tr.skipped.items() if k.startswith("tasks")} == skipped
    assert tr.window[1] == last / 1e6
    w = tr.workload
    ref = [want[(int(j), int(i))] for j, i in tr.task_ids]
    np.testing.assert_array_equal(w.arrival, [t["arrival_us"] / 1e6 for t in ref])
    np.testing.assert_array_equal(w.duration, [(t["end_us"] - t["start_us"]) / 1e6 for t in ref])
    np.testing.assert_array_equal(w.demand, np.float32([[t["cpu"], t["mem"]] for t in ref]))
    np.testing.assert_array_equal(w.priority, [t["priority"] for t in ref])
    np.testing.assert_array_equal(w.sched_class, [t["sched_class"] for t in ref])
    np.testing.assert_array_equal(w.different_machines, [t["different_machines"] for t in ref])
    assert np.all(np.diff(w.arrival) >= 0)
    machines, empty = reference_trace.load_machines(str(d))
    assert tr.cluster.num_machines == len(machines) and tr.skipped["machines_empty_capacity"] == empty
    np.testing.assert_array_equal(tr.cluster.capacity, np.float32([machines[m] for m in tr.machine_ids]))


@needs_samples
def test_alibaba_gpu_is_three_dimensional(tmp_path):
    import csv

    tr = load_alibaba_gpu(ALIBABA)
    assert tr.cluster.resources == ("cpu", "mem", "gpu") and tr.cluster.capacity.shape == (1523, 3)
    np.testing.assert_array_equal(tr.cluster.capacity.max(axis=0), [1, 1, 1])
    with open(os.path.join(ALIBABA, "csv", "openb_node_list_all_node.csv")) as f:
        nodes = list(csv.DictReader(f))
    with open(os.path.join(ALIBABA, "csv", "openb_pod_list_default.csv")) as f:
        pods = {p["name"]: p for p in csv.DictReader(f)}
    top = [max(float(n[k]) for n in nodes) for k in ("cpu_milli", "memory_mib", "gpu")]
    assert tr.workload.num_tasks == len(pods) == 8152
    for i in (0, 100, 4000, 8151):
        p = pods[tr.task_ids[i]]
        gpu = float(p["gpu_milli"]) / 1000 if p["num_gpu"] == "1" else float(p["num_gpu"])
        want = np.float32([float(p["cpu_milli"]) / top[0], float(p["memory_mib"]) / top[1], gpu / top[2]])
        np.testing.assert_array_equal(tr.workload.demand[i], want)
        assert tr.workload.arrival[i] == float(p["creation_time"])
    assert tr.counts["pods_never_scheduled"] == sum(p["scheduled_time"] == "" for p in pods.values())


def test_alibaba_bad_qos_names_line(tmp_path):
    d = tmp_path / "a"
    d.mkdir()
    (d / "openb_node_list_all_node.csv").write_text("sn,cpu_milli,memory_mib,gpu,model\nn0,32000,262144,2,T4\n")
    (d / "openb_pod_list_default.csv").write_text(
        "name,cpu_milli,memory_mib,num_gpu,gpu_milli,gpu_spec,qos,pod_phase,creation_time,deletion_time,"
        "scheduled_time\np0,1000,1024,1,500,,LS,Running,0,10,1\np1,1000,1024,0,0,,XX,Running,0,10,1\n")
    with pytest.raises(InputError, match="line 3: unknown qos 'XX'"):
        load_alibaba_gpu(str(d))
    (d / "openb_pod_list_default.csv").write_text("name,cpu_milli,memory_mib,num_gpu\np0,-5,1,0\n")
    with pytest.raises(InputError, match="line 2: cpu_milli -5.0"):
        load_alibaba_gpu(str(d))
