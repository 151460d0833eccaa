"""The picker's argmax of docs/spec/POLICIES.md: the lowest-index machine with the top score.

`pick` is the full scan's: `first_best` (or `first_best_chunked` for scores computed in chunks),
or `first_feasible` for a policy that scores every feasible machine alike. `lowest_best` is the
sampled picker's, over K draws. argmax ties go to the smallest index in every form.
"""

from __future__ import annotations

import jax.numpy as jnp
import numpy as np

CHUNK = 128  # machines per chunk of the two-level argmax


def lowest_best(s, machines, none, axis=-1):
    """The lowest of `machines` (broadcast against s) with the top score along `axis`, `none` if all are -inf.

    Both reductions are float ones (machine indices are exact in float32 below 2**24): on CPU,
    XLA runs float max and min over a short axis several times faster than integer ones.
    """
    best = jnp.max(s, axis=axis, keepdims=True)
    tied = (s == best) & (best > -jnp.inf)
    low = jnp.min(jnp.where(tied, jnp.asarray(machines, jnp.float32), np.float32(np.inf)), axis=axis)
    return jnp.where(low < np.float32(np.inf), low, jnp.asarray(none, jnp.float32)).astype(jnp.int32)


def pick(policy, s, none, chunked=False):
    """A full scan's pick from scores s f32[..., X] (chunked: f32[..., C, CHUNK]): `first_feasible`
    where the policy scores every feasible machine alike (first_fit), else `first_best`."""
    if policy.uniform:
        return first_feasible(s.reshape(*s.shape[:-2], -1) if chunked else s, none)
    return first_best_chunked(s, none) if chunked else first_best(s, none)


def first_feasible(s, none):
    """The first position along the last axis of s f32[..., X] that is not -inf, `none` if
    there is none: i32[...]. `first_best` where every finite score is equal, in one
    reduction (first_fit: a third less time a step than `first_best`, whose two-level
    reductions XLA fuses with a constant score by computing it three times)."""
    X = s.shape[-1]
    return jnp.min(jnp.where(s > -jnp.inf, jnp.arange(X, dtype=jnp.int32), none), axis=-1).astype(jnp.int32)


def max_last(m):
    """The maximum over the last axis of m (kept as an axis of 1), as elementwise maxima of halves."""
    while m.shape[-1] > 1:
        h = m.shape[-1] // 2
        top = jnp.maximum(m[..., :h], m[..., h:2 * h])
        m = jnp.concatenate([top, m[..., 2 * h:]], axis=-1) if m.shape[-1] % 2 else top
    return m


def first_best(s, none):
    """The first position of the top score along the last axis of s f32[..., X] (ties to the
    lowest), `none` where every score is -inf: i32[...].

    Plain reductions in two levels over CHUNK-wide chunks (the chunk maxima in one pass,
    then the first chunk that holds the top score, then the first lane of that chunk that
    does): cheaper than the top score and then the lowest position holding it over all X
    (a second full pass), and than a one-pass variadic argmax on CPU.
    """
    *lead, X = s.shape
    if X % CHUNK:
        best = jnp.max(s, axis=-1, keepdims=True)
        tied = (s == best) & (best > -jnp.inf)
        return jnp.min(jnp.where(tied, jnp.arange(X, dtype=jnp.int32), none), axis=-1).astype(jnp.int32)
    s = s.reshape(*lead, X // CHUNK, CHUNK)
    chunk_max = jnp.max(s, axis=-1)
    return _first_holding(s, chunk_max, jnp.max(chunk_max, axis=-1, keepdims=True), none)


def first_best_chunked(s, none):
    """`first_best` of scores computed in chunks, s f32[..., C, CHUNK] (positions count along
    both axes). The top score is the maximum of the chunk maxima taken elementwise
    (`max_last`): as a reduction, XLA merges it with the chunk maxima' into a second pass
    over s, one more kernel a step per policy."""
    chunk_max = jnp.max(s, axis=-1)
    return _first_holding(s, chunk_max, max_last(chunk_max), none)


def _first_holding(s, chunk_max, best, none):
    """The first position of chunked scores s f32[..., C, W] holding the top score best
    f32[..., 1] (chunk maxima chunk_max f32[..., C]): the first chunk whose maximum it is,
    then the first lane of that chunk; `none` where best is -inf."""
    C, W = s.shape[-2:]
    chunk = jnp.min(jnp.where(chunk_max == best, jnp.arange(C, dtype=jnp.int32), C - 1), axis=-1)
    lanes = jnp.take_along_axis(s, chunk[..., None, None], axis=-2)[..., 0, :]
    lane = jnp.min(jnp.where(lanes == best, jnp.arange(W, dtype=jnp.int32), W), axis=-1)
    return jnp.where(best[..., 0] > -jnp.inf, chunk * W + lane, none).astype(jnp.int32)
