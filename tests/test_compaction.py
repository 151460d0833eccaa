"""Compaction and inflation: the batched search against the sequential binary search over the
float64 reference packing, the search driver on arbitrary predicates, ceilings, and the row
variants the searches pack with."""

import dataclasses

import numpy as np
import pytest

from jaxsched import policies, rng
from jaxsched.compaction import (STEPS_PER_UNIT, clone_cap, clone_workload, compaction, compaction_and_inflation,
                                 inflation, machine_ranks, overflows, scale_cap, surely_packs)
from jaxsched.packing import PackConfig, RowVariants, pack
from jaxsched.search import bisect, bisect_sequential
from jaxsched.types import Cluster, Workload

import reference

DETERMINISTIC = [n for n, p in policies.REGISTRY.items() if p.deterministic]
GENOME = np.array(policies.ALPHA_EVOLVE_GENOME, np.float32)


def instance(seed, M=10, N=40):
    g = np.random.default_rng(seed)
    cap = g.uniform(0.3, 1.0, (M, 2)).astype(np.float32)
    dem = g.uniform(0.02, 0.25, (N, 2)).astype(np.float32)
    z = np.zeros(N)
    return Cluster(cap), Workload(dem, np.zeros(N, np.int32), z, z)


@pytest.mark.parametrize("find", ["first", "last", "mixed"])
@pytest.mark.parametrize("depth", [1, 2, 3, 5])
def test_bisect_visits_what_binary_search_visits(find, depth):
    g, noise = np.random.default_rng(depth), np.random.default_rng(1)
    for _ in range(40):
        B = 6
        lo = g.integers(0, 30, B)
        hi = lo + g.integers(0, 200, B)
        truth = g.random((B, 300)) < g.random((B, 1))  # arbitrary, not monotone
        kinds = ["first", "last"] * 3 if find == "mixed" else [find] * B
        calls = []

        def evaluate(cands, needed):
            calls.append(cands.shape[1])
            # What the walk does not read does not matter: answer it at random.
            return np.where(needed, truth[np.arange(B)[:, None], cands], noise.random(cands.shape) < 0.5)

        got = bisect(lo, hi, evaluate, kinds if find == "mixed" else find, depth)
        want = [bisect_sequential(int(lo[b]), int(hi[b]), lambda x, b=b: bool(truth[b, x]), kinds[b])
                for b in range(B)]
        assert list(got) == want
        assert set(calls) <= {2**depth - 1}
        span = int(np.max(hi - lo)) + 1
        assert len(calls) <= -(-int(np.ceil(np.log2(span))) // depth)


@pytest.mark.parametrize("depth", [1, 3])
def test_bisect_skips_rounds_known_to_fail(depth):
    g, noise = np.random.default_rng(7 + depth), np.random.default_rng(0)
    skipped = 0
    for _ in range(40):
        B = 2
        lo, hi = np.ones(B, np.int64), np.full(B, 400, np.int64)
        threshold = g.integers(150, 400, (B, 1))
        truth = (np.arange(401)[None] >= threshold) & (g.random((B, 401)) < 0.9)  # false below, not monotone above
        known = (np.arange(401)[None] < threshold) & (g.random((B, 401)) < 0.95)  # most of the sure failures
        calls = []

        def evaluate(cands, needed):
            calls.append(1)
            assert not np.any(needed & known[np.arange(B)[:, None], cands])  # a sure failure is never asked for
            # What is not needed does not matter: answer it at random.
            return np.where(needed, truth[np.arange(B)[:, None], cands], noise.random(cands.shape) < 0.5)

        got = bisect(lo, hi, evaluate, "first", depth, known_false=lambda c: known[np.arange(B)[:, None], c])
        visits = [[] for _ in range(B)]
        want = [bisect_sequential(1, 400, lambda x, b=b: visits[b].append(x) or bool(truth[b, x]), "first")
                for b in range(B)]
        assert list(got) == want
        rounds = max(-(-len(v) // depth) for v in visits)  # what bisect takes without the skip
        assert len(calls) <= rounds
        if depth == 1:  # a search steps past its sure failures at once: a round per point it must evaluate
            assert len(calls) == max(sum(not known[b, x] for x in visits[b]) for b in range(B))
        skipped += rounds - len(calls)
    assert skipped > 0


def test_overflows_is_sound_and_not_fooled_by_an_exact_fit():
    # Sixteen tasks of 0.25 exactly fill four unit machines: no overflow, and they pack.
    cap, dem = np.ones((4, 2)), np.full((16, 2), 0.25)
    assert not overflows(dem.sum(0), cap.sum(0), 4, 16, 1.0)
    z = np.zeros(16)
    st = pack(Cluster(cap.astype(np.float32)), Workload(dem.astype(np.float32), np.zeros(16, np.int32), z, z),
              PackConfig(policies=("first_fit",)), rng.trial_keys(0, "t", 1))
    assert np.all(st.placement >= 0)
    assert overflows(dem.sum(0) + 0.01, cap.sum(0), 4, 16, 1.0)
    # Where it says a prefix overflows, no policy packs everything on that prefix.
    for seed in range(3):
        cluster, wl = instance(seed, M=12, N=40)
        keys = rng.trial_keys(seed, "overflow", 1)
        rank = machine_ranks(keys, 12)
        held = np.cumsum(np.asarray(cluster.capacity, np.float64)[np.argsort(rank[0])], axis=0)
        said = [L for L in range(1, 13) if overflows(wl.demand.astype(np.float64).sum(0), held[L - 1], L, 40, 1.0)]
        assert said  # the instance is loaded enough for some prefixes to overflow
        cfg = PackConfig(policies=("first_fit", "best_fit", "worst_fit"))
        for L in said:
            st = pack(cluster, wl, cfg, keys, variants=RowVariants(machine_rank=rank, prefix=np.full((3, 1), L)))
            assert not np.any(np.all(st.placement >= 0, axis=-1)), L


def test_surely_packs_is_sound_and_decides_small_multipliers():
    """Where `surely_packs` says so, every policy places every task; it says so for tiny
    demands and not for a loaded cluster, or where a task exceeds every machine."""
    names = tuple(DETERMINISTIC)
    said = 0
    for seed in range(4):
        cluster, wl = instance(seed + 30, M=12, N=60)
        cap, dem = np.asarray(cluster.capacity, np.float64), np.asarray(wl.demand, np.float64)
        for scale in (0.005, 0.02, 0.05, 0.1, 1.0):
            sure = surely_packs(cap, (dem * scale).sum(0), (dem * scale).max(0))
            if not sure:
                continue
            said += 1
            scaled = dataclasses.replace(wl, demand=(dem * scale).astype(np.float32))
            st = pack(cluster, scaled, PackConfig(policies=names), rng.trial_keys(seed, "sure", 3))
            assert np.all(st.placement >= 0), (seed, scale)
        assert not surely_packs(cap, dem.sum(0), dem.max(0))
    assert said >= 4
    assert not surely_packs(np.ones((3, 2)), np.full(2, 0.1), np.array([0.1, 1.5]))  # fits no machine
    # Machines too small for the largest task may refuse it from the start: they count against the bound.
    assert surely_packs(np.ones((10, 2)), np.full(2, 0.3), np.full(2, 0.1))
    assert not surely_packs(np.array([[1.0, 1.0]] + [[0.05, 0.05]] * 9), np.full(2, 0.3), np.full(2, 0.1))


def _reference_packs(cap, demand, order, name):
    """(all placed, fragile) for the float64 reference packing."""
    out, _, fragile = reference.pack(cap, demand, order, name, GENOME, fragility=1e-5)
    return bool(np.all(out[order] >= 0)), fragile


@pytest.mark.parametrize("depth", [1, 3])
def test_compaction_equals_sequential_search_on_reference(depth):
    checked = searched = 0
    for seed in range(2):
        cluster, wl = instance(seed, M=10, N=25)  # about half loaded: most policies pack it all
        M, T = cluster.num_machines, 2
        keys = rng.trial_keys(seed, "compaction", T)
        orders = np.asarray(rng.trial_orders(keys, wl.num_tasks))
        ranks = machine_ranks(keys, M)
        cfg = PackConfig(policies=tuple(DETERMINISTIC))
        full = pack(cluster, wl, cfg, keys)
        packs_full = np.all(full.placement >= 0, axis=-1)
        res = compaction(cluster, wl, cfg, keys, np.stack([GENOME] * len(DETERMINISTIC)), packs_full, depth)
        for p, name in enumerate(DETERMINISTIC):
            for t in range(T):
                fragile = []

                def pred(L):
                    ok, frag = _reference_packs(cluster.capacity[ranks[t] < L], wl.demand, orders[t], name)
                    fragile.append(frag)
                    return ok

                full_ok = pred(M)
                want = bisect_sequential(1, M, pred, "first") / M if full_ok else 1.0
                if any(fragile):
                    continue
                checked += 1
                searched += full_ok
                assert res.value[p, t] == want, (name, t)
                assert res.ceiling[p, t] == (not full_ok)
    assert checked >= 0.6 * 2 * 2 * len(DETERMINISTIC), checked
    assert searched >= 0.5 * checked, searched  # the search itself ran, not only the ceiling


@pytest.mark.parametrize("mode", ["scale", "clone"])
def test_inflation_equals_sequential_search_on_reference(mode):
    checked = searched = 0
    names = ["best_fit", "first_fit", "alpha_evolve", "cosine", "worst_fit", "slot_loss"]
    for seed in range(2):
        cluster, wl = instance(seed + 10, M=8, N=25)
        N, T = wl.num_tasks, 2
        keys = rng.trial_keys(seed, "inflation", T)
        cfg = PackConfig(policies=tuple(names))
        res = inflation(cluster, wl, cfg, keys, np.stack([GENOME] * len(names)), mode, depth=2)
        if mode == "scale":
            K = int(np.floor(scale_cap(cluster, wl) * STEPS_PER_UNIT + 1e-9))
            orders = np.asarray(rng.trial_orders(keys, N))
        else:
            K = int(np.floor(clone_cap(cluster, wl) * STEPS_PER_UNIT + 1e-9))
            big = clone_workload(wl, keys, K)
            orders = np.asarray(rng.trial_permutations(keys, big.num_tasks, rng.STREAM_CLONE_ORDER))
        for p, name in enumerate(names):
            for t in range(T):
                fragile = []

                def pred(k):
                    if mode == "scale":
                        dem, order = wl.demand.astype(np.float64) * np.float32(k / STEPS_PER_UNIT), orders[t]
                    else:
                        dem, order = big.demand, orders[t][orders[t] < k * N // STEPS_PER_UNIT]
                    ok, frag = _reference_packs(cluster.capacity, dem, order, name)
                    fragile.append(frag)
                    return ok

                if pred(K):
                    want = K
                elif not pred(1):
                    want = 0
                else:
                    want = bisect_sequential(1, K - 1, pred, "last")
                if any(fragile):
                    continue
                checked += 1
                searched += 0 < want < K
                assert res.value[p, t] == want / STEPS_PER_UNIT, (name, t, mode)
    assert checked >= 0.6 * 2 * 2 * len(names), checked
    assert searched >= 0.5 * checked, searched


def test_joint_search_gives_compaction_and_inflation_answers():
    # The searches sharing packings find what they find apart (each checked against the
    # sequential search above), ceilings and all: loaded instances where some policies do
    # not pack everything on the whole cluster; two candidates a round, and sampled picking.
    names = ("best_fit", "first_fit", "alpha_evolve")
    for seed, N, sample_k, depth in ((20, 30, 0, 2), (21, 38, 3, 1)):
        cluster, wl = instance(seed, M=9, N=N)
        keys = rng.trial_keys(seed - 20, "joint", 3)
        cfg = PackConfig(policies=names, sample_k=sample_k)
        genomes = np.stack([GENOME] * len(names))
        packs_full = np.all(pack(cluster, wl, cfg, keys).placement >= 0, axis=-1)
        comp, infl = compaction_and_inflation(cluster, wl, cfg, keys, genomes, packs_full, depth)
        want_c = compaction(cluster, wl, cfg, keys, genomes, packs_full, depth)
        want_i = inflation(cluster, wl, cfg, keys, genomes, "scale", depth)
        for got, want in ((comp, want_c), (infl, want_i)):
            np.testing.assert_array_equal(got.value, want.value)
            np.testing.assert_array_equal(got.ceiling, want.ceiling)
            assert got.reason == want.reason
        assert comp.packings <= want_c.packings + packs_full.size and infl.packings <= want_i.packings
        assert not packs_full.all() and packs_full.any()  # both kinds of compaction row
        assert 0 < np.sum(~infl.ceiling) and 0 < np.sum(~comp.ceiling)  # both searches ran


def test_ceilings_are_flagged():
    # Overloaded: nothing packs on the whole cluster, so compaction sits at 1.0 for every trial.
    cap = np.full((3, 2), 0.5, np.float32)
    dem = np.full((10, 2), 0.2, np.float32)
    z = np.zeros(10)
    cluster, wl = Cluster(cap), Workload(dem, np.zeros(10, np.int32), z, z)
    keys = rng.trial_keys(0, "ceil", 2)
    cfg = PackConfig(policies=("best_fit",))
    res = compaction(cluster, wl, cfg, keys, GENOME[None], np.zeros((1, 2), bool))
    assert np.all(res.value == 1.0) and np.all(res.ceiling) and res.packings == 0
    # A whale: one task of 0.5 on machines of 1.0 caps scale inflation at 2.0, and it packs there.
    cap = np.ones((4, 2), np.float32)
    dem = np.array([[0.5, 0.1]] + [[0.01, 0.01]] * 5, np.float32)
    z = np.zeros(6)
    cluster, wl = Cluster(cap), Workload(dem, np.zeros(6, np.int32), z, z)
    assert scale_cap(cluster, wl) == 2.0
    res = inflation(cluster, wl, cfg, keys, GENOME[None], "scale")
    assert np.all(res.value == 2.0) and np.all(res.ceiling)


def test_prefix_variant_packs_like_the_sub_cluster():
    cluster, wl = instance(3, M=24, N=70)
    keys = rng.trial_keys(1, "prefix", 3)
    ranks = machine_ranks(keys, cluster.num_machines)
    orders = np.asarray(rng.trial_orders(keys, wl.num_tasks))
    prefix = np.array([[5, 12, 24], [1, 20, 7]])
    cfg = PackConfig(policies=("best_fit", "cosine"))
    st_ = pack(cluster, wl, cfg, keys, variants=RowVariants(machine_rank=ranks, prefix=prefix))
    for p, name in enumerate(cfg.policies):
        for t in range(3):
            sub = np.flatnonzero(ranks[t] < prefix[p, t])
            alone = pack(Cluster(cluster.capacity[sub]), wl, PackConfig(policies=(name,)), keys[t:t + 1],
                         orders=orders[t:t + 1])
            want = np.where(alone.placement[0, 0] >= 0, sub[alone.placement[0, 0]], -1)
            np.testing.assert_array_equal(st_.placement[p, t], want)


def _cli_json(tmp_path, name, args, capsys):
    from jaxsched import cli
    import json

    path = tmp_path / f"{name}.json"
    code = cli.main(["snapshot", "--machines", "60", "--rho", "0.7", "--trials", "2", "--policy",
                     "best_fit,alpha_evolve,first_fit", "--json", str(path), *args])
    out = capsys.readouterr()
    assert code == 0, out.err
    return json.loads(path.read_text()), out.out


def test_cli_reports_searches_with_ceilings_and_any_depth_agrees(tmp_path, capsys):
    doc, table = _cli_json(tmp_path, "d1", ["--inflate-mode", "clone"], capsys)
    deep, _ = _cli_json(tmp_path, "d3", ["--inflate-mode", "clone", "--search-depth", "3"], capsys)
    assert doc["policies"] == deep["policies"]  # same answers whatever the levels per round
    for name, metrics in doc["policies"].items():
        for key in ("compaction", "inflation"):
            m = metrics[key]
            assert {"median", "at_ceiling", "ceiling_means"} <= set(m) and len(m["trials"]) == 2
        assert 0 < metrics["compaction"]["median"] <= 1
    assert "compaction" in table and "inflation" in table
    assert doc["settings"]["inflate_mode"] == "clone"
    none, table = _cli_json(tmp_path, "none", ["--no-compaction", "--no-inflation"], capsys)
    assert "compaction" not in none["policies"]["best_fit"] and "inflation" not in none["policies"]["best_fit"]
    assert "compaction" not in table


def test_cli_marks_a_ceiling(tmp_path, capsys):
    doc, table = _cli_json(tmp_path, "full", ["--rho", "1.05", "--no-inflation"], capsys)  # overloaded
    assert all(m["compaction"]["at_ceiling"] == 2 for m in doc["policies"].values())
    assert "1.000±0.000*" in table and "* compaction at its ceiling (does not pack 100%" in table
