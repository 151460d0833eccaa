"""Snapshot metrics of docs/spec/POLICIES.md ("Snapshot metrics") on a packed cluster.

placed (count, fraction, demand-weighted), utilization per dimension, holes and
stranding per dimension, for one cluster state; `snapshot_metrics` vmaps it over the
(policy row, trial) batch. Demand weight is the sum over all resource dimensions
(d_c + d_m with R = 2).
"""

from __future__ import annotations

import functools
from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from .policies import columns, slots


class Metrics(NamedTuple):
    """Metrics of one packed cluster state (leading batch axes when vmapped)."""

    placed: jax.Array  # i32[], tasks placed
    placed_fraction: jax.Array  # f32[], placed / tasks
    placed_weighted: jax.Array  # f32[], placed demand / all demand
    utilization: jax.Array  # f32[R], allocated / capacity
    holes: jax.Array  # f32[], sum slots(f) / sum slots(c)
    stranding: jax.Array  # f32[R], free on slot-less machines / all free


def _ratio(num, den, empty=0.0):
    """num / den, `empty` where den is 0."""
    return jnp.where(den > 0, num / jnp.where(den > 0, den, 1.0), empty)


def cluster_metrics(free, capacity, placed, demand, slot) -> Metrics:
    """Metrics of one state: free, capacity f32[M, R]; placed bool[N]; demand f32[N, R]."""
    n = placed.shape[0]
    count = jnp.sum(placed, dtype=jnp.int32)
    weight = jnp.sum(demand, axis=1)
    free_pos = jnp.maximum(free, 0.0)
    free_slots = slots(columns(free_pos), slot)
    cap_slots = slots(columns(capacity), slot)
    slotless = free_slots == 0
    return Metrics(
        placed=count,
        # 0/0 (no task, or no task requesting anything) is undefined: NaN, shown as "-"
        placed_fraction=_ratio(count.astype(jnp.float32), jnp.float32(n), jnp.nan),
        placed_weighted=_ratio(jnp.sum(jnp.where(placed, weight, 0.0)), jnp.sum(weight), jnp.nan),
        utilization=_ratio(jnp.sum(capacity - free, axis=0), jnp.sum(capacity, axis=0)),
        holes=_ratio(jnp.sum(free_slots), jnp.sum(cap_slots)),
        stranding=_ratio(jnp.sum(jnp.where(slotless[:, None], free_pos, 0.0), axis=0), jnp.sum(free_pos, axis=0)),
    )


@functools.partial(jax.jit, static_argnames=("slot",))
def _batched(free, capacity, placed, demand, slot):
    one = lambda f, p: cluster_metrics(f, capacity, p, demand, slot)
    return jax.vmap(jax.vmap(one))(free, placed)


def snapshot_metrics(free, capacity, placement, demand, slot) -> Metrics:
    """Metrics for every (row, trial) of a packing.

    Computed on the host's CPU whatever the packing ran on: float32 sums keep their CPU
    order, so equal placements give equal bits on a GPU run too.

    Args:
        free: f32[P, T, M, R], the free capacity after packing.
        capacity: f32[M, R].
        placement: i32[P, T, N], each task's machine, -1 unplaced.
        demand: f32[N, R].
        slot: the standard slot per dimension.

    Returns:
        The Metrics, each field with leading axes [P, T].
    """
    cpu = jax.local_devices(backend="cpu")[0]
    args = jax.device_put((np.asarray(free, np.float32), np.asarray(capacity, np.float32),
                           np.asarray(placement) >= 0, np.asarray(demand, np.float32)), cpu)
    return _batched(*args, tuple(slot))
