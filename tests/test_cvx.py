"""CvxCluster: prices against HiGHS, the greedy against its numpy reference and the optimum, constraints."""

import dataclasses
import json
import time

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from jaxsched import rng
from jaxsched.cvx import exact
from jaxsched.cvx.allocation import EXPERIMENT, allocate
from jaxsched.cvx.greedy import draw_words, place
from jaxsched.cvx.instances import replicate, synthetic_problem
from jaxsched.cvx.online import run_online
from jaxsched.cvx.prices import price_inputs, solve_prices
from jaxsched.cvx.problem import aggregate, check_placement, make_problem, objective
from jaxsched.errors import InputError

import reference_cvx
from cli_runner import run
from samples import needs_samples

CASES = [(30, 1.3, 1), (50, 1.5, 2), (40, 0.9, 3), (60, 2.0, 4)]


@pytest.fixture(scope="module", params=CASES, ids=lambda c: f"M{c[0]}-rho{c[1]}-s{c[2]}")
def case(request):
    M, rho, seed = request.param
    problem, _ = synthetic_problem(M, rho, seed)
    return problem, exact.solve_lp(problem), allocate(problem, seed=seed), seed


def test_dual_within_half_percent_of_highs_lp(case):
    problem, lp, alloc, _ = case
    dual = float(alloc.prices.dual)
    assert dual >= lp.objective * (1 - 1e-5)  # any dual point bounds the LP optimum from above
    assert dual <= lp.objective * 1.005
    assert float(alloc.prices.primal) <= lp.objective * (1 + 1e-5)


def test_greedy_within_five_percent_of_the_optimum(case):
    # The LP optimum bounds the integer optimum from above, so this bounds the gap to it.
    problem, lp, alloc, seed = case
    check_placement(problem, alloc.placement)
    # The prices come from a float32 ascent whose reductions XLA vectorizes by the CPU's
    # instruction set (AVX against AVX2/AVX-512): their last bits differ, and the greedy, a
    # discontinuous function of the prices, can then place other tasks. On 12 of 64 instances
    # of experiments/cvx_gap_family.py its objective moved, by up to 2.0% of the bound
    # (docs/cvx.md). So each case is held to 5% (its own gap plus such a move), and the
    # abstract's 3% to the mean over the cases (test below), which one move cannot break.
    assert alloc.objective >= 0.95 * lp.objective
    assert alloc.objective <= lp.objective + 1e-6


def test_greedy_within_three_percent_of_the_optimum_on_average():
    ratios = []
    for M, rho, seed in CASES:
        problem, _ = synthetic_problem(M, rho, seed)
        ratios.append(allocate(problem, seed=seed).objective / exact.solve_lp(problem).objective)
    assert np.mean(ratios) >= 0.97, ratios


def test_greedy_matches_numpy_reference(case):
    # On grid inputs (demands multiples of 1/64, prices of 1/16) net utilities are exact in float32 as in
    # float64, so exact ties are ties in both and every tie rule is exercised.
    problem, _, alloc, seed = case
    demand = np.maximum(np.round(problem.demand * 64), 1) / 64
    p = make_problem(problem.capacity, demand, weight=problem.weight, server_type=problem.server_type,
                     task_type=problem.task_type, group=problem.group)
    shapes = aggregate(p)
    lam = np.round(np.asarray(alloc.prices.lam) * 16) / 16
    mu = np.round(np.asarray(alloc.prices.mu) * 16) / 16
    key = rng.trial_keys(seed, EXPERIMENT, 1)[0]
    placement, _ = place(p, shapes, price_inputs(p, shapes), lam, mu, key)
    words = np.asarray(draw_words(key))
    ref, _ = reference_cvx.greedy(p.capacity, p.free, p.server_type, p.demand, p.weight, p.task_type, p.group,
                                  p.allowance(), lam, mu, words[0], words[1])
    assert 0 < np.sum(ref >= 0) < p.num_tasks
    np.testing.assert_array_equal(placement, ref)


def test_mip_optimum_bounds_the_greedy():
    problem, _ = synthetic_problem(6, 1.4, 5)
    problem = problem.tasks(np.arange(min(problem.num_tasks, 60)))
    mip = exact.solve_mip(problem, time_limit=60)
    lp = exact.solve_lp(problem)
    alloc = allocate(problem, seed=5)
    assert mip.optimal
    check_placement(problem, mip.placement)
    assert objective(problem, mip.placement) == pytest.approx(mip.objective)
    assert alloc.objective <= mip.objective + 1e-9 <= lp.objective + 1e-6
    assert alloc.objective >= 0.9 * mip.objective


def test_the_mip_keeps_to_its_time_limit_on_a_model_too_large_to_finish():
    """400 servers, 7,000 tasks: 2.3 million binaries, whose presolve and hand-over to HiGHS
    alone take longer than 2 s. The whole call keeps to the limit, and says it found nothing."""
    problem, _ = synthetic_problem(400, 1.2, 0)
    t = time.perf_counter()
    mip = exact.solve_mip(problem, time_limit=2.0)
    took = time.perf_counter() - t
    assert took <= 2.0 + exact.KILL_GRACE_S + 0.3 and mip.seconds <= took
    assert not mip.found and not mip.optimal and mip.bound == float("inf") and np.all(mip.placement == -1)
    assert "time limit" in mip.status


def test_check_placement_catches_each_violation():
    p = make_problem([[1.0, 1.0], [1.0, 1.0]], [[0.6, 0.1], [0.6, 0.1], [0.1, 0.1]], server_type=[0, 1],
                     task_type=[-1, -1, 0], group=[-1, 0, 0])
    check_placement(p, np.array([0, 1, -1]))
    with pytest.raises(AssertionError, match="over capacity"):
        check_placement(p, np.array([0, 0, -1]))
    with pytest.raises(AssertionError, match="wrong type"):
        check_placement(p, np.array([0, -1, 1]))
    with pytest.raises(AssertionError, match="anti-affinity"):
        check_placement(p, np.array([-1, 0, 0]))


def test_anti_affinity_machine_types_and_gpus_are_honored():
    # 5 tasks of one group on 3 servers: at most 3 placed, on distinct servers; GPU tasks only on the GPU
    # server; type-1 tasks only on type-1 servers.
    cap = [[1, 1, 0], [1, 1, 0], [1, 1, 1]]
    dem = [[0.1, 0.1, 0]] * 5 + [[0.1, 0.1, 0.5]] * 3 + [[0.1, 0.1, 0]] * 2
    p = make_problem(cap, dem, server_type=[0, 1, 0], task_type=[-1] * 8 + [1, 1], group=[0] * 5 + [-1] * 5)
    a = allocate(p)
    check_placement(p, a.placement)
    grouped = a.placement[:5]
    assert np.sum(grouped >= 0) == 3 and len(set(grouped[grouped >= 0])) == 3
    assert set(a.placement[5:7]) == {2} and a.placement[7] == -1  # two 0.5-GPU tasks fill the GPU server
    assert set(a.placement[8:]) == {1}
    # A group-0 task already runs on server 2: now only two of the five fit.
    held = dataclasses.replace(p, held_group=np.array([0], np.int32), held_server=np.array([2], np.int32))
    b = allocate(held)
    check_placement(held, b.placement)
    assert set(b.placement[:5]) == {-1, 0, 1}


@settings(max_examples=6, deadline=None)
@given(seed=st.integers(0, 10_000), M=st.integers(1, 12), N=st.integers(1, 60), G=st.integers(0, 3),
       T=st.integers(1, 2))
def test_property_constraints_and_maximality(seed, M, N, G, T):
    g = np.random.default_rng(seed)
    cap = g.choice([0.25, 0.5, 1.0], size=(M, 3)).astype(np.float32)
    cap[:, 2] *= g.random(M) < 0.5
    free = cap * g.choice([0.3, 1.0], size=(M, 1)).astype(np.float32)
    dem = g.uniform(0, 0.4, size=(N, 3)).astype(np.float32)
    dem[:, 2] *= g.random(N) < 0.3
    p = make_problem(cap, dem, weight=g.choice([1.0, 2.0, 4.0], N), free=free, server_type=g.integers(0, T, M),
                     task_type=g.integers(-1, T, N), group=g.integers(-1, G, N) if G else None)
    if p.num_groups:  # some servers already run a task of some group
        pairs = np.unique(np.stack([g.integers(0, p.num_groups, 6), g.integers(0, M, 6)], 1), axis=0)
        p = dataclasses.replace(p, held_group=pairs[:, 0].astype(np.int32), held_server=pairs[:, 1].astype(np.int32))
    a = allocate(p, seed=seed)
    check_placement(p, a.placement)
    # An unplaced task fits no allowed server of the final state (free capacity only shrinks).
    left = p.free.astype(np.float64).copy()
    on = a.placement >= 0
    np.add.at(left, a.placement[on], -p.demand[on].astype(np.float64))
    used = np.zeros_like(p.allowance())
    np.add.at(used, (p.group[on & (p.group >= 0)], a.placement[on & (p.group >= 0)]), 1)
    for i in np.flatnonzero(~on):
        ok = np.all(p.demand[i] <= left + 1e-6, axis=1)
        ok &= (p.task_type[i] == -1) | (p.server_type == p.task_type[i])
        if p.group[i] >= 0:
            ok &= used[p.group[i]] < p.allowance()[p.group[i]]
        assert not ok.any(), f"task {i} left unplaced but fits server {np.argmax(ok)}"


def test_warm_start_needs_fewer_steps():
    problem, _ = synthetic_problem(40, 1.5, 6)
    cold = solve_prices(problem)
    warm = solve_prices(problem, warm=cold.theta)
    assert int(warm.iterations) < int(cold.iterations)
    assert float(warm.dual) <= float(cold.dual) * 1.001


def test_replicate_scales_the_lp_optimum():
    problem, _ = synthetic_problem(20, 1.4, 7)
    two = replicate(problem, 2)
    assert two.num_servers == 40 and two.num_groups == 2 * problem.num_groups
    assert exact.solve_lp(two).objective == pytest.approx(2 * exact.solve_lp(problem).objective, rel=1e-6)


def test_online_rounds_place_everything_at_light_load():
    problem, workload = synthetic_problem(30, 0.5, 8, event=True)
    problem = problem.tasks(np.arange(300))
    r = run_online(problem, workload.arrival[:300], workload.duration[:300], rate_multiplier=1, round_s=60.0)
    s = r.summary()
    # Every task that fits some server of the empty cluster is placed (a GPU task of a type without GPU
    # servers is not), and the run says why it stopped.
    fits = np.all(problem.demand[:, None, :] <= problem.capacity[None], axis=2)
    fits &= (problem.task_type[:, None] == -1) | (problem.task_type[:, None] == problem.server_type[None, :])
    assert np.array_equal(np.isfinite(r.start), fits.any(axis=1))
    assert s["placed"] == int(fits.any(axis=1).sum()) > 250
    assert r.stop_reason == ("all tasks placed" if fits.any(axis=1).all() else
                             f"{s['never_placed']} queued tasks fit nowhere and nothing is left to end")
    assert np.all(r.start[np.isfinite(r.start)] >= r.arrival[np.isfinite(r.start)])
    assert np.all(np.diff(r.time_s) >= 60.0 - 1e-9) and r.rounds > 10


def test_online_flags_the_rounds_that_compiled():
    """A round whose padded size is new compiles its stages (flagged and left out of the timings);
    the same rounds again, with the programs compiled, flag nothing."""
    import jax

    problem, workload = synthetic_problem(20, 0.5, 3, event=True)
    problem = problem.tasks(np.arange(120))
    run = lambda: run_online(problem, workload.arrival[:120], workload.duration[:120], round_s=600.0)
    jax.clear_caches()
    first, again = run(), run()
    assert first.compiled[0] and first.compiled.sum() <= len(set(np.maximum(64, first.queue)))
    assert again.rounds == first.rounds and not again.compiled.any()
    assert again.summary()["compile_rounds"] == 0


def test_bad_problems_are_refused():
    with pytest.raises(InputError, match="agree in R"):
        make_problem([[1, 1]], [[1, 1, 1]])
    with pytest.raises(InputError, match="demand row 1 is negative"):
        make_problem([[1, 1]], [[0.1, 0.1], [-0.1, 0]])
    with pytest.raises(InputError, match="free exceeds capacity"):
        make_problem([[1, 1]], [[0.1, 0.1]], free=[[2, 1]])


# ---- command line ----

TRACE = "../shared/data/google2011"



def test_cli_cvx_snapshot_with_exact_references(tmp_path, capsys):
    path = tmp_path / "c.json"
    code, out, err = run(["cvx", "--machines", "30", "--rho", "1.3", "--trials", "2", "--exact",
                          "--mip-time-limit", "5", "--json", str(path)], capsys)
    assert code == 0, err
    doc = json.loads(path.read_text())
    c, x = doc["cvxcluster"], doc["exact"]
    assert len(c["objective"]) == 2 and c["converged"]
    assert x["lp_objective"] * (1 - 1e-5) <= c["dual"] <= x["lp_objective"] * 1.005
    assert max(c["objective"]) <= min(x["lp_objective"], x["mip_bound"]) + 1e-6
    assert doc["workload"]["servers"] == 30 and doc["workload"]["anti_affinity_groups"] > 0
    assert "HiGHS LP" in out and "HiGHS MIP" in out


def test_cli_cvx_online(tmp_path, capsys):
    path = tmp_path / "o.json"
    code, out, err = run(["cvx", "--machines", "20", "--rho", "0.6", "--online", "--rate-multiplier", "50,500",
                          "--round-s", "2", "--max-rounds", "6", "--json", str(path)], capsys)
    assert code == 0, err
    runs = json.loads(path.read_text())["online"]
    assert [r["rate_multiplier"] for r in runs] == [50.0, 500.0]
    assert all(r["rounds"] == 6 and r["stop_reason"] == "stopped after max_rounds=6" for r in runs)
    assert "x500" in out


@needs_samples
def test_cli_cvx_on_the_trace_sample(capsys):
    code, out, err = run(["cvx", "--trace-dir", TRACE, "--max-tasks", "3000"], capsys)
    assert code == 0, err
    assert "google2011" in out and "stage 2: objective" in out


def test_cli_snapshot_with_cvxcluster_beside_policies(tmp_path, capsys):
    path = tmp_path / "s.json"
    code, out, err = run(["snapshot", "--machines", "60", "--rho", "1.1", "--trials", "2", "--policy",
                          "best_fit,cvxcluster", "--json", str(path)], capsys)
    assert code == 0, err
    pol = json.loads(path.read_text())["policies"]
    assert list(pol) == ["best_fit", "cvxcluster"]
    assert "mean" in pol["best_fit"]["compaction"] and "not_computed" in pol["cvxcluster"]["compaction"]
    assert len(pol["cvxcluster"]["placed"]["trials"]) == 2 and 0 < pol["cvxcluster"]["placed_fraction"]["mean"] <= 1


@pytest.mark.parametrize("args,message", [
    (["cvx", "--round-s", "3"], "--round-s needs --online"),
    (["cvx", "--online", "--exact"], "does not combine with --online"),
    (["cvx", "--trace-dir", TRACE, "--machines", "10"], "--machines is for the synthetic workload"),
    (["cvx", "--days", "1"], "--days needs --trace-dir"),
    (["cvx", "--online", "--rate-multiplier", "0"], "every multiplier must be > 0"),
])
def test_cli_cvx_bad_flags(args, message, capsys):
    code, _, err = run(args, capsys)
    assert code == 2 and message in err and err.count("\n") == 1


def test_an_empty_problem_gives_an_empty_allocation():
    a = allocate(make_problem(np.ones((3, 2)), np.zeros((0, 2))))
    assert a.placement.shape == (0,) and a.objective == 0.0


def test_a_mip_that_found_nothing_says_so(monkeypatch, tmp_path, capsys):
    """HiGHS stopping at its limit without a solution: the CLI says so plainly, and the JSON holds
    no made-up objective or infinite bound."""
    import jaxsched.cvx
    from jaxsched.cvx.exact import MIPSolution

    monkeypatch.setattr(jaxsched.cvx, "solve_mip", lambda problem, time_limit=60.0, rel_gap=1e-4: MIPSolution(
        0.0, float("inf"), False, np.full(problem.num_tasks, -1, np.int32), 1.0, "Time limit reached", found=False))
    out_json = tmp_path / "c.json"
    code, out, err = run(["cvx", "--machines", "20", "--rho", "0.8", "--exact", "--json", str(out_json)], capsys)
    assert code == 0, err
    line = next(x for x in out.splitlines() if x.startswith("HiGHS MIP"))
    assert "found no solution" in line and "inf" not in line and "best found" not in line
    x = json.loads(out_json.read_text())["exact"]
    assert x["mip_found"] is False and x["mip_objective"] is None and x["mip_bound"] is None
