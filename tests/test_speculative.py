"""Several tasks per step (`jaxsched.speculative`) against the one-task-at-a-time picker, bit for bit."""

import os

import jax
import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from jaxsched import packing, policies, rng, speculative
from jaxsched.filters import Filters, snapshot_tasks
from jaxsched.packing import PackConfig, RowVariants, pack
from jaxsched.traces import load_google2011
from jaxsched.types import Cluster, Workload

import sequential
from samples import GOOGLE, needs_samples

NAMES = list(policies.REGISTRY) + ["family"]
GENOME = np.array([0.7, 1.3, 0.4, 0.9, 0.5, 2.0, 1.5, 0.75], np.float32)


def workload(demand):
    n = len(demand)
    zeros = np.zeros(n, np.float32)
    return Workload(np.asarray(demand, np.float32), np.zeros(n, np.int32), zeros, zeros)


def assert_same(state, want, label=""):
    placement, free = want
    np.testing.assert_array_equal(state.placement, placement, err_msg=label)
    np.testing.assert_array_equal(state.free, free, err_msg=label)


@settings(max_examples=12, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(seed=st.integers(0, 10_000), M=st.sampled_from([3, 24, 130]), R=st.sampled_from([2, 3]),
       k=st.sampled_from([1, 3, 8]), window=st.sampled_from([1, 2, 3, 16]), chunk=st.sampled_from([5, 64]),
       load=st.sampled_from([0.5, 1.5, 4.0]), ties=st.booleans(), zero_dims=st.booleans(),
       names=st.lists(st.sampled_from(NAMES), min_size=1, max_size=3, unique=True))
def test_windows_place_exactly_like_one_task_at_a_time(seed, M, R, k, window, chunk, load, ties, zero_dims, names):
    """Windows of any length over any chunking: the same placements and free capacity as the
    sequential picker, with ties (a few distinct capacities and demands, so equal scores are
    everywhere and the lowest machine index decides), dimensions of zero capacity, and
    overloaded snapshots (draws that all miss: full-scan fallbacks, and tasks that fit nowhere)."""
    g = np.random.default_rng(seed)
    N = 96
    if ties:
        cap = g.choice([0.5, 1.0], (M, R)).astype(np.float32)
        dem = g.choice([0.05, 0.1, 0.25], (N, R)).astype(np.float32)
    else:
        cap = g.uniform(0.3, 1.0, (M, R)).astype(np.float32)
        dem = g.uniform(0.01, 0.3, (N, R)).astype(np.float32)
    dem *= np.float32(load * cap.sum(0) / dem.sum(0))
    if zero_dims:
        cap[g.uniform(size=(M, R)) < 0.2] = 0.0
        dem[g.uniform(size=(N, R)) < 0.3] = 0.0
    keys = rng.trial_keys(seed, "speculative", 2)
    genomes = np.stack([GENOME] * len(names))
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(speculative, "CHUNK_TASKS", chunk)
        got = pack(Cluster(cap), workload(dem), PackConfig(policies=tuple(names), sample_k=k, window=window), keys,
                   genomes=genomes)
    assert_same(got, sequential.pack(cap, dem, tuple(names), k, keys, genomes=genomes), f"{names} W={window}")


def test_row_variants_place_exactly_like_one_task_at_a_time():
    """Machine prefixes, demand scales and task limits per row (compaction and inflation's
    variants) go through the windows unchanged."""
    g = np.random.default_rng(4)
    M, N, T = 50, 200, 3
    cap = g.uniform(0.3, 1.0, (M, 2)).astype(np.float32)
    dem = g.uniform(0.01, 0.2, (N, 2)).astype(np.float32)
    names = ("best_fit", "random", "alpha_evolve", "alpha_evolve")
    keys = rng.trial_keys(9, "variants", T)
    rank = np.stack([g.permutation(M) for _ in range(T)]).astype(np.int32)
    prefix = g.integers(10, M + 1, (4, T))
    scale = g.uniform(0.5, 1.5, (4, T)).astype(np.float32)
    limit = g.integers(50, N + 1, (4, T)).astype(np.int32)
    variants = RowVariants(machine_rank=rank, prefix=prefix, demand_scale=scale, task_limit=limit)
    got = pack(Cluster(cap), workload(dem), PackConfig(policies=names, sample_k=4, window=8), keys, variants=variants)
    free0 = np.where((rank[None] < prefix[..., None])[..., None], cap[None, None], -1.0)
    want = sequential.pack(cap, dem, names, 4, keys, free0=free0, scale=scale, limit=limit)
    assert_same(got, want)
    assert np.any(got.placement < 0) and np.any(got.placement >= 0)


@pytest.mark.parametrize("sample_k", [0, 4])
def test_two_devices_and_a_population_place_exactly_like_one_task_at_a_time(sample_k):
    """A population of family genomes on one trial (split over both CPU devices by genomes) and
    three trials of one policy (split by trials, padded to four): the sequential picker's results."""
    assert len(jax.local_devices()) == 2  # tests/conftest.py
    g = np.random.default_rng(5)
    cap = g.uniform(0.3, 1.0, (40, 2)).astype(np.float32)
    dem = g.uniform(0.01, 0.3, (300, 2)).astype(np.float32)
    genomes = np.concatenate([GENOME[None], g.uniform(-1, 1, (4, 8))]).astype(np.float32)
    genomes[:, 6:] = g.uniform(0.5, 2.0, (5, 2))
    keys = rng.trial_keys(2, "devices", 1)
    got = pack(Cluster(cap), workload(dem), PackConfig(policies=("family",) * 5, sample_k=sample_k), keys,
               genomes=genomes)
    assert_same(got, sequential.pack(cap, dem, ("family",) * 5, sample_k, keys, genomes=genomes))
    keys = rng.trial_keys(3, "devices", 3)
    assert len(packing.shard_devices(3)) == 2
    got = pack(Cluster(cap), workload(dem), PackConfig(policies=("cosine",), sample_k=sample_k), keys)
    assert_same(got, sequential.pack(cap, dem, ("cosine",), sample_k, keys))


def test_window_for_follows_the_expected_run_between_conflicts():
    """About sqrt(M / K) tasks pass between conflicts: the default window, a power of two, grows
    with the cluster and shrinks with K, within 4..32."""
    assert speculative.window_for(12_551, 64) == 8  # 0.9 sqrt(M / K) = 12.6
    assert speculative.window_for(50_000, 64) == 16  # 25.2
    assert speculative.window_for(2_000, 64) == 4
    assert speculative.window_for(10, 64) == 4 and speculative.window_for(10**7, 1) == 32
    sizes = [speculative.window_for(m, 64) for m in (500, 5_000, 50_000, 500_000, 5_000_000)]
    assert sizes == sorted(sizes) and all(w & (w - 1) == 0 for w in sizes)


@needs_samples
@pytest.mark.parametrize("sample_k", [64, 0])
def test_google_snapshot_places_exactly_like_one_task_at_a_time(tmp_path, sample_k):
    """The busiest instant of two parts of the real Google 2011 trace (identical machines: ties
    everywhere), 3,000 of its tasks, the seed's headline policies."""
    d = tmp_path / "g"
    (d / "task_events").mkdir(parents=True)
    for part in ("part-00000-of-00500.csv.gz", "part-00001-of-00500.csv.gz"):
        os.symlink(os.path.join(GOOGLE, "task_events", part), d / "task_events" / part)
    os.symlink(os.path.join(GOOGLE, "machine_events"), d / "machine_events")
    trace = load_google2011(str(d), cache_dir=str(tmp_path / "cache"))
    index, _ = snapshot_tasks(trace.workload, Filters(), trace.window[0], "busiest")
    snap = trace.take(np.asarray(index)[:: max(1, len(index) // 3000)][:3000])
    keys = rng.trial_keys(1, "snapshot", 2)
    names = ("best_fit", "alpha_evolve", "epvm") if sample_k else ("best_fit", "epvm")
    cap, dem = np.asarray(snap.cluster.capacity), np.asarray(snap.workload.demand)
    got = pack(snap.cluster, snap.workload, PackConfig(policies=names, sample_k=sample_k), keys)
    assert_same(got, sequential.pack(cap, dem, names, sample_k, keys))
    assert cap.shape[0] > 10_000 and dem.shape[0] == 3000


@pytest.mark.parametrize("window", [1, 2, 5, speculative.DIRECT_CONFLICTS, speculative.DIRECT_CONFLICTS + 1, 16])
def test_conflicts_match_a_pairwise_check(window):
    """Both ways of finding conflicts (comparing up to DIRECT_CONFLICTS, stamps beyond) flag task
    w exactly where an earlier pick of its window is one of its draws, over several steps of
    one stamp record."""
    G, K, M = 6, 5, 40
    gen = np.random.default_rng(window)
    none = M
    stamps = np.full((G, M + 1 if window > speculative.DIRECT_CONFLICTS else 0), -1.0, np.float32)
    for i in range(4):
        idx = gen.integers(0, M, (G, window, K)).astype(np.int32)
        j = np.where(gen.random((G, window)) < 0.2, none, idx[:, :, 0] if i % 2 else gen.integers(0, M, (G, window)))
        j = j.astype(np.int32)
        want = np.array([[any(j[g, v] != none and j[g, v] in idx[g, w] for v in range(w)) for w in range(window)]
                         for g in range(G)])
        got, stamps = speculative._conflicts(jax.numpy.asarray(idx), jax.numpy.asarray(j), jax.numpy.asarray(stamps),
                                             jax.numpy.int32(i))
        np.testing.assert_array_equal(np.asarray(got), want, err_msg=f"W={window} step {i}")
        assert want.any() or window == 1
