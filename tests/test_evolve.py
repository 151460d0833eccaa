"""The evolutionary search: fitness, canonical genomes, selection, held-out reporting, the CLI."""

import json

import numpy as np
import pytest

from jaxsched import cli, rng
from jaxsched.errors import InputError
from jaxsched.evolve import (POWER_MAX, POWER_MIN, EvolveConfig, Problem, canonical, evolve, fitness,
                             initial_population)
from jaxsched.filters import alive_at, busiest_instant
from jaxsched.packing import PackConfig, pack
from jaxsched.policies import ALPHA_EVOLVE_GENOME
from jaxsched.synthetic import synthetic_instance

import reference
from test_packing import instance
from test_filters import workload


@pytest.fixture(scope="module")
def small():
    return Problem(*synthetic_instance(60, 1.0, 1)), Problem(*synthetic_instance(60, 1.0, 2))


def test_canonical_scales_weights_and_clips_powers():
    g = canonical(np.array([[2, -4, 1, 0, 0, 0, 0.1, 9], [0, 0, 0, 0, 0, 0, 1, 1]]))
    np.testing.assert_allclose(g[0], [0.5, -1, 0.25, 0, 0, 0, POWER_MIN, POWER_MAX])
    np.testing.assert_array_equal(g[1], [0, 0, 0, 0, 0, 0, 1, 1])  # all-zero weights stay (first fit)
    assert canonical(np.array([ALPHA_EVOLVE_GENOME]))[0].tolist() == list(ALPHA_EVOLVE_GENOME)


def test_fitness_is_the_reference_placed_weighted_of_each_genome():
    train = Problem(*instance(11))  # continuous shapes: few near ties
    genomes = initial_population(6, np.random.default_rng(3), 0.3)
    got = fitness(train, genomes, trials=2, seed=5)
    keys = rng.trial_keys(5, "evolve", 2)
    orders = np.asarray(rng.trial_orders(keys, train.workload.num_tasks))
    weight = np.asarray(train.workload.demand, np.float64).sum(1)
    checked = 0
    for p, g in enumerate(genomes):
        for t in range(2):
            placement, _, fragile = reference.pack(train.cluster.capacity, train.workload.demand, orders[t],
                                                   "family", g, None, None,
                                                   fragility=1e-5)
            if not fragile:
                checked += 1
                assert got[p, t] == pytest.approx(weight[placement >= 0].sum() / weight.sum(), abs=1e-12)
    assert checked >= 8
    # One packing for all genomes gives the bits of one packing per genome.
    alone = np.concatenate([fitness(train, g[None], trials=2, seed=5) for g in genomes])
    np.testing.assert_array_equal(got, alone)


def test_search_keeps_the_best_and_reports_held_out_honestly(small):
    train, held = small
    cfg = EvolveConfig(generations=4, population=12, parents=4, trials=2, sample_k=0, seed=3)
    seen = []
    result = evolve(train, held, cfg, on_generation=seen.append)
    assert [g.index for g in result.history] == list(range(5)) and seen == result.history
    best = [g.best for g in result.history]
    assert all(b1 >= b0 for b0, b1 in zip(best, best[1:])), best  # (mu + lambda) never loses its best
    assert result.evaluations == 12 * 5
    # alpha_evolve seeds the first generation, so the champion is never worse on training.
    assert result.train >= result.baseline_train
    assert result.baseline_train == pytest.approx(fitness(train, ALPHA_EVOLVE_GENOME, 2, 3).mean(), abs=0)
    # Held-out figures are the champion's and alpha_evolve's own fitness on the held-out snapshot.
    champion = np.asarray(result.champion, np.float32)
    assert result.heldout == fitness(held, champion, 2, 3, experiment="evolve-heldout").mean()
    assert result.baseline_heldout == fitness(held, ALPHA_EVOLVE_GENOME, 2, 3, experiment="evolve-heldout").mean()
    assert result.train == fitness(train, champion, 2, 3).mean()
    # Deterministic in the seed.
    again = evolve(train, held, cfg)
    assert again.champion == result.champion and again.history == result.history


@pytest.mark.parametrize("strategy", ["cma_es", "snes"])
def test_evosax_strategies_keep_the_best_and_report_honestly(small, strategy):
    train, held = small
    cfg = EvolveConfig(generations=3, population=8, trials=2, sample_k=0, seed=3, strategy=strategy)
    result = evolve(train, held, cfg)
    assert [g.index for g in result.history] == list(range(4))
    best = [g.best for g in result.history]
    assert all(b1 >= b0 for b0, b1 in zip(best, best[1:])), best
    assert result.evaluations == 1 + 8 * 4  # alpha_evolve, then every generation's population
    assert result.baseline_train == pytest.approx(fitness(train, ALPHA_EVOLVE_GENOME, 2, 3).mean(), abs=0)
    champion = np.asarray(result.champion, np.float32)
    assert result.train == fitness(train, champion, 2, 3).mean() >= result.baseline_train
    assert result.heldout == fitness(held, champion, 2, 3, experiment="evolve-heldout").mean()
    np.testing.assert_array_equal(canonical(champion[None])[0], champion)  # evaluated as canonical genomes
    assert evolve(train, held, cfg).history == result.history  # deterministic in the seed


def test_search_improves_on_alpha_evolve_where_there_is_room():
    # Overloaded and small: alpha_evolve leaves demand unplaced that a tighter genome places.
    train = Problem(*synthetic_instance(150, 1.1, 4))
    cfg = EvolveConfig(generations=6, population=16, parents=4, trials=1, sample_k=0, seed=1)
    result = evolve(train, train, cfg)
    assert result.train > result.baseline_train + 1e-3, (result.train, result.baseline_train)


def test_bad_settings_are_named():
    with pytest.raises(InputError, match="parents"):
        EvolveConfig(population=4, parents=8).check()
    with pytest.raises(InputError, match="sigma"):
        EvolveConfig(sigma=0).check()
    with pytest.raises(InputError, match="strategy must be one of"):
        EvolveConfig(strategy="nope").check()


def test_busiest_instant_within_a_range_matches_brute_force():
    g = np.random.default_rng(7)
    arrival = np.round(g.uniform(0, 100, 80))
    duration = np.round(g.uniform(0, 30, 80))
    w = workload(arrival, duration)
    for lo, hi in [(0, 100), (50, 130), (37.5, 60), (99, 101)]:
        times = np.unique(np.concatenate([[lo], arrival, arrival + duration]))
        times = times[(times >= lo) & (times < hi)]
        counts = [int(alive_at(w, t).sum()) for t in times]
        best = int(np.argmax(counts))
        assert busiest_instant(w, (lo, hi)) == (float(times[best]), counts[best]), (lo, hi)
    assert busiest_instant(w, (0, 1e9)) == busiest_instant(w)


def test_cli_evolve_writes_history_champion_and_command(tmp_path, capsys):
    out = tmp_path / "evolve.json"
    args = ["evolve", "--machines", "60", "--generations", "2", "--population", "6", "--parents", "2",
            "--trials", "1", "--sample-k", "0", "--json", str(out)]
    assert cli.main(args) == 0
    doc = json.loads(out.read_text())
    assert doc["command"] == "jaxsched " + " ".join(args)
    assert [h["index"] for h in doc["history"]] == [0, 1, 2]
    assert len(doc["champion"]["genome"]) == 8 and set(doc["champion"]["named"]) >= {"w0", "p2"}
    assert doc["workload"]["train"]["seed"] == 1 and doc["workload"]["heldout"]["seed"] == 2
    text = capsys.readouterr().out
    assert "held-out" in text and "champion" in text


@pytest.mark.parametrize("argv, needle", [
    (["evolve", "--parents", "80"], "parents"),
    (["evolve", "--population", "0"], "--population"),
    (["evolve", "--days", "1"], "--trace-dir"),
    (["tune", "--method", "grad", "--generations", "3"], "not used by --method grad"),
    (["tune", "--method", "evolve", "--steps", "3"], "not used by --method evolve"),
    (["tune", "--start", "1,1,1"], "--start"),
])
def test_cli_tuning_rejects_bad_flags(argv, needle, capsys):
    assert cli.main(argv) == 2
    err = capsys.readouterr().err
    assert needle in err and err.count("\n") == 1
