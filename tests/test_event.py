"""Event mode: the batched JAX replay against the heapq reference, the figures, and the CLI."""

import json

import jax.numpy as jnp
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from jaxsched import event, rng
from jaxsched.errors import InputError
from jaxsched.event.stats import StepFunction, row_stats, utilization_series
from jaxsched.types import Cluster, Workload

import reference_event
from cli_runner import run
from samples import needs_samples

POLICIES = ("best_fit", "first_fit", "alpha_evolve", "worst_fit", "random", "dot")
# Scores computed without rounding on grid inputs (sums and products of multiples of 1/64 and
# powers of two), in float32 as in float64: their exact ties are ties in both.
EXACT = {"best_fit", "first_fit", "worst_fit", "random", "dot"}
TRACE = "../shared/data/google2011"


def grid_case(seed, M=10, N=160, heavy=True):
    """Capacities and demands on a binary grid (exact in float32), arrivals and durations in whole seconds."""
    g = np.random.default_rng(seed)
    cap = g.choice([0.25, 0.5, 1.0], size=(M, 2)).astype(np.float32)
    dem = (g.integers(1, 20, size=(N, 2)) / 64).astype(np.float32)
    arrival = np.sort(g.integers(0, 200, N)).astype(np.float64)
    duration = g.integers(0, 400 if heavy else 60, N).astype(np.float64)
    priority = g.choice([0, 1, 4, 9, 10], N).astype(np.int32)
    return Cluster(cap), Workload(demand=dem, priority=priority, arrival=arrival, duration=duration)


def reference_rows(cluster, workload, rep, names, sample_k, preempt, keys, stats=None):
    """Each row's reference replay; `stats`, a list, gets each row's reference counts."""
    inp = rep.inputs
    sw, nw = np.asarray(rng.hash_words(keys, rng.STREAM_SAMPLE)), np.asarray(rng.hash_words(keys, rng.STREAM_NOISE))
    out = []
    for b, name in enumerate(names):
        segs, first, evictions, tie = reference_event.replay(
            np.asarray(cluster.capacity), inp.demand, inp.arrival, inp.duration,
            np.asarray(workload.priority)[inp.order], name, sample_k, preempt, sw[b], nw[b],
            exact_scores=name in EXACT, stats=None if stats is None else stats.setdefault(b, {}))
        segs = np.asarray(segs, np.int64).reshape(-1, 4)
        segs[:, 0] = inp.order[segs[:, 0]]
        first_start = np.full(len(first), -1, np.int64)
        first_start[inp.order] = first
        out.append((segs, first_start, evictions, tie))
    return out


SEEDS = 2


@pytest.mark.parametrize("sample_k,preempt", [(0, False), (4, False), (4, True)])
def test_replay_matches_the_reference_engine(sample_k, preempt):
    compared, queued, evicted = 0, 0, 0
    names = POLICIES
    for seed in range(SEEDS):
        cluster, wl = grid_case(seed)
        keys = jnp.concatenate([rng.trial_keys(seed, "event", 1)] * len(names))
        rep = event.replay(cluster, wl, event.EventConfig(names, sample_k=sample_k, preempt=preempt), keys)
        for b, (segs, first, evictions, tie) in enumerate(reference_rows(cluster, wl, rep, names, sample_k,
                                                                         preempt, keys)):
            if tie:  # a float32 near tie of scores may decide differently from float64
                continue
            compared += 1
            np.testing.assert_array_equal(rep.segments[b], segs, err_msg=f"{names[b]} seed {seed}")
            np.testing.assert_array_equal(rep.first_start[b], first)
            assert rep.evictions[b] == evictions
            queued += int(np.sum(first > np.rint(np.asarray(wl.arrival)).astype(np.int64) * 1000))
            evicted += evictions
    assert compared >= 0.8 * SEEDS * len(names), compared
    assert queued > 100  # the cases do exercise the pending queue
    assert (evicted > 20) == preempt


def overloaded_case(seed, M=24, N=300, shapes=12):
    """A cluster overloaded for most of the replay: most tasks wait, with few distinct demands."""
    g = np.random.default_rng(seed)
    cap = g.choice([0.5, 1.0], size=(M, 2)).astype(np.float32)
    pool = (g.integers(1, 24, size=(shapes, 2)) / 64).astype(np.float32)
    arrival = np.sort(g.integers(0, 200, N)).astype(np.float64)
    return Cluster(cap), Workload(demand=pool[g.integers(0, shapes, N)], priority=g.choice([0, 1, 4, 9, 10], N),
                                  arrival=arrival, duration=g.integers(1, 300, N).astype(np.float64))


SMALL_LISTS = {"queue_window": 2, "list_ahead": 1, "group_blocks": 1}


@pytest.mark.parametrize("knobs,seed,sample_k,preempt", [
    ({}, 1, 0, False),
    ({}, 2, 4, True),
    # drain lists built a few entries at a time, one bitmap block per pass, windows of two tries
    (SMALL_LISTS, 3, 4, True),
    # the same, with the list found by reading the whole queue (more live classes than MAX_LIVE)
    (dict(SMALL_LISTS, max_live=1, pass_chunk=64), 4, 4, False),
])
def test_long_queue_matches_the_reference_engine(knobs, seed, sample_k, preempt):
    """Under overload the drain's certain failures are counted without draws (class
    certificates), and only the entries of classes that may fit are listed and tried: the runs
    are still exactly the reference's, which tries every entry with draws."""
    names = ("first_fit", "best_fit")
    cluster, wl = overloaded_case(seed)
    keys = jnp.concatenate([rng.trial_keys(seed, "event", 1)] * len(names))
    rep = event.replay(cluster, wl, event.EventConfig(names, sample_k=sample_k, preempt=preempt, **knobs), keys)
    waited = rep.first_start > np.rint(np.asarray(wl.arrival) * 1000).astype(np.int64)
    assert waited.sum(axis=1).min() > 60  # the queue is long
    assert rep.drain_certain.min() > 5 * rep.drain_draws.max() > 0  # most drain tries need no draws
    stats = {}
    for b, (segs, first, evictions, tie) in enumerate(reference_rows(cluster, wl, rep, names, sample_k,
                                                                     preempt, keys, stats)):
        assert not tie
        # every try of the reference's drains is one the replay drew for or certified to fail
        assert rep.drain_draws[b] + rep.drain_certain[b] == stats[b]["drain_tries"]
        assert stats[b]["events"] == 2 * wl.num_tasks  # an arrival and a completion each
        np.testing.assert_array_equal(rep.segments[b], segs, err_msg=f"{names[b]} seed {seed}")
        np.testing.assert_array_equal(rep.first_start[b], first)
        assert rep.evictions[b] == evictions


def test_rows_split_over_two_devices_match_one_device(monkeypatch):
    """Six rows of different policies, with preemption, run as two programs on the two CPU devices
    (tests/conftest.py) and give the one-device replay exactly (the reference test above runs the
    split path too)."""
    assert event.device_groups(POLICIES) == [(0, 3), (3, 6)]
    cluster, wl = grid_case(7)
    keys = jnp.concatenate([rng.trial_keys(2, "event", 1)] * len(POLICIES))
    cfg = event.EventConfig(POLICIES, sample_k=3, preempt=True)
    seen = []
    split = event.replay(cluster, wl, cfg, keys, progress=lambda done, total: seen.append((done, total)))
    monkeypatch.setattr(event.run, "device_groups", lambda policies: [(0, len(policies))])
    single = event.replay(cluster, wl, cfg, keys)
    for b in range(len(POLICIES)):
        np.testing.assert_array_equal(split.segments[b], single.segments[b])
    np.testing.assert_array_equal(split.first_start, single.first_start)
    np.testing.assert_array_equal(split.evictions, single.evictions)
    assert seen[-1] == (2 * wl.num_tasks, 2 * wl.num_tasks)
    assert all(a[0] <= b[0] for a, b in zip(seen, seen[1:]))  # the slowest share's count never goes back


def test_runs_conserve_durations_and_capacity():
    """Every task runs exactly its duration in total, and no machine is ever over capacity."""
    cluster, wl = grid_case(11, M=8, N=200)
    names = ("best_fit", "alpha_evolve")
    keys = jnp.concatenate([rng.trial_keys(3, "event", 1)] * 2)
    rep = event.replay(cluster, wl, event.EventConfig(names, sample_k=3, preempt=True), keys)
    dur = rep.inputs.duration[np.argsort(rep.inputs.order)]  # ticks, in workload order
    cap = np.asarray(cluster.capacity, np.float64)
    dem = np.asarray(wl.demand, np.float64)
    for b in range(len(names)):
        segs = rep.segments[b]
        assert np.all(segs[:, 3] >= segs[:, 2])
        total = np.bincount(segs[:, 0], weights=segs[:, 3] - segs[:, 2], minlength=wl.num_tasks)
        placed = rep.first_start[b] >= 0
        np.testing.assert_array_equal(total[placed], dur[placed])
        for m in range(cluster.num_machines):
            on = segs[segs[:, 1] == m]
            times = np.unique(on[:, 2])
            for t in times:
                alive = (on[:, 2] <= t) & (t < on[:, 3])
                assert np.all(dem[on[alive, 0]].sum(axis=0) <= cap[m] + 1e-6)


def test_production_is_never_evicted_and_victims_resume():
    cluster, wl = grid_case(4, M=6, N=150)
    keys = rng.trial_keys(0, "event", 1)
    rep = event.replay(cluster, wl, event.EventConfig(("best_fit",), preempt=True), keys)
    segs = rep.segments[0]
    counts = np.bincount(segs[:, 0], minlength=wl.num_tasks)
    assert rep.evictions[0] == int(np.sum(np.maximum(counts - 1, 0))) > 0
    assert np.all(np.asarray(wl.priority)[counts > 1] < 9)


def test_same_results_for_a_task_order_of_ties():
    """Tasks arriving at the same instant are numbered by workload index; results map back to it."""
    cluster, wl = grid_case(2, N=80)
    perm = np.random.default_rng(0).permutation(wl.num_tasks)
    shuffled = wl.take(perm)
    keys = rng.trial_keys(0, "event", 1)
    cfg = event.EventConfig(("best_fit",))
    a = event.replay(cluster, wl, cfg, keys)
    b = event.replay(cluster, shuffled, cfg, keys)
    # Same arrival times but a different index order among ties: each run maps back to its own indices.
    assert sorted(a.segments[0][:, 0].tolist()) == list(range(wl.num_tasks))
    assert sorted(perm[b.segments[0][:, 0]].tolist()) == list(range(wl.num_tasks))


def test_too_many_evictions_is_an_error_not_a_silent_cap():
    cluster, wl = grid_case(4, M=6, N=150)
    with pytest.raises(InputError, match="max-evictions"):
        event.replay(cluster, wl, event.EventConfig(("best_fit",), preempt=True), rng.trial_keys(0, "event", 1),
                     max_evictions=2)


def test_step_function_integral_against_a_fine_sum():
    times = np.array([0.0, 1.0, 1.0, 2.5, 4.0])
    jumps = np.array([2.0, 1.0, -1.0, 3.0, -5.0])
    f = StepFunction(times, jumps)
    assert f.value(np.array([-1.0, 0.0, 0.5, 1.0, 3.0, 5.0])).tolist() == [0, 2, 2, 2, 5, 0]
    # By hand: 2 on [0, 2.5), 5 on [2.5, 4): integral over [0.5, 3.0] = 2*2 + 5*0.5.
    assert f.mean(0.5, 3.0) == pytest.approx((4.0 + 2.5) / 2.5)
    assert f.max() == 5


def test_row_stats_by_hand():
    # One machine (1, 1); task 0 runs [0, 10) s, task 1 arrives at 2, waits, runs [10, 14) s.
    segments = np.array([[0, 0, 0, 10_000], [1, 0, 10_000, 14_000]])
    first = np.array([0, 10_000])
    arrival = np.array([0.0, 2.0])
    demand = np.array([[0.5, 1.0], [0.25, 0.5]])
    out = row_stats(segments, first, arrival, np.array([4, 9]), demand, np.array([[1.0, 1.0]]), 1e-3, by_band=True)
    assert out["window_s"] == [pytest.approx(0.2), 2.0]  # 10% of the arrival span to the last arrival
    assert out["utilization"] == pytest.approx([0.5, 1.0])
    assert out["latency"]["max_s"] == pytest.approx(8.0) and out["latency"]["p50_s"] == pytest.approx(4.0)
    assert out["latency_by_band"]["production"]["max_s"] == pytest.approx(8.0)
    assert out["pending_max"] == 1 and out["latency"]["never_placed"] == 0
    series = utilization_series(segments, arrival, demand, np.array([[1.0, 1.0]]), 1e-3, dt=5.0)
    # Buckets [0,5), [5,10), [10,15): running 1, 1, 0.8; pending 0.6, 1, 0.
    np.testing.assert_allclose(series[:, 1], [1.0, 1.0, 0.8])
    np.testing.assert_allclose(series[:, 2], [0.6, 1.0, 0.0])
    np.testing.assert_allclose(series[:, 3], [0.5, 0.5, 0.2])


@settings(max_examples=4, deadline=None)
@given(st.integers(0, 10_000), st.sampled_from([0, 3]))
def test_placed_counts_add_up(seed, sample_k):
    cluster, wl = grid_case(seed, M=6, N=60, heavy=False)
    rep = event.replay(cluster, wl, event.EventConfig(("best_fit", "cosine"), sample_k=sample_k),
                       jnp.concatenate([rng.trial_keys(seed, "event", 1)] * 2))
    for b in range(2):
        placed = rep.first_start[b] >= 0
        assert len(np.unique(rep.segments[b][:, 0])) == placed.sum() == len(rep.segments[b])



@needs_samples
def test_cli_event_on_the_trace_sample(tmp_path, capsys):
    path, prefix = tmp_path / "e.json", tmp_path / "util"
    code, out, err = run(["event", "--trace-dir", TRACE, "--max-tasks", "3000", "--policy", "best_fit,alpha_evolve",
                          "--preempt", "--json", str(path), "--util-csv", str(prefix), "--util-dt", "600"], capsys)
    assert code == 0, err
    doc = json.loads(path.read_text())
    assert list(doc["policies"]) == ["best_fit", "alpha_evolve"] and doc["workload"]["tasks"] == 3000
    mean = doc["policies"]["best_fit"]["mean"]
    for key in ("utilization_cpu", "utilization_mem", "latency_p50_s", "latency_p90_s", "latency_p99_s",
                "latency_max_s", "latency_never_placed", "pending_mean", "pending_max", "evictions",
                "latency_production_p99_s"):
        assert key in mean, key
    assert "best_fit" in out and "p99_s" in out
    lines = (tmp_path / "util_best_fit.csv").read_text().splitlines()
    assert lines[0] == "time_s,running,pending,util_cpu,util_mem"
    span = max(r["span_s"][1] for r in doc["policies"]["best_fit"]["trials"])
    assert len(lines) - 1 == int(np.ceil(span / 600))
    assert sorted(p.name for p in tmp_path.iterdir()) == ["e.json", "util_alpha_evolve.csv", "util_best_fit.csv"]


@pytest.mark.parametrize("args,message", [
    (["--util-dt", "0"], "--util-dt"),
    (["--max-evictions", "5"], "--max-evictions"),
    (["--util-csv", "/nonexistent/dir/u"], "--util-csv"),
    (["--policy", "nope"], "--policy"),
    (["--at", "busiest"], "unrecognized"),
])
def test_cli_event_bad_flags(args, message, capsys):
    code, _, err = run(["event", "--machines", "50", "--quiet"] + args, capsys)
    assert code == 2 and message in err and "Traceback" not in err


def test_cli_event_util_csv_cap(tmp_path, capsys):
    code, _, err = run(["event", "--machines", "50", "--rho", "0.5", "--quiet", "--util-csv", str(tmp_path / "u"),
                        "--util-dt", "0.001"], capsys)
    assert code == 2 and "rows per file" in err
    assert list(tmp_path.iterdir()) == []


def test_cli_event_same_json_for_a_seed(tmp_path, capsys):
    docs = []
    for name in ("a", "b"):
        path = tmp_path / f"{name}.json"
        code, _, err = run(["event", "--machines", "60", "--rho", "0.9", "--trials", "2", "--policy", "random,best_fit",
                            "--seed", "5", "--quiet", "--json", str(path)], capsys)
        assert code == 0, err
        docs.append(json.loads(path.read_text()))
    for d in docs:  # the command line names the file; timing is the wall clock
        d.pop("command"), d.pop("timing")
    assert docs[0] == docs[1]
    trials = docs[0]["policies"]["random"]["trials"]
    assert trials[0] != trials[1]  # each trial has its own draws


def test_victims_are_ordered_by_their_demand_over_every_dimension():
    """Three dimensions, built so that the two readings of "largest demand" disagree: A has the
    larger d_cpu + d_mem, B the larger sum over all three. The rule is the sum over all: B goes."""
    cluster = Cluster(np.ones((1, 3), np.float32), resources=("cpu", "mem", "gpu"))
    dem = np.array([[0.25, 0.25, 0.0],  # A: cpu + mem 0.5, all 0.5
                    [0.125, 0.125, 0.5],  # B: cpu + mem 0.25, all 0.75
                    [0.75, 0.75, 0.125]], np.float32)  # production: fits once either A or B is gone
    wl = Workload(demand=dem, priority=np.array([0, 0, 9], np.int32), arrival=np.array([0.0, 1.0, 2.0]),
                  duration=np.array([100.0, 100.0, 10.0]))
    rep = event.replay(cluster, wl, event.EventConfig(("best_fit",), preempt=True), rng.trial_keys(0, "event", 1))
    segs = rep.segments[0]
    runs = np.bincount(segs[:, 0], minlength=3)
    assert rep.evictions[0] == 1 and runs.tolist() == [1, 2, 1]  # B evicted and resumed, A untouched


def test_too_many_evictions_stop_the_replay_at_the_first_call_past_the_limit(monkeypatch):
    from jaxsched.event import run as event_run

    cluster, wl = grid_case(4, M=6, N=150)
    monkeypatch.setattr(event_run, "STEPS_PER_CALL", 8)
    monkeypatch.setattr(event_run, "MAX_STEPS_PER_CALL", 8)
    calls, jit = [], event_run._run_jit
    monkeypatch.setattr(event_run, "_run_jit", lambda *a, **k: calls.append(1) or jit(*a, **k))
    cfg, keys = event.EventConfig(("best_fit",), preempt=True), rng.trial_keys(0, "event", 1)
    event.replay(cluster, wl, cfg, keys)
    full = len(calls)
    calls.clear()
    with pytest.raises(InputError, match="max-evictions"):
        event.replay(cluster, wl, cfg, keys, max_evictions=1)
    assert 0 < len(calls) < full  # stopped once the log overflowed, not at the end of the replay


def test_a_workload_without_tasks_replays_to_empty_figures():
    cluster = Cluster(np.ones((4, 2), np.float32))
    empty = Workload(demand=np.zeros((0, 2), np.float32), priority=np.zeros(0, np.int32), arrival=np.zeros(0),
                     duration=np.zeros(0))
    res = event.run_event(cluster, empty, event.EventRunConfig(policies=("best_fit", "random"), trials=2,
                                                              preempt=True))
    for name in ("best_fit", "random"):
        for row in (res.row(name, t) for t in range(2)):
            assert row["utilization"] == [0.0, 0.0] and row["segments"] == 0 and row["evictions"] == 0
            assert row["latency"] == {"placed": 0, "never_placed": 0} and row["pending_max"] == 0.0
    series = utilization_series(np.zeros((0, 4), np.int64), np.zeros(0), np.zeros((0, 2)), cluster.capacity, 1.0,
                                dt=60.0)
    assert series.tolist() == [[0.0, 0.0, 0.0, 0.0, 0.0]]
