"""Random streams derived from (seed, experiment, trial), identical on any device count.

Keys are JAX threefry keys. The per-placement draws (the K machines of `sample_k`
and the `random` policy's scores) are too many for threefry on a CPU, so each trial's
key yields two 32-bit words that seed a counter-based hash (three rounds of the
`lowbias32` integer mixer) of (step, lane). A draw is a pure function of (seed,
experiment, trial, step, lane): no state, no device dependence.
"""

from __future__ import annotations

import functools
import zlib

import jax
import jax.numpy as jnp
import numpy as np

# Sub-streams folded into a trial key.
STREAM_ORDER = 0
STREAM_SAMPLE = 1
STREAM_NOISE = 2
STREAM_MACHINES = 3  # compaction's random machine order
STREAM_CLONE_ORDER = 4  # the task order of clone-mode inflation
STREAM_CVX_SAMPLE = 5  # CvxCluster's random servers of a shape
STREAM_CVX_SCAN = 6  # CvxCluster's uniform pick among all feasible servers of a shape
STREAM_GPUSHARE = 7  # the Random policy's node and GPU draws in GPU-sharing runs


MAX_SEED = (1 << 64) - 1  # seeds are 0 .. 2^64 - 1, each its own stream


def check_seed(seed) -> int:
    """`seed` as an int, or InputError where it is not an integer in 0 .. 2^64 - 1."""
    from .errors import InputError

    if isinstance(seed, bool) or not isinstance(seed, (int, np.integer)):
        raise InputError(f"seed must be an integer in 0..2^64-1, got {seed!r}")
    if not 0 <= int(seed) <= MAX_SEED:
        raise InputError(f"seed must be in 0..2^64-1 ({MAX_SEED}), got {seed}")
    return int(seed)


def seed_key(seed: int) -> jax.Array:
    """The threefry key of a seed in 0 .. 2^64 - 1: key(seed) below 2^32 (so those seeds keep
    their streams), key(low 32 bits) with the high 32 bits folded in above, so that no two
    seeds share a stream (JAX's key() keeps only a seed's low 32 bits without x64)."""
    seed = check_seed(seed)
    key = jax.random.key(seed & 0xFFFFFFFF)
    return key if seed >> 32 == 0 else jax.random.fold_in(key, seed >> 32)


def experiment_id(experiment: str) -> int:
    """Stable 31-bit id of an experiment name (crc32, not Python's salted hash)."""
    return zlib.crc32(experiment.encode()) & 0x7FFFFFFF


def trial_keys(seed: int, experiment: str, trials: int) -> jax.Array:
    """Keys for trials 0..trials-1 of `experiment` under `seed`.

    Args:
        seed: the run's seed.
        experiment: a name that separates the streams of experiments ("snapshot", "event", ...).
        trials: how many keys.

    Returns:
        key[T], threefry keys fold_in(fold_in(seed_key(seed), crc32(experiment)), t).

    Raises:
        InputError: a seed outside 0 .. 2^64 - 1.
    """
    return _trial_keys(check_seed(seed), experiment_id(experiment), trials)


@functools.partial(jax.jit, static_argnums=(0, 1, 2))
def _trial_keys(seed: int, experiment: int, trials: int) -> jax.Array:
    # One compiled program (cached on disk like the others) rather than a dispatch per operation.
    base = jax.random.fold_in(seed_key(seed), experiment)
    return jax.vmap(lambda t: jax.random.fold_in(base, t))(jnp.arange(trials, dtype=jnp.uint32))


def trial_orders(keys: jax.Array, num_tasks: int) -> np.ndarray:
    """One shuffled task order per trial, shared by every policy: i32[T, N]."""
    return trial_permutations(keys, num_tasks, STREAM_ORDER)


def trial_permutations(keys: jax.Array, n: int, stream: int) -> np.ndarray:
    """One random permutation of range(n) per trial, from the trial key's `stream`: i32[T, n].

    Each is `jax.random.permutation(fold_in(key, stream), n)`, element for element: the same
    rounds of 32-bit sort keys from the same key splits (`_SHUFFLE_EXPONENT`), but the stable
    sorts run in numpy, about ten times faster than XLA's sort on a CPU.
    """
    rounds = int(np.ceil(_SHUFFLE_EXPONENT * np.log(max(1, n)) / np.log(np.iinfo(np.uint32).max)))
    bits = np.asarray(_shuffle_keys(keys, stream, n, rounds))  # u32[rounds, T, n]
    out = np.broadcast_to(np.arange(n, dtype=np.int32), (keys.shape[0], n)).copy()
    for r in range(rounds):  # each round: a stable sort of the current order by fresh keys
        out = np.take_along_axis(out, _stable_argsort_u32(bits[r]), axis=1)
    return out


def _stable_argsort_u32(keys: np.ndarray) -> np.ndarray:
    """np.argsort(keys, axis=-1, kind="stable") of u32 keys, as two stable radix sorts of 16-bit
    halves (numpy sorts 16-bit integers by radix; 32-bit ones by timsort, 3x slower here)."""
    low = np.argsort((keys & 0xFFFF).astype(np.uint16), axis=-1, kind="stable")
    high = np.take_along_axis(keys >> 16, low, axis=-1).astype(np.uint16)
    return np.take_along_axis(low, np.argsort(high, axis=-1, kind="stable"), axis=-1)


@functools.partial(jax.jit, static_argnums=(2, 3))
def _shuffle_keys(keys, stream, n: int, rounds: int):
    """The sort keys of each round of jax.random.permutation(fold_in(key, stream), n), per trial."""
    def one(key):
        key = jax.random.fold_in(key, stream)
        out = []
        for _ in range(rounds):
            key, sub = jax.random.split(key)
            out.append(jax.random.bits(sub, (n,), jnp.uint32))
        return jnp.stack(out) if out else jnp.zeros((0, n), jnp.uint32)
    return jnp.swapaxes(jax.vmap(one)(keys), 0, 1)


# jax.random.permutation's number of sort rounds: ceil(3 log(n) / log(2**32 - 1)) (jax/_src/random;
# tests/test_rng.py checks `trial_permutations` against it).
_SHUFFLE_EXPONENT = 3


def hash_words(keys: jax.Array, stream: int) -> jax.Array:
    """The two 32-bit words that seed a trial's counter hash for `stream`: u32[T, 2]."""
    return _hash_words(keys, jnp.uint32(stream))


@jax.jit
def _hash_words(keys, stream):
    """`hash_words` with the stream traced: one compiled program serves every stream."""
    return jax.vmap(lambda k: jax.random.bits(jax.random.fold_in(k, stream), (2,), jnp.uint32))(keys)


def _mix32(x: jax.Array) -> jax.Array:
    x = x ^ (x >> 16)
    x = x * jnp.uint32(0x7FEB352D)
    x = x ^ (x >> 15)
    x = x * jnp.uint32(0x846CA68B)
    return x ^ (x >> 16)


def counter_bits(words: jax.Array, step: jax.Array, lanes: jax.Array) -> jax.Array:
    """Hash of (trial words, step, lane) for every trial and lane: u32[T, L].

    words: u32[T, 2]; step: scalar task step; lanes: integer [L] or [T, L].
    """
    step = jnp.asarray(step).astype(jnp.uint32)
    lanes = jnp.asarray(lanes).astype(jnp.uint32)
    if lanes.ndim == 1:
        lanes = lanes[None, :]
    h = _mix32(step ^ words[:, 0])
    h = _mix32(h[:, None] ^ (lanes * jnp.uint32(0x9E3779B9)))
    return _mix32(h + words[:, 1:2])


def sample_machines(words: jax.Array, step: jax.Array, k: int, num_machines: int) -> jax.Array:
    """K machine indices drawn uniformly with replacement per trial: i32[T, K].

    The modulo bias is below num_machines / 2**32 (3e-6 at 12,583 machines).
    """
    bits = counter_bits(words, step, jnp.arange(k))
    return (bits % jnp.uint32(num_machines)).astype(jnp.int32)


def sample_table(words: jax.Array, first_step: jax.Array, n: int, k: int, num_machines: jax.Array) -> jax.Array:
    """`sample_machines` of steps first_step .. first_step + n - 1: i32[T, n, K], laid out for
    per-trial slices (the same bits: integer arithmetic, element for element)."""
    steps = (jnp.asarray(first_step) + jnp.arange(n, dtype=jnp.int32)).astype(jnp.uint32)  # [n]
    h = _mix32(steps[None, :] ^ words[:, 0:1])  # [T, n]
    lanes = jnp.arange(k, dtype=jnp.uint32) * jnp.uint32(0x9E3779B9)
    h = _mix32(h[:, :, None] ^ lanes[None, None, :])
    bits = _mix32(h + words[:, 1:2, None])
    return (bits % jnp.asarray(num_machines).astype(jnp.uint32)).astype(jnp.int32)


def uniform_noise(words: jax.Array, step: jax.Array, machines: jax.Array) -> jax.Array:
    """Uniform [0, 1) per trial and machine index, 24 random bits each: f32[T, L].

    A machine gets the same value whether it is scored in a full scan or drawn in a
    sample, so `random` means the same thing under both pickers.
    """
    bits = counter_bits(words, step, machines) >> 8
    return bits.astype(jnp.float32) * jnp.float32(2.0**-24)
