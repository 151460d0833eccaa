"""User policies: registration, exact agreement with the built-ins of the same formula, the CLI's
--policy-file and --policy-params, and clear errors for broken scoring functions."""

import json
import os
import textwrap

import jax.numpy as jnp
import numpy as np
import pytest

import jaxsched
from jaxsched import InputError
from jaxsched.user_policies import USER_POLICIES, check_policy, load_policy_file, with_params

from cli_runner import run

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
EXAMPLES = os.path.join(ROOT, "examples")


@pytest.fixture(scope="module")
def instance():
    return jaxsched.synthetic_instance(machines=120, rho=0.8, seed=3)


@jaxsched.policy
def my_best_fit(t):
    return t.u[0] + t.u[1]


@jaxsched.policy(params={"w": [1.0, 1.0], "k": 0.0}, bounds={"w": (0.0, 2.0)})
def my_weighted(t, p):
    return p["w"][0] * t.u[0] + p["w"][1] * t.u[1] + p["k"] * t.a


def _placements(cluster, workload, policies, sample_k=0, genomes=None):
    cfg = jaxsched.PackConfig(policies=policies, sample_k=sample_k)
    state = jaxsched.pack(cluster, workload, cfg, jaxsched.trial_keys(7, "user", 3), genomes=genomes)
    return np.asarray(state.placement)


@pytest.mark.parametrize("sample_k", [0, 16])
def test_user_formula_of_best_fit_places_exactly_as_best_fit(instance, sample_k):
    cluster, workload = instance
    p = _placements(cluster, workload, ("best_fit", "my_best_fit", "my_weighted"), sample_k)
    assert (p[0] >= 0).any()
    np.testing.assert_array_equal(p[1], p[0])
    np.testing.assert_array_equal(p[2], p[0])  # w = (1, 1), k = 0 is best_fit's formula


def test_parameters_are_per_row_and_vmapped(instance):
    cluster, workload = instance
    names = ("my_weighted", "my_weighted")
    genomes = jaxsched.policies.row_genomes(names)
    genomes[1, :3] = (1.0, 0.0, 0.0)  # CPU only
    both = _placements(cluster, workload, names, genomes=genomes)
    USER_POLICIES["my_weighted_cpu"] = USER_POLICIES["my_weighted"]._replace(name="my_weighted_cpu",
                                                                            params=(1.0, 0.0, 0.0))
    alone = _placements(cluster, workload, ("my_weighted_cpu",))
    np.testing.assert_array_equal(both[1], alone[0])
    assert not np.array_equal(both[0], both[1])


def test_registration_records_parameters_and_bounds():
    p = jaxsched.get_policy("my_weighted")
    assert p.param_names == ("w[0]", "w[1]", "k") and p.params == (1.0, 1.0, 0.0)
    assert p.bounds[0] == (0.0, 2.0) and p.bounds[2] == (-np.inf, np.inf)
    assert with_params("my_weighted", {"k": 0.5}).params == (1.0, 1.0, 0.5)
    with_params("my_weighted", {"k": 0.0})
    with pytest.raises(InputError, match="no parameter 'z'"):
        with_params("my_weighted", {"z": 1})
    with pytest.raises(InputError, match="expected 2 finite"):
        with_params("my_weighted", {"w": [1.0]})


@pytest.mark.parametrize("register, message", [
    (lambda: jaxsched.policy("best_fit")(lambda t: t.fit), "built-in"),
    (lambda: jaxsched.policy("np1", params={"w": 1.0})(lambda t: t.fit), "needs params"),
    (lambda: jaxsched.policy("np2")(lambda t, p: t.fit), "declares 0 parameters"),
    (lambda: jaxsched.policy("np3", params={"w": 1.0}, bounds={"v": (0, 1)})(lambda t, p: t.fit), "not a parameter"),
    (lambda: jaxsched.policy("np4", params={"w": float("nan")})(lambda t, p: t.fit), "finite"),
])
def test_bad_registrations(register, message):
    with pytest.raises(InputError, match=message):
        register()


@pytest.mark.parametrize("body, message", [
    ("return jnp.stack([t.u[0], t.u[1]])", "must return one score per machine"),
    ("return t.slots_f.astype(jnp.int32)", "must return float32"),
    ("return t.fit if t.a > 1 else 0.0", "not traceable"),
    ("return jnp.log(t.a - 1e5)", "NaN scores"),
])
def test_broken_policies_are_named_before_packing(instance, body, message):
    cluster, workload = instance
    name = f"broken_{abs(hash(body))}"
    exec(f"def fn(t):\n    {body}", {"jnp": jnp}, ns := {})
    jaxsched.policy(name)(ns["fn"])
    with pytest.raises(InputError, match=f"policy '{name}'.*{message}"):
        check_policy(name, cluster, workload)
    cfg = jaxsched.SnapshotConfig(policies=(name,), trials=1, compact=False, inflate=None)
    with pytest.raises(InputError, match=message):
        jaxsched.run_snapshot(cluster, workload, cfg)


def test_policy_file_errors(tmp_path):
    with pytest.raises(InputError, match="no such policy file"):
        load_policy_file(str(tmp_path / "none.py"))
    empty = tmp_path / "empty.py"
    empty.write_text("x = 1\n")
    with pytest.raises(InputError, match="registers no policy"):
        load_policy_file(str(empty))
    bad = tmp_path / "bad.py"
    bad.write_text("import jaxsched\n\n\nraise RuntimeError('oops')\n")
    with pytest.raises(InputError, match=r"bad.py, line 4: RuntimeError: oops"):
        load_policy_file(str(bad))


def test_examples_through_the_cli(tmp_path, capsys):
    out = tmp_path / "s.json"
    code, text, err = run(["snapshot", "--machines", "150", "--trials", "2", "--no-compaction", "--no-inflation",
                           "--policy-file", os.path.join(EXAMPLES, "my_policies.py"),
                           "--policy", "cpu_first,weighted_fit,best_fit", "--json", str(out)], capsys)
    assert code == 0, err
    doc = json.loads(out.read_text())
    assert list(doc["policies"]) == ["cpu_first", "weighted_fit", "best_fit"]
    assert doc["policies"]["cpu_first"]["placed_fraction"]["mean"] > 0.9
    # weighted_fit with --policy-params packs differently from its defaults, and in event mode too.
    out2 = tmp_path / "p.json"
    code, _, err = run(["snapshot", "--machines", "150", "--trials", "2", "--no-compaction", "--no-inflation",
                        "--policy-file", os.path.join(EXAMPLES, "my_policies.py"), "--policy", "weighted_fit",
                        "--policy-params", os.path.join(EXAMPLES, "weighted_fit.toml"), "--json", str(out2)], capsys)
    assert code == 0, err
    a, b = (json.loads(p.read_text())["policies"]["weighted_fit"] for p in (out, out2))
    assert a["holes"]["mean"] != b["holes"]["mean"]
    with_params("weighted_fit", {"w": [1.0, 1.0], "balance": 0.5})
    code, _, err = run(["event", "--machines", "80", "--quiet", "--policy-file",
                        os.path.join(EXAMPLES, "my_policies.py"), "--policy", "cpu_first,weighted_fit"], capsys)
    assert code == 0, err


@pytest.mark.parametrize("params, message", [
    ('{"weighted_fit": {"nope": 1}}', "no parameter 'nope'"),
    ('{"other": {"w": 1}}', "'other' is not a user policy"),
    ('{"weighted_fit": ', "p.json"),
])
def test_cli_policy_params_errors(tmp_path, capsys, params, message):
    p = tmp_path / "p.json"
    p.write_text(params)
    code, _, err = run(["snapshot", "--machines", "50", "--quiet", "--policy-file",
                        os.path.join(EXAMPLES, "my_policies.py"), "--policy", "weighted_fit",
                        "--policy-params", str(p)], capsys)
    assert code == 2 and message in err and "Traceback" not in err


def test_cli_broken_policy_file(tmp_path, capsys):
    f = tmp_path / "mine.py"
    f.write_text(textwrap.dedent("""
        import jaxsched

        @jaxsched.policy
        def untraceable(t):
            return float(t.a)
    """))
    code, _, err = run(["snapshot", "--machines", "50", "--quiet", "--policy-file", str(f), "--policy",
                        "untraceable"], capsys)
    assert code == 2 and "policy 'untraceable' is not traceable" in err and "Traceback" not in err


def test_cli_policies_lists_a_files_policies(capsys):
    code, text, err = run(["policies", "--policy-file", os.path.join(EXAMPLES, "my_policies.py")], capsys)
    assert code == 0, err
    lines = text.splitlines()
    assert [line[15:].split()[0] for line in lines[:22]] == list(jaxsched.REGISTRY) + ["family"]
    assert ["user", "cpu_first"] in [line.split() for line in lines[22:]]
    assert any(line.endswith("weighted_fit (w[0]=1, w[1]=1, balance=0.5)") for line in lines[22:])


@jaxsched.policy(params={"w": [1.0, 1.0], "balance": 0.5}, bounds={"w": (0.0, 2.0), "balance": (0.0, 1.0)})
def my_bounded(t, p):
    return p["w"][0] * t.u[0] + p["w"][1] * t.u[1] - p["balance"] * jnp.abs(t.rho[0] - t.rho[1])


@pytest.mark.parametrize("strategy", ["mu_lambda", "cma_es"])
def test_evolve_searches_a_user_policy_within_its_bounds(strategy):
    from jaxsched.evolve import EvolveConfig, Problem, evolve, fitness

    train, held = Problem(*jaxsched.synthetic_instance(60, 1.0, 1)), Problem(*jaxsched.synthetic_instance(60, 1.0, 2))
    cfg = EvolveConfig(generations=2, population=8, parents=4, trials=1, sample_k=0, seed=2, strategy=strategy,
                       policy="my_bounded", sigma=0.5)
    result = evolve(train, held, cfg)
    assert result.policy == "my_bounded" and result.names == ("w[0]", "w[1]", "balance")
    for g in result.history:
        assert all(lo <= x <= hi for x, (lo, hi) in zip(g.genome, [(0, 2), (0, 2), (0, 1)])), g.genome
    champion = np.asarray(result.champion, np.float32)
    assert result.train == fitness(train, champion, 1, 2, policy="my_bounded").mean() >= result.baseline_train
    assert result.baseline_train == fitness(train, np.array([1.0, 1.0, 0.5]), 1, 2, policy="my_bounded").mean()
    assert result.to_json()["champion"]["named"].keys() == {"w[0]", "w[1]", "balance"}


def test_evolve_needs_parameters_with_finite_bounds():
    from jaxsched.evolve import EvolveConfig

    with pytest.raises(InputError, match="give finite bounds to search parameter 'k'"):
        EvolveConfig(policy="my_weighted").check()
    with pytest.raises(InputError, match="has no parameters to search"):
        EvolveConfig(policy="my_best_fit").check()


def test_gradient_tuning_of_a_user_policy_stays_in_bounds_and_reports_honestly():
    from jaxsched.evolve import Problem, fitness
    from jaxsched.relax import RelaxConfig, relaxed_objective, tune

    train = Problem(*jaxsched.synthetic_instance(40, 1.0, 1))
    held = Problem(*jaxsched.synthetic_instance(40, 1.0, 2))
    cfg = RelaxConfig(policy="my_bounded")
    value, grad = relaxed_objective(train, np.array([1.0, 1.0, 0.5]), cfg=cfg, grad=True)
    assert 0 < value <= 1 and grad.shape == (3,) and np.all(np.isfinite(grad)) and np.any(grad != 0)
    result = tune(train, held, None, steps=3, learning_rate=0.2, cfg=cfg)
    assert len(result.history) == 4 and result.history[0].genome == (1.0, 1.0, 0.5)
    for h in result.history:
        assert all(lo <= x <= hi for x, (lo, hi) in zip(h.genome, [(0, 2), (0, 2), (0, 1)])), h.genome
        assert h.hard == fitness(train, np.asarray(h.genome, np.float32), 1, 1, policy="my_bounded").mean()
    assert result.hard == max(h.hard for h in result.history)
