"""The GPU-sharing family (jaxsched.gpushare.family) and its search: the paper's policies as points of
it, each term and random genomes against the plain-Python reference, genome errors, and the
search's protocol and determinism."""

import json

import numpy as np
import pytest

from jaxsched.errors import InputError
from jaxsched.gpushare import GpuShareConfig, run_gpushare, simulate, typical_pods
from jaxsched.gpushare import family
from jaxsched.gpushare import search as gs
from jaxsched.gpushare.workload import arrivals

from cli_runner import run
from samples import ALIBABA, needs_samples
from test_gpushare import gpus_of, reference_run, small_case


def placements(tr, b, n):
    return [(int(tr.node[b, t]), gpus_of(tr.gpus[b, t]) if tr.node[b, t] >= 0 else ()) for t in range(n)]


@pytest.mark.parametrize("case", range(3))
def test_the_paper_policies_are_points_of_the_family(case):
    """At FGD's genome the family places pod for pod (node and GPUs) as FGD; so for the others at theirs."""
    cluster, pods = small_case(case)
    typical = typical_pods(pods)
    runs = [arrivals(pods, cluster, seed, tune=1.6) for seed in (case, case + 10)]
    names = tuple(family.PAPER_POINTS)
    paper = simulate(cluster, pods, typical, runs, names)
    points = simulate(cluster, pods, typical, runs, (family.FAMILY,) * len(names),
                      genomes=np.array([family.PAPER_POINTS[p] for p in names]))
    np.testing.assert_array_equal(points.node, paper.node)
    np.testing.assert_array_equal(points.gpus, paper.gpus)
    np.testing.assert_array_equal(points.frag, paper.frag)


def _against_reference(case, genomes):
    cluster, pods = small_case(case)
    typical = typical_pods(pods)
    runs = [arrivals(pods, cluster, seed, tune=1.6) for seed in (case, case + 20)]
    tr = simulate(cluster, pods, typical, runs, (family.FAMILY,) * len(genomes), genomes=np.asarray(genomes))
    for b in range(len(tr.policies)):
        genome = genomes[b // len(runs)]
        runobj = runs[b % len(runs)]
        expected, frag = reference_run(cluster, pods, typical, runobj, "family", list(genome))
        assert placements(tr, b, len(runobj.pods)) == expected, f"genome {list(genome)} seed {runobj.seed}"
        np.testing.assert_array_equal(tr.frag[b, :len(runobj.pods)], np.asarray(frag, np.float64) / typical.count.sum())


@pytest.mark.parametrize("term", family.TERMS)
def test_each_term_against_the_reference(term):
    """Each term alone (weight 1 and -1), with FGD's GPU rule, `best` and a blend between them."""
    genomes = [family.point(term, 1.0), family.point(term, 0.0),
               tuple(-x for x in family.point(term, 0.0)[:-1]) + (0.5,)]
    _against_reference(family.TERMS.index(term) % 3, genomes)


@pytest.mark.parametrize("case", range(2))
def test_random_genomes_against_the_reference(case):
    """Weights on a grid of eighths (so sums of terms seldom tie by rounding alone), blends anywhere."""
    g = np.random.default_rng(100 + case)
    genomes = np.concatenate([g.integers(-8, 9, (4, len(family.TERMS))) / 8.0, g.random((4, 1))], axis=1)
    _against_reference(case, [tuple(x) for x in genomes])


def test_real_valued_genomes_against_the_reference():
    """Weights anywhere in their bounds: the engine's score is the reference's left-to-right sum
    of the weighted terms, rounding for rounding, so even near ties resolve as the reference does."""
    genomes = np.random.default_rng(7).uniform(family.LOW, family.HIGH, (4, family.GENOME_SIZE))
    _against_reference(2, [tuple(x) for x in genomes])


@needs_samples
def test_the_family_score_table_stays_the_score_of_every_node():
    """The engine keeps each family row's score of every (c, mem, m, k) on every node in a table
    and recomputes only the chosen node's column: after a thousand pods on the openb cluster the
    table is, bit for bit, the one computed afresh from the rows' states."""
    import jax
    import jax.numpy as jnp

    from jaxsched.gpushare import engine

    lists = gs.Lists.load(ALIBABA, ["gpushare60"])
    cluster, pods = lists.cluster, lists.pods["gpushare60"]
    typical = typical_pods(pods)
    runs = [arrivals(pods, cluster, seed, tune=0.15) for seed in (0, 1)]
    genomes = np.random.default_rng(3).uniform(family.LOW, family.HIGH, (2, family.GENOME_SIZE))
    with jax.enable_x64(True):
        st = engine.build_static(cluster, pods, typical)
        B = len(genomes) * len(runs)
        carry = jax.tree.map(lambda x: jnp.broadcast_to(x, (B,) + x.shape) + 0, engine.initial_state(st, True))
        inputs = engine._row_inputs(runs, genomes)
        carry = engine._family_tables_jit(st, carry, inputs.genome)
        T = min(len(r.pods) for r in runs)
        seq = np.tile(np.stack([r.pods[:T] for r in runs], 1), (1, len(genomes))).astype(np.int32)
        (carry,), out = engine._block_jit((carry,), st, (inputs,), jnp.asarray(seq), jnp.int32(0),
                                          names=(family.FAMILY,) * B)
        assert int(np.sum(np.asarray(out[3]) >= 0)) > 0.9 * T * B  # the pods were placed
        fresh = engine._family_tables_jit(st, carry._replace(fam=jnp.zeros((B, 0) + carry.fam.shape[2:])),
                                          inputs.genome)
        np.testing.assert_array_equal(np.asarray(carry.fam), np.asarray(fresh.fam))


@pytest.mark.parametrize("genome, message", [
    ((1.0,) * 10, r"expected (11 numbers|shape \(1, 11\))"),
    ((1.5,) + (0.0,) * 9 + (1.0,), "fgd = 1.5 is outside its bounds"),
    ((0.0,) * 10 + (-0.1,), "gpu_blend = -0.1 is outside its bounds"),
    ((float("nan"),) + (0.0,) * 10, "fgd is nan, not a finite number"),
    ((0.0,) * 5 + (float("inf"),) + (0.0,) * 5, "idle_whole is inf"),
])
def test_bad_genomes_are_refused(genome, message):
    cluster, pods = small_case(0)
    runs = [arrivals(pods, cluster, 1, tune=1.0)]
    with pytest.raises(InputError, match=message):
        simulate(cluster, pods, typical_pods(pods), runs, (family.FAMILY,), genomes=np.array([genome]))
    with pytest.raises(InputError, match=message):
        run_gpushare(cluster, pods, GpuShareConfig(policies=(family.FAMILY,), seeds=(1,), genome=genome))


def test_the_family_needs_a_genome():
    cluster, pods = small_case(0)
    with pytest.raises(InputError, match="needs a genome"):
        run_gpushare(cluster, pods, GpuShareConfig(policies=("FGD", family.FAMILY), seeds=(1,)))


def small_lists():
    cluster, a = small_case(0)
    b = small_case(1)[1]
    c = small_case(2)[1]
    return gs.Lists(cluster, {"a": a, "b": b, "c": c})


def small_search(strategy, **kw):
    return gs.GpuSearchConfig(strategy=strategy, generations=2, population=4, parents=2, train_lists=("a", "b"),
                              train_seeds=(0, 1), heldout_lists=("c",), tune=1.6, **kw)


@pytest.mark.parametrize("strategy", ["mu_lambda", "cma_es"])
def test_the_search_is_deterministic_and_never_sees_held_out_runs(strategy, monkeypatch):
    seen = []
    real = gs.allocation

    def spy(lists, name, policies, genomes, seeds, *a, **k):
        seen.append((name, tuple(seeds)))
        return real(lists, name, policies, genomes, seeds, *a, **k)

    monkeypatch.setattr(gs, "allocation", spy)
    lists = small_lists()
    cfg = small_search(strategy, seed=7)
    first, second = gs.search(lists, cfg), gs.search(lists, cfg)
    assert first.to_json()["history"] == second.to_json()["history"]
    assert {n for n, _ in seen} == {"a", "b"} and {s for _, s in seen} == {(0, 1)}
    assert first.result.evaluations >= cfg.generations * cfg.population
    # The champion is at least as fit as FGD's point, which the search starts from.
    assert first.result.train >= first.result.baseline_train
    other = gs.search(lists, small_search(strategy, seed=8))
    assert other.to_json()["history"] != first.to_json()["history"]


def test_compare_reports_the_champion_against_the_baselines():
    lists = small_lists()
    table = gs.compare(lists, family.PAPER_POINTS["FGD"], ("c",), (42, 43), tune=1.6)
    e = table["c"]
    # FGD's point is FGD (a cluster this small may have no event at exactly 100%: NaN on both sides).
    np.testing.assert_array_equal(e["champion"]["at_100"], e["FGD"]["at_100"])
    assert e["champion"]["fitness"] == e["FGD"]["fitness"] and np.isfinite(e["FGD"]["fitness"])
    assert e["vs_FGD"]["better"] == e["vs_FGD"]["worse"] == 0
    assert e["BestFit"]["fitness"] != e["FGD"]["fitness"]
    assert not gs.goal(table, table)["met"]


@pytest.mark.parametrize("change, message", [
    (dict(train_seeds=(3, 42)), "seed 42 is a held-out seed"),
    (dict(train_lists=("a", "c")), "c is a held-out list"),
    (dict(tune=1.0), "tune must be at least 1.3"),
    (dict(strategy="bogus"), "strategy must be one of"),
    (dict(parents=9), "parents"),
])
def test_a_search_that_would_see_held_out_runs_is_refused(change, message):
    import dataclasses

    with pytest.raises(InputError, match=message):
        gs.search(small_lists(), dataclasses.replace(small_search("mu_lambda"), **change))


@needs_samples
def test_cli_search_writes_its_record(tmp_path, capsys):
    out = tmp_path / "s.json"
    code, stdout, err = run(["gpushare", "--trace-dir", ALIBABA, "--search", "--strategy", "mu_lambda",
                             "--generations", "1", "--population", "2", "--parents", "1", "--train-lists",
                             "gpushare100", "--train-seeds", "0", "--heldout-lists", "gpuspec10", "--heldout-seeds",
                             "42", "--json", str(out)], capsys)
    assert code == 0, err
    doc = json.loads(out.read_text())
    assert doc["experiment"] == "gpushare-search"
    assert doc["search"]["protocol"]["train_lists"] == ["gpushare100"]
    assert set(doc["heldout"]) == {"gpuspec10"} and set(doc["train_heldout_seeds"]) == {"gpushare100"}
    # The first genome is FGD's point: its training fitness is FGD's.
    assert doc["search"]["champion"]["train_fitness"] >= doc["search"]["FGD"]["train_fitness"]
    assert "goal" in doc and "met" in doc["goal"]
    assert "held-out" in stdout
    page = tmp_path / "r.html"
    code, _, err = run(["report", str(out), "-o", str(page)], capsys)
    assert code == 0, err
    assert "family search" in page.read_text()


@needs_samples
@pytest.mark.parametrize("args, message", [
    (["--search", "--train-seeds", "40-45"], "--train-seeds: seed 42 is a held-out seed"),
    (["--search", "--train-lists", "default,cpu050"], "--train-lists: cpu050 is a held-out list"),
    (["--search", "--policy", "FGD"], "--policy does not apply to --search"),
    (["--search", "--tune", "1.2"], "--tune must be at least 1.3"),
    (["--strategy", "snes"], "--strategy applies to --search only"),
    (["--policy", "gpushare_family"], "needs --genome"),
    (["--policy", "FGD", "--genome", "1,0,0,0,0,0,0,0,0,0,1"], "--genome applies to --policy gpushare_family"),
    (["--policy", "gpushare_family", "--genome", "1,0,0,0,0,0,0,0,0,0,2"], "gpu_blend = 2 is outside"),
])
def test_cli_search_and_genome_errors(args, message, capsys):
    code, _, err = run(["gpushare", "--trace-dir", ALIBABA] + args, capsys)
    assert code == 2 and message in err and err.count("\n") == 1


def test_the_cli_defaults_are_the_librarys_protocol():
    """The CLI spells its defaults out (its flags load without JAX): they must be the library's."""
    from jaxsched.cli import gpushare as cli_gpushare

    opts = {o.dest: o.default for o in cli_gpushare.OPTIONS}
    cfg = gs.GpuSearchConfig()
    assert opts["train_lists"].split(",") == list(cfg.train_lists)
    assert opts["heldout_lists"].split(",") == list(cfg.heldout_lists)
    assert opts["train_seeds"] == cfg.train_seeds and opts["heldout_seeds"] == cfg.heldout_seeds
    for k in ("strategy", "generations", "population", "parents", "sigma"):
        assert opts[k] == getattr(cfg, k), k
    assert opts["search_seed"] == cfg.seed and opts["tune"] == cfg.tune


def test_rows_split_into_narrower_programs_give_the_same_runs(monkeypatch):
    """On a CPU a wide batch runs as several programs of whole policies: the same trajectories."""
    from jaxsched.gpushare import engine

    cluster, pods = small_case(1)
    typical = typical_pods(pods)
    runs = [arrivals(pods, cluster, seed, tune=1.6) for seed in (1, 2, 3)]
    genomes = np.random.default_rng(5).uniform(family.LOW, family.HIGH, (7, family.GENOME_SIZE))
    names = (family.FAMILY,) * 7 + ("FGD", "BestFit")
    genomes = np.concatenate([genomes, np.zeros((2, family.GENOME_SIZE))])
    whole = simulate(cluster, pods, typical, runs, names, genomes=genomes)
    monkeypatch.setattr(engine, "CPU_ROWS_PER_PROGRAM", 4)  # 27 rows > 8: programs of one policy's 3 rows
    calls = []
    share = engine._simulate_share
    monkeypatch.setattr(engine, "_simulate_share", lambda *a, **k: calls.append(1) or share(*a, **k))
    split = simulate(cluster, pods, typical, runs, names, genomes=genomes)
    assert len(calls) >= len(names) - 1
    for field in ("node", "gpus", "alloc", "arrived", "frag"):
        np.testing.assert_array_equal(getattr(split, field), getattr(whole, field))
