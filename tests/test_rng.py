"""The random streams: trial orders are jax.random.permutation's, element for element."""

import jax
import numpy as np
import pytest

from jaxsched import rng


@pytest.mark.parametrize("n", [0, 1, 2, 3, 1625, 1626, 40_000])
@pytest.mark.parametrize("stream", [rng.STREAM_ORDER, rng.STREAM_CLONE_ORDER])
def test_trial_permutations_are_jax_random_permutation(n, stream):
    """The numpy stable sorts give JAX's own permutation (1 sort round up to n = 1625, 2 from
    1626: the boundaries of its round count), for every trial."""
    keys = rng.trial_keys(7, "orders", 3)
    want = np.asarray(jax.vmap(lambda k: jax.random.permutation(jax.random.fold_in(k, stream), n))(keys))
    got = rng.trial_permutations(keys, n, stream)
    assert got.dtype == np.int32 and got.shape == (3, n)
    np.testing.assert_array_equal(got, want)


def test_stable_argsort_of_u32_keys_is_numpys():
    """Two radix passes over 16-bit halves sort like numpy's stable sort, ties and extremes included."""
    g = np.random.default_rng(0)
    keys = g.integers(0, 2**32, (4, 5000), dtype=np.uint64).astype(np.uint32)
    keys[:, :100] = keys[:, 100:200]  # ties
    keys[0, :3] = [0, 2**32 - 1, 2**16]
    np.testing.assert_array_equal(rng._stable_argsort_u32(keys), np.argsort(keys, axis=1, kind="stable"))


def _key_data(keys):
    return np.asarray(jax.random.key_data(keys))


def test_every_seed_is_its_own_stream():
    """Seeds 2^32 apart used to share a stream (JAX keeps a seed's low 32 bits): no two seeds of
    0..2^64-1 do now, and the seeds below 2^32 keep the streams they always had."""
    seeds = [0, 5, 2**32 - 1, 2**32, 2**32 + 5, 2**33, 2**64 - 1]
    keys = [_key_data(rng.trial_keys(s, "snapshot", 3)) for s in seeds]
    assert len({k.tobytes() for k in keys}) == len(seeds)
    for s in (0, 5, 2**32 - 1):
        old = jax.vmap(lambda t: jax.random.fold_in(jax.random.fold_in(jax.random.key(s), rng.experiment_id("snapshot")),
                                                    t))(np.arange(3, dtype=np.uint32))
        np.testing.assert_array_equal(_key_data(rng.trial_keys(s, "snapshot", 3)), _key_data(old))
    orders = [rng.trial_orders(rng.trial_keys(s, "snapshot", 1), 50) for s in (0, 2**32)]
    assert not np.array_equal(*orders)


@pytest.mark.parametrize("seed", [-1, 2**64, 1180591620717411303424, 1.5, "3", True])
def test_seed_out_of_range_is_refused(seed):
    from jaxsched.errors import InputError

    with pytest.raises(InputError, match="seed must be"):
        rng.trial_keys(seed, "snapshot", 1)


@pytest.mark.parametrize("command", [["snapshot", "--machines", "20"], ["event", "--machines", "20"],
                                     ["evolve", "--machines", "20"], ["cvx", "--machines", "20"]])
def test_cli_refuses_a_seed_out_of_range_in_one_line(command, capsys):
    from cli_runner import run

    code, out, err = run([*command, "--seed", str(2**64)], capsys)
    assert code == 2 and err.startswith("jaxsched: error: --seed") and "0..18446744073709551615" in err
    assert "Traceback" not in err and err.count("\n") == 1
