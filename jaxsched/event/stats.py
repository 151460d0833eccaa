"""The figures of an event replay, computed on the host in float64 from its run segments.

Definitions (docs/event.md):
- replay span: from the first arrival to the last completion; steady-state window: from
  the first arrival + 10% of (last arrival - first arrival) to the last arrival (the
  whole span when every task arrives at once).
- utilization_x: time-weighted mean over the window of sum of d_x over running tasks /
  sum of c_x over machines.
- latency: first placement time - arrival, over placed tasks: p50, p90, p99 (numpy's
  linear interpolation), max; `never_placed` counts tasks still pending at the end.
  With preemption the same figures per band (free 0-1, middle 2-8, production >= 9).
- pending: the number of arrived tasks neither running nor finished, time-weighted mean
  over the window, and max over the whole replay.
- the utilization series: for every `dt` bucket [k dt, (k + 1) dt) of the span, the
  time-weighted means of utilization, running and pending tasks; at most SERIES_CAP rows.
"""

from __future__ import annotations

import numpy as np

from ..errors import InputError
from .inputs import PRODUCTION, band_of

SERIES_CAP = 1_000_000  # rows per policy in a utilization CSV: a disk-filler backstop
BAND_NAMES = ("free", "middle", "production")
PERCENTILES = (50, 90, 99)


class StepFunction:
    """A right-continuous step function from +/- jumps at given times, integrable exactly."""

    def __init__(self, times: np.ndarray, jumps: np.ndarray):
        if len(times) == 0:  # no jump: zero everywhere
            times, jumps = np.zeros(1), np.zeros((1,) + np.shape(jumps)[1:])
        order = np.argsort(times, kind="stable")
        t, v = np.asarray(times, np.float64)[order], np.cumsum(np.asarray(jumps, np.float64)[order], axis=0)
        keep = np.append(t[1:] != t[:-1], True)  # the value after the last jump at each time
        self.t, self.v = t[keep], v[keep]
        width = np.diff(self.t)
        self.area = np.concatenate([np.zeros((1,) + self.v.shape[1:]), np.cumsum(self.v[:-1] * (
            width[:, None] if self.v.ndim > 1 else width), axis=0)])

    def value(self, x: np.ndarray) -> np.ndarray:
        k = np.searchsorted(self.t, x, side="right") - 1
        return np.where((k >= 0)[..., None] if self.v.ndim > 1 else k >= 0, self.v[np.maximum(k, 0)], 0.0)

    def integral(self, x: np.ndarray) -> np.ndarray:
        """Integral from -inf to each x."""
        x = np.asarray(x, np.float64)
        k = np.searchsorted(self.t, x, side="right") - 1
        kk = np.maximum(k, 0)
        dx = x - self.t[kk]
        part = self.area[kk] + self.v[kk] * (dx[..., None] if self.v.ndim > 1 else dx)
        return np.where((k >= 0)[..., None] if self.v.ndim > 1 else k >= 0, part, 0.0)

    def mean(self, lo: float, hi: float) -> np.ndarray:
        if hi <= lo:
            return self.value(np.asarray(lo))
        return (self.integral(np.asarray(hi)) - self.integral(np.asarray(lo))) / (hi - lo)

    def max(self) -> float:
        return float(self.v.max()) if self.v.size else 0.0


def _window(arrival_s: np.ndarray, span_end: float) -> tuple[float, float]:
    if arrival_s.size == 0:
        return 0.0, 0.0
    first, last = float(arrival_s.min()), float(arrival_s.max())
    if last > first:
        return first + 0.1 * (last - first), last
    return first, max(span_end, first)


def _span_end(segments: np.ndarray, arrival_s: np.ndarray, tick_s: float) -> float:
    """The replay's last completion (its last arrival where nothing ran; 0 without tasks)."""
    if len(segments):
        return float(segments[:, 3].max() * tick_s)
    return float(arrival_s.max()) if arrival_s.size else 0.0


def _latency(lat: np.ndarray, never: int) -> dict:
    out = {"placed": int(lat.size), "never_placed": int(never)}
    if lat.size:
        for p, v in zip(PERCENTILES, np.percentile(lat, PERCENTILES)):
            out[f"p{p}_s"] = float(v)
        out["max_s"] = float(lat.max())
        out["mean_s"] = float(lat.mean())
    return out


def row_curves(segments: np.ndarray, arrival_s: np.ndarray, demand: np.ndarray, tick_s: float):
    """(used resources, running tasks, pending tasks) step functions of one row's segments."""
    task, start, end = segments[:, 0], segments[:, 2] * tick_s, segments[:, 3] * tick_s
    arrival_s = np.rint(np.asarray(arrival_s, np.float64) / tick_s) * tick_s  # the engine's arrival ticks
    d = np.asarray(demand, np.float64)[task]
    used = StepFunction(np.concatenate([start, end]), np.concatenate([d, -d]))
    ones = np.ones(len(task))
    running = StepFunction(np.concatenate([start, end]), np.concatenate([ones, -ones]))
    # Pending: +1 at arrival, -1 at each start, +1 at each end that is an eviction (not a task's last run).
    last = np.zeros(len(task), bool)
    order = np.lexsort((segments[:, 2], task))
    last[order[np.append(task[order][1:] != task[order][:-1], True)[:len(order)]]] = True
    evicted = end[~last]
    pending = StepFunction(np.concatenate([arrival_s, start, evicted]),
                           np.concatenate([np.ones(len(arrival_s)), -ones, np.ones(len(evicted))]))
    return used, running, pending


def row_stats(segments: np.ndarray, first_start: np.ndarray, arrival_s: np.ndarray, priority: np.ndarray,
              demand: np.ndarray, capacity: np.ndarray, tick_s: float, by_band: bool) -> dict:
    """The figures of one (policy, trial) row: utilization, latency, pending, evictions."""
    total = np.asarray(capacity, np.float64).sum(axis=0)
    used, running, pending = row_curves(segments, arrival_s, demand, tick_s)
    span_end = _span_end(segments, arrival_s, tick_s)
    lo, hi = _window(arrival_s, span_end)
    util = used.mean(lo, hi) / np.where(total > 0, total, 1.0)
    # Latency from the arrival tick, so a task placed on arrival waits exactly 0.
    arrival_tick = np.rint(arrival_s / tick_s)
    placed = first_start >= 0
    lat = (first_start[placed] - arrival_tick[placed]) * tick_s
    out = {
        "window_s": [lo, hi],
        "span_s": [float(arrival_s.min()) if arrival_s.size else 0.0, span_end],
        "utilization": util.tolist(),
        "latency": _latency(lat, int(np.sum(~placed))),
        # Latency quantiles at 0, 1, ..., 100 %: the CDF of the report's plot.
        "latency_cdf_s": np.percentile(lat, np.arange(101)).tolist() if lat.size else [],
        "pending_mean": float(pending.mean(lo, hi)),
        "pending_max": pending.max(),
        "segments": int(len(segments)),
    }
    if by_band:
        bands = band_of(priority)
        out["latency_by_band"] = {
            name: _latency(lat[bands[placed] == k], int(np.sum(~placed & (bands == k))))
            for k, name in enumerate(BAND_NAMES)}
    return out


def utilization_series(segments: np.ndarray, arrival_s: np.ndarray, demand: np.ndarray, capacity: np.ndarray,
                       tick_s: float, dt: float) -> np.ndarray:
    """f64[K, 3 + R]: bucket start, mean running, mean pending, then mean utilization per dimension."""
    if not dt > 0:
        raise InputError(f"--util-dt must be > 0, got {dt}")
    used, running, pending = row_curves(segments, arrival_s, demand, tick_s)
    span_end = _span_end(segments, arrival_s, tick_s)
    rows = int(np.ceil(span_end / dt)) or 1
    if rows > SERIES_CAP:
        raise InputError(f"--util-dt {dt:g} gives {rows:,} rows per policy for a {span_end:,.0f} s replay, over "
                         f"the cap of {SERIES_CAP:,}; use --util-dt {np.ceil(span_end / SERIES_CAP):g} or more")
    edges = np.arange(rows + 1) * dt
    total = np.asarray(capacity, np.float64).sum(axis=0)
    mean = lambda f: np.diff(f.integral(edges), axis=0) / dt
    util = mean(used) / np.where(total > 0, total, 1.0)
    return np.column_stack([edges[:-1], mean(running), mean(pending), util])


def evictions_split(priority: np.ndarray) -> dict:
    """How many tasks are in each band (the denominators of per-band figures)."""
    p = np.asarray(priority)
    return {"free": int(np.sum(p < 2)), "middle": int(np.sum((p >= 2) & (p < PRODUCTION))),
            "production": int(np.sum(p >= PRODUCTION))}
