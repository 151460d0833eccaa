"""The batched JAX packing against the float64 reference loop, placement for placement."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import jaxsched
from jaxsched import packing, pickers, policies, rng
from jaxsched.packing import PackConfig, pack
from jaxsched.types import Cluster, Workload

import reference

NAMES = list(policies.REGISTRY) + ["family"]
GENOME = np.array([0.7, 1.3, 0.4, 0.9, 0.5, 2.0, 1.5, 0.75], np.float32)


def instance(seed, M=16, N=60, R=2):
    """Continuous random capacities and demands (no structural ties), about 100% loaded."""
    g = np.random.default_rng(seed)
    cap = g.uniform(0.3, 1.0, (M, R)).astype(np.float32)
    dem = g.uniform(0.02, 0.3, (N, R)).astype(np.float32)
    zeros = np.zeros(N, np.float32)
    return Cluster(cap), Workload(dem, np.zeros(N, np.int32), zeros, zeros)


def draws(keys, N, M, k):
    """The sample and noise draws the packing makes, per trial and step, for the reference."""
    sw, nw = rng.hash_words(keys, rng.STREAM_SAMPLE), rng.hash_words(keys, rng.STREAM_NOISE)
    samples = np.stack([np.asarray(rng.sample_machines(sw, i, k, M)) for i in range(N)], 1) if k else None
    noise = np.stack([np.asarray(rng.uniform_noise(nw, i, np.arange(M))) for i in range(N)], 1)
    return samples, noise  # [T, N, K], [T, N, M]


# (3, 3): an odd R pads the sampled state's last pair of dimensions.
@pytest.mark.parametrize("sample_k,R", [(0, 2), (3, 2), (3, 3)])
def test_placements_match_reference(sample_k, R):
    checked = {n: 0 for n in NAMES}
    for seed in range(3):
        cluster, wl = instance(seed, R=R)
        M, N, T = cluster.num_machines, wl.num_tasks, 2
        keys = rng.trial_keys(seed, "test", T)
        orders = np.asarray(rng.trial_orders(keys, N))
        genomes = np.stack([GENOME] * len(NAMES))
        st_ = pack(cluster, wl, PackConfig(policies=tuple(NAMES), sample_k=sample_k), keys, genomes=genomes)
        samples, noise = draws(keys, N, M, sample_k)
        for p, name in enumerate(NAMES):
            for t in range(T):
                want, free, fragile = reference.pack(
                    cluster.capacity, wl.demand, orders[t], name, GENOME,
                    None if samples is None else samples[t], noise[t], fragility=1e-5)
                if fragile:
                    continue
                checked[name] += 1
                np.testing.assert_array_equal(st_.placement[p, t], want, err_msg=f"{name} trial {t}")
                np.testing.assert_allclose(st_.free[p, t], free, atol=1e-5)
    assert all(v >= 2 for v in checked.values()), checked
    assert sum(checked.values()) >= 0.8 * 6 * len(NAMES), checked


@pytest.mark.parametrize("sample_k", [0, 3])
def test_zero_capacity_dimensions_match_reference(sample_k):
    """Machines without a third resource (a GPU) take only tasks that need none of it: the
    packing state holds such a dimension encoded (`policies.encode_free`), and placements,
    free capacities and the skipped tasks are still the reference's."""
    checked = 0
    for seed in range(2):
        g = np.random.default_rng(100 + seed)
        cluster, wl = instance(seed, M=16, N=60, R=3)
        cap, dem = cluster.capacity.copy(), wl.demand.copy()
        cap[g.uniform(size=16) < 0.5, 2] = 0.0
        cap[3, 0] = 0.0  # a machine without CPU takes nothing that needs CPU
        dem[g.uniform(size=60) < 0.6, 2] = 0.0
        cluster, wl = Cluster(cap), Workload(dem, wl.priority, wl.arrival, wl.duration)
        keys = rng.trial_keys(seed, "zero-capacity", 2)
        orders = np.asarray(rng.trial_orders(keys, 60))
        st_ = pack(cluster, wl, PackConfig(policies=tuple(NAMES), sample_k=sample_k), keys,
                   genomes=np.stack([GENOME] * len(NAMES)))
        samples, noise = draws(keys, 60, 16, sample_k)
        for p, name in enumerate(NAMES):
            for t in range(2):
                want, free, fragile = reference.pack(cap, dem, orders[t], name, GENOME,
                                                     None if samples is None else samples[t], noise[t],
                                                     fragility=1e-5)
                if fragile:
                    continue
                checked += 1
                np.testing.assert_array_equal(st_.placement[p, t], want, err_msg=f"{name} trial {t}")
                np.testing.assert_allclose(st_.free[p, t], free, atol=1e-5)
                assert np.all(st_.free[p, t][cap == 0] == 0)  # as users read it, not the encoding
    assert checked >= 0.8 * 4 * len(NAMES)


@pytest.mark.parametrize("sample_k", [0, 2])
def test_a_tiny_demand_never_lands_on_a_zero_capacity_dimension(sample_k):
    """5e-7 is within the feasibility tolerance of zero free capacity, but a dimension of zero
    capacity takes no demand at all: the task waits for the machine that has the resource."""
    cap = np.array([[1.0, 1.0, 0.0], [0.3, 0.3, 1.0]], np.float32)
    dem = np.array([[0.5, 0.5, 5e-7], [0.2, 0.2, 5e-7], [0.5, 0.5, 0.0]], np.float32)
    zeros = np.zeros(3, np.float32)
    st_ = pack(Cluster(cap), Workload(dem, np.zeros(3, np.int32), zeros, zeros),
               PackConfig(policies=("best_fit", "worst_fit", "first_fit"), sample_k=sample_k),
               rng.trial_keys(0, "tiny", 1), orders=np.array([[0, 1, 2]]))
    for p in range(3):
        np.testing.assert_array_equal(st_.placement[p, 0], [-1, 1, 0])


def test_batching_does_not_change_results():
    cluster, wl = instance(7, M=40, N=120)
    keys = rng.trial_keys(3, "test", 3)
    both = pack(cluster, wl, PackConfig(policies=("best_fit", "alpha_evolve", "random"), sample_k=4), keys)
    for p, name in enumerate(("best_fit", "alpha_evolve", "random")):
        alone = pack(cluster, wl, PackConfig(policies=(name,), sample_k=4), keys)
        np.testing.assert_array_equal(both.placement[p], alone.placement[0])
        np.testing.assert_array_equal(both.free[p], alone.free[0])


def test_fallback_of_a_few_missing_rows_in_a_big_batch():
    # 7 genomes x 3 trials = 21 rows of one policy: the full-scan fallback scans only the
    # rows whose draws all missed, one at a time, skipping the scoring of a row whose task
    # fits nowhere; each row must still be the reference packing.
    cluster, wl = instance(11, M=24, N=110)
    keys = rng.trial_keys(5, "test", 3)
    g = np.random.default_rng(2)
    genomes = np.concatenate([GENOME[None], g.uniform(-1, 1, (6, 8))]).astype(np.float32)
    genomes[:, 6:] = g.uniform(0.5, 2.0, (7, 2))
    batch = pack(cluster, wl, PackConfig(policies=("family",) * 7, sample_k=2), keys, genomes=genomes)
    orders = np.asarray(rng.trial_orders(keys, wl.num_tasks))
    samples, noise = draws(keys, wl.num_tasks, cluster.num_machines, 2)
    checked = 0
    for p in range(7):
        alone = pack(cluster, wl, PackConfig(policies=("family",), sample_k=2), keys, genomes=genomes[p:p + 1])
        np.testing.assert_array_equal(batch.placement[p], alone.placement[0])
        for t in range(3):
            want, _, fragile = reference.pack(cluster.capacity, wl.demand, orders[t], "family", genomes[p],
                                              samples[t], noise[t], fragility=1e-5)
            if not fragile:
                checked += 1
                np.testing.assert_array_equal(batch.placement[p, t], want, err_msg=f"genome {p} trial {t}")
    assert checked >= 15
    assert np.mean(batch.placement < 0) > 0.05  # overloaded: the fallback ran, and found nothing often


def test_trials_share_orders_across_policies():
    """Common random numbers: first_fit and best_fit see the same task order in trial t."""
    cluster, wl = instance(1, M=400, N=30)  # plenty of room: first_fit fills machine 0 first
    keys = rng.trial_keys(0, "test", 2)
    order = np.asarray(rng.trial_orders(keys, wl.num_tasks))
    st_ = pack(cluster, wl, PackConfig(policies=("first_fit",)), keys)
    first = st_.placement[0, 0, order[0][0]]
    assert first == 0
    assert not np.array_equal(order[0], order[1])


def test_block_boundaries_do_not_matter():
    cluster, wl = instance(2, M=30, N=150)
    keys = rng.trial_keys(0, "test", 2)
    a = pack(cluster, wl, PackConfig(policies=("cosine", "random"), sample_k=5, block=64), keys)
    b = pack(cluster, wl, PackConfig(policies=("cosine", "random"), sample_k=5, block=512), keys)
    np.testing.assert_array_equal(a.placement, b.placement)


@settings(max_examples=5, deadline=None)
@given(seed=st.integers(0, 10_000), M=st.integers(1, 40), N=st.integers(1, 90), R=st.integers(2, 3),
       k=st.sampled_from([0, 1, 4]), names=st.lists(st.sampled_from(NAMES), min_size=1, max_size=3))
def test_never_overcommits_and_counts_add_up(seed, M, N, R, k, names):
    g = np.random.default_rng(seed)
    cap = g.choice([0.0, 0.25, 0.5, 1.0], (M, R), p=[0.1, 0.3, 0.3, 0.3]).astype(np.float32)
    dem = (g.uniform(0, 0.4, (N, R)) * (g.uniform(size=(N, R)) > 0.1)).astype(np.float32)
    zeros = np.zeros(N, np.float32)
    cluster, wl = Cluster(cap), Workload(dem, np.zeros(N, np.int32), zeros, zeros)
    keys = rng.trial_keys(seed, "prop", 2)
    st_ = pack(cluster, wl, PackConfig(policies=tuple(names), sample_k=k), keys,
               genomes=np.stack([GENOME] * len(names)))
    assert st_.free.min() >= -1e-6
    for p in range(len(names)):
        for t in range(2):
            pl = st_.placement[p, t]
            used = np.zeros((M, R))
            np.add.at(used, pl[pl >= 0], dem[pl >= 0])
            np.testing.assert_allclose(cap - st_.free[p, t], used, atol=1e-5)
            # no demand ever lands on a zero-capacity dimension
            assert not np.any((cap[pl[pl >= 0]] == 0) & (dem[pl >= 0] > 0))
            m = jaxsched.snapshot_metrics(st_.free[p:p + 1, t:t + 1], cap, st_.placement[p:p + 1, t:t + 1],
                                          dem, (0.05, 0.05) + (0.0,) * (R - 2))
            assert int(m.placed[0, 0]) == int((pl >= 0).sum())


def test_unplaceable_task_stays_unplaced():
    cap = np.array([[0.5, 0.5], [0.25, 1.0]], np.float32)
    dem = np.array([[0.6, 0.1], [0.1, 0.1]], np.float32)
    zeros = np.zeros(2, np.float32)
    st_ = pack(Cluster(cap), Workload(dem, np.zeros(2, np.int32), zeros, zeros),
               PackConfig(policies=("best_fit",), sample_k=1), rng.trial_keys(0, "t", 1))
    assert st_.placement[0, 0, 0] == -1 and st_.placement[0, 0, 1] >= 0


def test_windows_and_chunks_do_not_change_results(monkeypatch):
    """The sampled engine keeps only the exact prefix of each window: any window length and any
    chunk length give the same placements and free capacity, through a filling cluster (fallback
    scans, failed scans remembered, rows ending windows at different places)."""
    from jaxsched import speculative

    cluster, wl = instance(5, M=100, N=500)
    keys = rng.trial_keys(0, "test", 2)
    names = ("best_fit", "random", "alpha_evolve")
    runs = []
    for window, chunk in ((1, 1024), (2, 7), (5, 64), (16, 1024), (32, 33)):
        monkeypatch.setattr(speculative, "CHUNK_TASKS", chunk)
        speculative.LAST_STATS.clear()
        runs.append(pack(cluster, wl, PackConfig(policies=names, sample_k=2, window=window), keys))
        assert speculative.LAST_STATS["scans"] > 0  # overloaded: fallback scans ran
    for other in runs[1:]:
        np.testing.assert_array_equal(other.placement, runs[0].placement)
        np.testing.assert_array_equal(other.free, runs[0].free)
    assert np.mean(runs[0].placement < 0) > 0.05


def test_trial_groups_give_the_same_results(monkeypatch):
    """Packing trials in sequential groups (CPU cache budget) changes no placement."""
    from jaxsched import packing

    cluster, wl = instance(4, M=50, N=100)
    keys = rng.trial_keys(2, "test", 5)
    cfg = PackConfig(policies=("best_fit", "random"), sample_k=3)
    whole = pack(cluster, wl, cfg, keys)
    monkeypatch.setattr(packing, "CPU_STATE_BUDGET", 2 * 2 * 128 * 4 * 2)  # two trials a group
    assert len(packing._trial_groups(5, 2 * 2 * 128 * 4)) == 3
    grouped = pack(cluster, wl, cfg, keys)
    np.testing.assert_array_equal(whole.placement, grouped.placement)
    np.testing.assert_array_equal(whole.free, grouped.free)


@pytest.mark.parametrize("sample_k", [0, 3])
def test_trials_sharded_over_two_devices_match_one_device(monkeypatch, sample_k):
    """The trial axis split over both CPU devices (3 trials: padded to 4) gives identical results."""
    from jaxsched import packing

    assert len(packing.shard_devices(3)) == 2  # tests/conftest.py forces two CPU devices
    cluster, wl = instance(6, M=40, N=600)
    keys = rng.trial_keys(3, "test", 3)
    cfg = PackConfig(policies=("best_fit", "random", "alpha_evolve"), sample_k=sample_k, block=128)
    sharded = pack(cluster, wl, cfg, keys)
    monkeypatch.setattr(packing, "shard_devices", lambda trials: tuple(jax.local_devices())[:1])
    single = pack(cluster, wl, cfg, keys)
    np.testing.assert_array_equal(sharded.placement, single.placement)
    np.testing.assert_array_equal(sharded.free, single.free)
    assert np.any(single.placement < 0) and np.any(single.placement >= 0)


@pytest.mark.parametrize("sample_k", [0, 3])
def test_rows_of_one_policy_sharded_over_two_devices_match_one_device(monkeypatch, sample_k):
    """One trial, 5 genomes of `family`: the rows split over both CPU devices (2 and 3 rows) give
    the one-device results, and each row is the reference packing."""
    cluster, wl = instance(8, M=30, N=300)
    keys = rng.trial_keys(4, "test", 1)
    g = np.random.default_rng(3)
    genomes = np.concatenate([GENOME[None], g.uniform(-1, 1, (4, 8))]).astype(np.float32)
    genomes[:, 6:] = g.uniform(0.5, 2.0, (5, 2))
    cfg = PackConfig(policies=("family",) * 5, sample_k=sample_k, block=64)
    assert packing.genome_shares(cfg, 1) == [(0, 2), (2, 5)]  # tests/conftest.py forces two CPU devices
    assert packing.genome_shares(cfg, 2) == []  # several trials: split those instead
    assert packing.genome_shares(PackConfig(policies=("family",)), 1) == []
    sharded = pack(cluster, wl, cfg, keys, genomes=genomes)
    monkeypatch.setattr(packing, "genome_shares", lambda cfg, trials: [])
    single = pack(cluster, wl, cfg, keys, genomes=genomes)
    np.testing.assert_array_equal(sharded.placement, single.placement)
    np.testing.assert_array_equal(sharded.free, single.free)
    order = np.asarray(rng.trial_orders(keys, wl.num_tasks))[0]
    samples, noise = draws(keys, wl.num_tasks, cluster.num_machines, sample_k)
    checked = 0
    for p in range(5):
        want, _, fragile = reference.pack(cluster.capacity, wl.demand, order, "family", genomes[p],
                                          None if samples is None else samples[0], noise[0], fragility=1e-5)
        if not fragile:
            checked += 1
            np.testing.assert_array_equal(sharded.placement[p, 0], want, err_msg=f"genome {p}")
    assert checked >= 3
    assert np.any(single.placement < 0) and np.any(single.placement >= 0)


def test_policy_shares_balance_cost_not_rows():
    """Two devices: the cut between whole policies that leaves the two shares' costs (rows x
    Policy.cost) closest; evo_search costs as much as several cheap rows."""
    assert len(jax.local_devices()) == 2
    assert packing.policy_shares(PackConfig(policies=("evo_search",) + ("best_fit",) * 4)) == [(0, 1), (1, 5)]
    names = [n for n in policies.REGISTRY]
    g = np.random.default_rng(3)
    for _ in range(20):
        picked = g.choice(names, g.integers(2, 9), replace=False)
        cfg = PackConfig(policies=tuple(n for n in picked for _ in range(g.integers(1, 4))))
        cost = np.array([policies.get_policy(n).cost for n in cfg.policies])
        (a, cut), (cut2, b) = packing.policy_shares(cfg)
        assert (a, cut2, b) == (0, cut, len(cfg.policies))
        ends = [hi for _, _, hi in cfg.groups()[:-1]]
        assert cut in ends
        spread = lambda c: abs(cost[:c].sum() - cost[c:].sum())
        assert spread(cut) <= min(spread(c) for c in ends) + 1e-9


def test_policies_split_over_two_devices_match_one_device(monkeypatch):
    """Rows of three policies run as two programs on the two CPU devices (whole policies per
    device), with per-row machine prefixes, demand scales and task limits: identical to one
    program, and progress counts up to the total."""
    cluster, wl = instance(9, M=40, N=400)
    T = 3
    keys = rng.trial_keys(6, "test", T)
    cfg = PackConfig(policies=("best_fit", "best_fit", "random", "alpha_evolve"), sample_k=3, block=64)
    assert packing.policy_shares(cfg) == [(0, 2), (2, 4)]
    g = np.random.default_rng(1)
    variants = packing.RowVariants(machine_rank=np.stack([g.permutation(40) for _ in range(T)]).astype(np.int32),
                                   prefix=g.integers(10, 41, (4, T)), demand_scale=g.uniform(0.5, 1.5, (4, T)),
                                   task_limit=g.integers(100, 401, (4, T)))
    seen = []
    split = pack(cluster, wl, cfg, keys, variants=variants, progress=lambda d, n: seen.append((d, n)))
    monkeypatch.setattr(packing, "policy_shares", lambda cfg: [])
    single = pack(cluster, wl, cfg, keys, variants=variants)
    np.testing.assert_array_equal(split.placement, single.placement)
    np.testing.assert_array_equal(split.free, single.free)
    assert seen[-1] == (wl.num_tasks, wl.num_tasks) and all(a <= b for (a, _), (b, _) in zip(seen, seen[1:]))
    assert np.any(single.placement < 0) and np.any(single.placement >= 0)


@pytest.mark.parametrize("R", [2, 3])
def test_pairs_round_trip(R):
    """The sampled state's pairs of dimensions hold the free capacity exactly, an odd R padded."""
    from jaxsched import speculative

    free = np.random.default_rng(R).uniform(-1, 1, (3, 2, R, 40)).astype(np.float32)
    z = speculative.to_pairs(jnp.asarray(free))
    assert jnp.iscomplexobj(z) and z.shape == (3, 2, (R + 1) // 2, 40)
    np.testing.assert_array_equal(np.asarray(speculative.from_pairs(z, R)), free)
    rows = speculative.pair_rows(z, R)
    for x in range(R):
        np.testing.assert_array_equal(np.asarray(rows[x]), free[:, :, x])


@pytest.mark.parametrize("R", [2, 3])
def test_fit_bound_never_skips_a_task_that_fits(R):
    """`_may_fit` is True wherever some machine is feasible (d <= f + 1e-6 on every dimension),
    and its staircase rules out tasks that the per-dimension maxima alone would let through."""
    from jaxsched import speculative

    g = np.random.default_rng(R)
    G, M, N = 8, 40, 400
    free = g.uniform(0, 1, (G, R, M)).astype(np.float32) ** 3  # mostly small free values
    free[0, :, :5] = -1.0  # padding machines: never feasible
    demand = g.uniform(0, 0.6, (N, R)).astype(np.float32)
    demand[:20] = free[0, :, 5 + np.arange(20)] + np.float32(1e-6)  # at the tolerance ([20, R])
    scale = g.uniform(0.5, 1.5, G).astype(np.float32)
    cuts = speculative.staircase_cuts(demand)
    assert cuts.shape == (2, speculative.STAIRS)
    bound = speculative._bound(tuple(jnp.asarray(free[:, x]) for x in range(R)),
                               jnp.asarray(cuts[:, None, :] * scale[None, :, None]))
    d = demand[None] * scale[:, None, None]  # [G, N, R], as the step scales it
    fits = np.any(np.all(d[..., None] <= free[:, None] + np.float32(1e-6), axis=-2), axis=-1)  # [G, N]
    may = np.asarray(speculative._may_fit(bound, jnp.asarray(d)))
    assert not np.any(fits & ~may)  # sound
    top_only = np.all(d <= free.max(axis=-1)[:, None] + np.float32(1e-6), axis=-1)
    fits01 = np.any(np.all(d[..., :2, None] <= free[:, None, :2] + np.float32(1e-6), axis=-2), axis=-1)
    pruned, missed = np.sum(top_only & ~may), np.sum(top_only & ~fits01)
    assert pruned > (0.3 * missed if R == 2 else 0) and missed > 0


@pytest.mark.parametrize("X", [2048, 384, 100])
def test_first_best_is_the_lowest_index_argmax_with_many_ties(X):
    # Few distinct scores, so that ties within a chunk and across chunks are common; some
    # rows hold only -inf (nothing feasible), some hold the top score in one late lane.
    g = np.random.default_rng(X)
    s = g.integers(0, 4, (64, X)).astype(np.float32)
    s[g.random((64, X)) < 0.5] = -np.inf
    s[:8] = -np.inf
    s[8:16] = np.where(g.random((8, X)) < 0.99, -np.inf, 1.0)
    s[16, -1] = 9.0
    got = np.asarray(jax.jit(lambda x: pickers.first_best(x, jnp.int32(X)))(s))
    want = np.where(np.any(s > -np.inf, axis=1), np.argmax(s, axis=1), X)
    np.testing.assert_array_equal(got, want)


def test_kept_machine_terms_equal_their_recomputation():
    """A full scan keeps epvm's per-machine terms (`Policy.cached`) and recomputes them only where
    a task lands: after placements they are, bit for bit, the terms of the new state."""
    cluster, wl = instance(7, M=300, N=8, R=2)
    cfg = PackConfig(policies=("best_fit", "epvm", "epvm"))
    P, T, R, Mp = 3, 2, 2, 384
    g = np.random.default_rng(7)
    cap_t = np.full((R, Mp), packing.PAD_CAPACITY, np.float32)
    cap_t[:, :300] = cluster.capacity.T
    inv = policies.safe_inverse(jnp.asarray(cap_t))
    free = jnp.asarray(np.broadcast_to(cap_t * g.uniform(0.2, 1.0, (P, T, R, Mp)), (P, T, R, Mp)), jnp.float32)
    caches = packing.machine_caches(cfg, free, inv)
    assert caches[0] is None and caches[1].shape == (2, T, R, Mp)
    none = jnp.int32(Mp)
    for step in range(6):
        j = jnp.asarray(g.integers(0, 300, (P, T)), jnp.int32).at[1, 0].set(none)  # one row places nothing
        d = jnp.asarray(g.uniform(0.0, 0.05, (P, T, R)), jnp.float32)
        free = packing._place(free, j, d, none)
        caches = packing.update_caches(cfg, caches, free, inv, j, none)
    want = packing.machine_caches(cfg, free, inv)
    np.testing.assert_array_equal(np.asarray(caches[1]), np.asarray(want[1]))
    np.testing.assert_array_equal(np.asarray(caches[1]), np.asarray(
        jnp.stack(policies.REGISTRY["epvm"].cached(tuple(free[1:, :, x] for x in range(R)),
                                                   tuple(inv[x][None, None] for x in range(R))), axis=2)))


@pytest.mark.parametrize("sample_k", [0, 4])
def test_zero_tasks_give_an_empty_packing(sample_k):
    cluster = Cluster(capacity=np.array([[1.0, 0.5], [0.5, 1.0]], np.float32))
    empty = Workload(demand=np.zeros((0, 2), np.float32), priority=np.zeros(0, np.int32), arrival=np.zeros(0),
                     duration=np.zeros(0))
    st = pack(cluster, empty, PackConfig(policies=("best_fit", "cosine"), sample_k=sample_k), rng.trial_keys(1, "t", 3))
    assert np.asarray(st.placement).shape == (2, 3, 0)
    np.testing.assert_array_equal(np.asarray(st.free), np.broadcast_to(cluster.capacity, (2, 3, 2, 2)))
    res = jaxsched.run_snapshot(cluster, empty, jaxsched.SnapshotConfig(policies=("best_fit",), trials=2,
                                                                        sample_k=sample_k))
    assert res.placement.shape == (1, 2, 0) and np.all(np.asarray(res.metrics.placed) == 0)
