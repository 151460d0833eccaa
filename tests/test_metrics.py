"""Snapshot metrics against the float64 reference, and the synthetic generator's contract."""

import numpy as np
import pytest

import jaxsched
from jaxsched import rng, synthetic
from jaxsched.packing import PackConfig, pack

import reference


@pytest.mark.parametrize("R", [2, 3])
def test_metrics_match_reference(R):
    cluster, wl = synthetic.synthetic_instance(60, 1.1, seed=4)
    cap, dem = np.asarray(cluster.capacity), np.asarray(wl.demand)
    if R == 3:  # a GPU-like third dimension present on a few machines
        g = np.random.default_rng(0)
        cap = np.concatenate([cap, (g.uniform(size=(len(cap), 1)) < 0.3).astype(np.float32)], 1)
        dem = np.concatenate([dem, (g.uniform(size=(len(dem), 1)) < 0.05) * np.float32(0.25)], 1)
        cluster = jaxsched.Cluster(cap, resources=("cpu", "mem", "gpu"))
        wl = jaxsched.Workload(dem.astype(np.float32), wl.priority, wl.arrival, wl.duration, ("cpu", "mem", "gpu"))
    slot = (0.05, 0.05) + (0.0,) * (R - 2)
    keys = rng.trial_keys(0, "m", 2)
    names = ("best_fit", "worst_fit", "random")
    st = pack(cluster, wl, PackConfig(policies=names, sample_k=0), keys)
    m = jaxsched.snapshot_metrics(st.free, cap, st.placement, dem, slot)
    for p in range(len(names)):
        for t in range(2):
            want = reference.metrics(st.free[p, t], cap, st.placement[p, t] >= 0, dem, slot)
            assert int(m.placed[p, t]) == want["placed"]
            assert 0 < want["placed_fraction"] < 1  # overloaded: the interesting case
            for key in ("placed_fraction", "placed_weighted", "holes"):
                np.testing.assert_allclose(float(getattr(m, key)[p, t]), want[key], rtol=1e-5, atol=1e-7)
            np.testing.assert_allclose(np.asarray(m.utilization[p, t]), want["utilization"], rtol=1e-5)
            np.testing.assert_allclose(np.asarray(m.stranding[p, t]), want["stranding"], rtol=1e-5, atol=1e-7)


def test_metrics_on_a_hand_built_state():
    # Two machines: one holds two free slots, one has only CPU left (memory exhausted).
    cap = np.array([[0.5, 0.5], [0.5, 0.5]], np.float32)
    free = np.array([[0.1, 0.1], [0.2, 0.0]], np.float32)
    dem = np.array([[0.4, 0.4], [0.3, 0.5], [0.9, 0.9]], np.float32)
    placement = np.array([0, 1, -1], np.int32)
    m = jaxsched.snapshot_metrics(free[None, None], cap, placement[None, None], dem, (0.05, 0.05))
    assert int(m.placed[0, 0]) == 2
    assert float(m.placed_fraction[0, 0]) == pytest.approx(2 / 3)
    assert float(m.placed_weighted[0, 0]) == pytest.approx((0.8 + 0.8) / (0.8 + 0.8 + 1.8))
    np.testing.assert_allclose(np.asarray(m.utilization[0, 0]), [0.7, 0.9], rtol=1e-6)
    assert float(m.holes[0, 0]) == pytest.approx(2 / 20)  # slots(0.1, 0.1) = 2 of 10 + 10
    np.testing.assert_allclose(np.asarray(m.stranding[0, 0]), [0.2 / 0.3, 0.0], rtol=1e-6)


def test_synthetic_is_deterministic_and_reaches_rho():
    a_cluster, a = synthetic.synthetic_instance(500, 0.6, seed=9)
    b_cluster, b = synthetic.synthetic_instance(500, 0.6, seed=9)
    _, c = synthetic.synthetic_instance(500, 0.6, seed=10)
    assert np.array_equal(a_cluster.capacity, b_cluster.capacity)
    assert np.array_equal(a.demand, b.demand) and not np.array_equal(a.demand[:50], c.demand[:50])
    load = np.asarray(a.demand, np.float64).sum(0) / np.asarray(a_cluster.capacity, np.float64).sum(0)
    assert load.max() >= 0.6
    load_before_last = (np.asarray(a.demand[:-1], np.float64).sum(0)
                        / np.asarray(a_cluster.capacity, np.float64).sum(0))
    assert load_before_last.max() < 0.6
    counts = {tuple(r) for r in np.asarray(a_cluster.capacity).tolist()}
    assert counts == {(c, m) for c, m, _ in synthetic.MACHINE_CLASSES}
    assert a_cluster.num_machines == 500


def test_bad_synthetic_settings_are_input_errors():
    with pytest.raises(jaxsched.errors.InputError, match="machines"):
        synthetic.synthetic_instance(0, 0.5, 1)
    with pytest.raises(jaxsched.errors.InputError, match="rho"):
        synthetic.synthetic_instance(10, -1.0, 1)
