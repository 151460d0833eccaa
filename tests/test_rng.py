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
