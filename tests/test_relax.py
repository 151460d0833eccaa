"""The differentiable relaxation: its limit, its gradient, its agreement with the hard objective, `tune`."""

import json

import numpy as np
import pytest

from jaxsched import cli
from jaxsched.evolve import Problem, fitness
from jaxsched.relax import RelaxConfig, relaxed_objective, tune
from jaxsched.synthetic import synthetic_instance

from test_packing import instance

ALPHA = np.array([1, 1, 1, 1, 0, 0, 1, 1], np.float32)
GENOME = np.array([0.7, 1.3, 0.4, 0.9, 0.5, 2.0, 1.5, 0.75], np.float32)


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_cold_limit_is_the_hard_packing(seed):
    # As temperature and sharpness go to 0, each step is the argmax placement of the full scan.
    problem = Problem(*instance(seed, M=16, N=60))
    cold = RelaxConfig(temperature=1e-4, sharpness=1e-5, block=16)
    for g in (ALPHA, GENOME):
        hard = fitness(problem, g, trials=2, seed=3).mean()
        relaxed = relaxed_objective(problem, g, trials=2, seed=3, cfg=cold)
        assert relaxed == pytest.approx(hard, abs=2e-3), (g, relaxed, hard)
    warm = relaxed_objective(problem, ALPHA, trials=2, seed=3, cfg=RelaxConfig(temperature=1.0, sharpness=0.05))
    assert warm != pytest.approx(fitness(problem, ALPHA, trials=2, seed=3).mean(), abs=1e-4)  # a real relaxation


def test_gradient_of_the_undetached_relaxation_matches_finite_differences():
    problem = Problem(*instance(4, M=8, N=12))
    cfg = RelaxConfig(temperature=1.0, sharpness=0.05, block=4, detach_scores=False)
    value, grad = relaxed_objective(problem, GENOME, trials=1, cfg=cfg, grad=True)
    assert value == pytest.approx(relaxed_objective(problem, GENOME, trials=1, cfg=cfg), abs=1e-6)
    for v in np.random.default_rng(0).standard_normal((3, 8)):
        v = (v / np.linalg.norm(v)).astype(np.float32)
        h = 2e-2
        up = relaxed_objective(problem, GENOME + h * v, trials=1, cfg=cfg)
        down = relaxed_objective(problem, GENOME - h * v, trials=1, cfg=cfg)
        assert grad @ v == pytest.approx((up - down) / (2 * h), rel=0.1, abs=2e-4)


def test_relaxed_objective_ranks_a_sweep_like_the_hard_one():
    # alpha_evolve plus a best-fit term of weight -t: the hard objective rises by about 5% from t = 0 to
    # t = -4 on this overloaded cluster; the relaxation must see the same order where the gaps are large.
    problem = Problem(*synthetic_instance(200, 1.0, 1))
    sweep = [-4.0, -1.0, 0.0]
    genomes = [np.array([1, 1, 1, 1, t, 0, 1, 1], np.float32) for t in sweep]
    hard = [fitness(problem, g, trials=2, seed=1).mean() for g in genomes]
    relaxed = [relaxed_objective(problem, g, trials=2, seed=1) for g in genomes]
    assert np.all(np.diff(hard) < -0.003), hard
    assert np.all(np.diff(relaxed) < 0), relaxed
    _, grad = relaxed_objective(problem, genomes[1], trials=2, seed=1, grad=True)
    assert np.all(np.isfinite(grad))


def test_tune_reports_the_real_hard_objective_of_every_step(tmp_path):
    out = tmp_path / "tune.json"
    assert cli.main(["tune", "--machines", "80", "--steps", "2", "--trials", "1", "--sample-k", "0",
                     "--json", str(out), "--quiet"]) == 0
    doc = json.loads(out.read_text())
    assert [h["index"] for h in doc["history"]] == [0, 1, 2]
    problem = Problem(*synthetic_instance(80, 1.0, 1))
    for h in doc["history"]:
        assert h["hard"] == fitness(problem, np.asarray(h["genome"], np.float32), trials=1, seed=1).mean()
    assert doc["best"]["hard"] == max(h["hard"] for h in doc["history"])
    assert doc["history"][0]["genome"] == ALPHA.tolist()


def test_tune_rejects_bad_settings():
    problem = Problem(*instance(0))
    with pytest.raises(Exception, match="temperature"):
        tune(problem, problem, ALPHA, cfg=RelaxConfig(temperature=0))
    with pytest.raises(Exception, match="learning rate"):
        tune(problem, problem, ALPHA, learning_rate=-1)
