"""CvxCluster rows of event mode: rounds against the plain Python reference (HiGHS prices),
feasibility at every instant, the snapshot-like stream, determinism and bad settings."""

import dataclasses
import json
import os
import subprocess
import sys

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from jaxsched import rng
from jaxsched.cvx import exact, online
from jaxsched.cvx.allocation import allocate
from jaxsched.cvx.greedy import draw_words, place
from jaxsched.cvx.prices import Prices, price_inputs
from jaxsched.cvx.problem import anti_affinity_groups, from_snapshot
from jaxsched.errors import InputError
from jaxsched.event import EventRunConfig, prepare, rounds, run_event
from jaxsched.types import Cluster, Workload

import reference_cvx
import reference_event_cvx
from cli_runner import run

WEIGHTS = (1.0, 2.0, 4.0)


def grid_case(seed, M=8, N=90, span=60, longest=150):
    """Capacities and demands on a binary grid (exact in float32), whole-second times, jobs of 2-4
    tasks of which some must run on distinct machines."""
    g = np.random.default_rng(seed)
    cap = g.choice([0.25, 0.5, 1.0], size=(M, 2)).astype(np.float32)
    dem = (g.integers(1, 24, size=(N, 2)) / 64).astype(np.float32)
    dem[g.random(N) < 0.1] = dem[0]  # repeated demands: classes with several tasks
    arrival = np.sort(g.integers(0, span, N)).astype(np.float64)
    duration = g.integers(1, longest, N).astype(np.float64)
    priority = g.choice([0, 1, 4, 9, 10], N).astype(np.int32)
    job = np.cumsum(g.random(N) < 0.35).astype(np.int32)
    flagged = (job % 3 == 0)
    return Cluster(cap), Workload(demand=dem, priority=priority, arrival=arrival, duration=duration,
                                  job=job, different_machines=flagged)


def _highs_grid_prices(problem):
    """HiGHS's exact LP duals (in this process) rounded to 1/16: exact in float32, so that both
    greedies see the same net utilities."""
    lp = exact._solve_lp(problem, None)
    return np.round(lp.prices * 16) / 16, np.round(lp.group_prices * 16) / 16


FIELDS = ("free", "demand", "weight", "group", "held_group", "held_server")


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_rounds_match_the_reference_at_highs_prices_and_stay_feasible(seed, monkeypatch):
    cluster, workload = grid_case(seed)
    inputs = prepare(workload, True)
    key = rng.trial_keys(seed, rounds.EXPERIMENT, 1)[0]

    problems = []  # each round's problem as the engine posed it

    def highs_round(now, cand, shapes, cfg, warm, round_key, window, min_slots):
        problems.append(now.tasks(cand))
        lam, mu = _highs_grid_prices(problems[-1])
        padded = online._padded(now, cand, online._bucket(len(cand)))
        pl, _ = place(padded, shapes, price_inputs(padded, shapes), lam, mu, round_key, window, min_slots)
        theta = jnp.zeros((len(shapes.count), now.demand.shape[1] + now.num_groups), jnp.float32)
        return pl[:len(cand)], Prices(lam=lam, mu=mu, dual=0.0, primal=0.0, iterations=0, theta=theta), 0.0, False

    monkeypatch.setattr(rounds, "allocate_round", highs_round)
    row = rounds.replay_rounds(cluster, workload, inputs, WEIGHTS, key, round_s=1.0)

    order = inputs.order
    base = rounds.make_problem(cluster.capacity, inputs.demand,
                               weight=rounds.band_weights(workload.priority[order], WEIGHTS),
                               group=anti_affinity_groups(workload)[order])

    def reference_allocate(k, tick, free, cand, held):
        gids = sorted({int(base.group[c]) for c in cand if base.group[c] >= 0})
        pairs = [(g, j) for (g, j), n in sorted(held.items()) if g in gids for _ in range(n)]
        now = dataclasses.replace(base.tasks(np.asarray(cand)), free=free.astype(np.float32),
                                  held_group=np.asarray([p[0] for p in pairs], np.int32).reshape(-1),
                                  held_server=np.asarray([p[1] for p in pairs], np.int32).reshape(-1))
        for f in FIELDS:  # the same round problem as the engine's, so one HiGHS solve serves both
            np.testing.assert_array_equal(getattr(now, f), getattr(problems[k], f), err_msg=f"round {k}: {f}")
        lam, mu = _highs_grid_prices(now)
        words = np.asarray(draw_words(jax.random.fold_in(key, k)))
        placement, _ = reference_cvx.greedy(now.capacity, now.free, now.server_type, now.demand, now.weight,
                                            now.task_type, now.group, now.allowance(), lam, mu, words[0], words[1])
        return placement

    server, start, ticks = reference_event_cvx.rounds(cluster.capacity, inputs.demand, base.weight, base.group,
                                                      inputs.arrival, inputs.duration, 1000, reference_allocate)
    np.testing.assert_array_equal(row.log.tick, ticks)
    first = np.full(len(order), -1)
    first[order] = start
    np.testing.assert_array_equal(row.first_start, first)
    on = row.segments[:, 0]
    np.testing.assert_array_equal(row.segments[:, 1], server[np.argsort(order)][on])
    assert 0 < len(ticks) and np.sum(start >= 0) > 0
    assert np.any(start > inputs.arrival[start >= 0].min() + 1000), "no task waited for a later round"
    group = np.full(len(order), -1)
    group[order] = base.group
    reference_event_cvx.check_feasible(cluster.capacity, np.asarray(workload.demand), group, row.segments)


def test_jax_prices_keep_every_instant_feasible_and_rounds_on_the_grid():
    cluster, workload = grid_case(7, N=150, span=90, longest=200)
    cfg = EventRunConfig(policies=("cvxcluster",), trials=1, seed=3, preempt=True, cvx_round_s=2.0)
    res = run_event(cluster, workload, cfg)
    seg = res.replay.segments[0]
    inputs = res.replay.inputs
    group = anti_affinity_groups(workload)
    reference_event_cvx.check_feasible(cluster.capacity, np.asarray(workload.demand), group, seg)
    t0 = inputs.arrival[0]
    assert np.all((seg[:, 2] - t0) % 2000 == 0), "a start off the 2 s grid"
    arrival_tick = np.rint(np.asarray(workload.arrival) / inputs.tick_s)
    assert np.all(seg[:, 2] >= arrival_tick[seg[:, 0]])
    fits_empty = np.any(np.all(np.asarray(workload.demand)[:, None] <= cluster.capacity[None] + 1e-6, axis=2), axis=1)
    assert np.all((res.replay.first_start[0] >= 0) == fits_empty), "a task that fits stayed queued"
    row = res.summary()["cvxcluster"]
    assert row["mean"]["evictions"] == 0 and row["cvx"]["eviction"] == "none"
    assert row["cvx"]["rounds"] >= 1 and "production" in row["trials"][0]["latency_by_band"]


def test_a_snapshot_like_stream_places_what_the_snapshot_allocation_places():
    # Every task arrives at t = 0 and runs past the last round that could place it: the first
    # round is a snapshot allocation (other random draws, padded prices).
    cluster, workload = grid_case(11, M=12, N=120)
    workload = dataclasses.replace(workload, arrival=np.zeros(workload.num_tasks),
                                   duration=np.full(workload.num_tasks, 1e4))
    cfg = EventRunConfig(policies=("cvxcluster",), trials=1, seed=2)
    res = run_event(cluster, workload, cfg)
    first = res.replay.first_start[0]
    problem = from_snapshot(cluster, workload)
    at_zero = float(problem.weight[first == 0].sum())
    snap = allocate(problem, seed=2)
    lp = exact.solve_lp(problem)
    assert at_zero <= lp.objective + 1e-6
    assert abs(at_zero - snap.objective) <= 0.02 * lp.objective, (at_zero, snap.objective, lp.objective)


def test_band_weightings_and_trials_are_rows():
    cluster, workload = grid_case(4, N=60)
    cfg = EventRunConfig(policies=("best_fit", "cvxcluster"), trials=2, seed=1,
                         cvx_band_weights=((1, 2, 4), (1, 4, 16)))
    res = run_event(cluster, workload, cfg)
    assert res.policies == ("best_fit", "cvxcluster_w1-2-4", "cvxcluster_w1-4-16")
    assert len(res.rows) == 6 and len(res.replay.segments) == 6
    s = res.summary()
    assert s["cvxcluster_w1-4-16"]["cvx"]["band_weights"] == [1, 4, 16]
    assert "cvx" not in s["best_fit"]


def test_bad_round_or_band_weights_are_refused():
    cluster, workload = grid_case(0, N=10)
    for kw in ({"cvx_round_s": 0.0}, {"cvx_round_s": float("nan")}, {"cvx_band_weights": ((1, -2, 4),)},
               {"cvx_band_weights": ((0, 0, 0),)}, {"cvx_band_weights": ((1, 2),)}, {"cvx_round_s": 1e-4}):
        with pytest.raises(InputError):
            run_event(cluster, workload, EventRunConfig(policies=("cvxcluster",), **kw))


@pytest.mark.parametrize("args, message", [
    (["--cvx-round-s", "0"], "--cvx-round-s"),
    (["--cvx-band-weights", "1,-2,4"], "--cvx-band-weights"),
    (["--cvx-band-weights", "1,2"], "three numbers"),
])
def test_cli_bad_cvx_flags(args, message, capsys):
    code, _, err = run(["event", "--machines", "10", "--policy", "best_fit,cvxcluster", *args], capsys)
    assert code == 2 and message in err and len(err.strip().splitlines()) == 1


def test_cli_cvx_flags_need_cvxcluster(capsys):
    code, _, err = run(["event", "--machines", "10", "--policy", "best_fit", "--cvx-round-s", "5"], capsys)
    assert code == 2 and "only with cvxcluster" in err


SCRIPT = """
import json, sys, numpy as np
sys.path.insert(0, {tests!r})
from test_event_cvx import grid_case
from jaxsched.event import EventRunConfig, run_event
c, w = grid_case(5, N=80)
r = run_event(c, w, EventRunConfig(policies=("cvxcluster", "best_fit"), trials=2, seed=9, preempt=True))
print(json.dumps({{"first": r.replay.first_start.tolist(), "seg": [s.tolist() for s in r.replay.segments]}}))
"""


def test_same_rows_on_one_and_two_devices():
    outs = []
    for n in (1, 2):
        env = dict(os.environ, XLA_FLAGS=f"--xla_force_host_platform_device_count={n}")
        code = SCRIPT.format(tests=os.path.dirname(__file__))
        out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, check=True,
                             timeout=600).stdout
        outs.append(json.loads(out.strip().splitlines()[-1]))
    assert outs[0] == outs[1]


def test_cli_event_with_cvxcluster_rows_and_their_report(tmp_path, capsys):
    out, prefix = tmp_path / "e.json", tmp_path / "u"
    code, stdout, err = run(["event", "--machines", "12", "--rho", "1.2", "--policy", "best_fit,cvxcluster",
                             "--cvx-round-s", "600", "--preempt", "--json", str(out), "--util-csv", str(prefix)], capsys)
    assert code == 0, err
    assert "cvxcluster: " in stdout and "never evicts" in stdout
    doc = json.loads(out.read_text())
    row = doc["policies"]["cvxcluster"]
    assert row["cvx"]["rounds"] >= 1 and row["mean"]["evictions"] == 0
    assert doc["timing"]["cvxcluster"]["cvxcluster"]["round_s_mean"] > 0
    assert "latency_production_p99_s" in doc["policies"]["best_fit"]["mean"]
    html = tmp_path / "r.html"
    code, _, err = run(["report", str(out), f"{prefix}_best_fit.csv", f"{prefix}_cvxcluster.csv", "-o", str(html),
                        "--quiet"], capsys)
    assert code == 0, err
    page = html.read_text()
    for part in ("CvxCluster rounds", "Latency by priority band", "pending tasks over time"):
        assert part in page


def test_band_weightings_read_from_flags_and_toml_lists():
    from jaxsched.cli.options import band_weightings

    two = ((1.0, 2.0, 4.0), (1.0, 4.0, 16.0))
    assert band_weightings("1,2,4/1,4,16") == two
    assert band_weightings([[1, 2, 4], [1, 4, 16]]) == two
    assert band_weightings([1, 2, 4]) == two[:1]
    for bad in ("1,2", "1,2,4/1,-1,4", "0,0,0", "1,2,x"):
        with pytest.raises(ValueError):
            band_weightings(bad)
