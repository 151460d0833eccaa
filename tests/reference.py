"""Plain numpy float64 reference of the policies, picker, packing and metrics of POLICIES.md.

Written straight from the spec, one machine array at a time, with no code shared with
the JAX implementation, so the tests compare two independent readings of the contract.
"""

from __future__ import annotations

import json
import pathlib

import numpy as np

TOL = 1e-6
EPS = 1e-3
LO, HI = 1e-4, 1e4


def feasible(d, f, c):
    """bool[M]: d <= f + 1e-6 in every dim, and no demand on a zero-capacity dim."""
    return np.all((d[None, :] <= f + TOL) & ((c > 0) | (d[None, :] <= 0)), axis=1)


def slots(v, slot):
    """floor(min over dims with s > 0 of (v + 1e-6) / s), at least 0; v [M, R]."""
    cols = [(v[:, x] + TOL) / s for x, s in enumerate(slot) if s > 0]
    return np.maximum(np.floor(np.min(np.stack(cols, 1), axis=1)), 0.0)


def _clamped_ratio(num, den):
    with np.errstate(divide="ignore", invalid="ignore"):
        raw = np.where(den > 0, num / np.where(den > 0, den, 1.0), np.where(num > 0, HI, LO))
    return np.clip(raw, LO, HI)


def result_record(name: str) -> dict:
    """A run's JSON record under the repository's results/."""
    return json.loads((pathlib.Path(__file__).resolve().parents[1] / "results" / name).read_text())


def evo_search_record() -> dict:
    """The recorded evolution run whose champion genome is `evo_search` (CMA-ES; docs/tuning.md)."""
    return result_record("evolve_google2011_cma_es.json")


def scores(name, d, f, c, genome=None, noise=None, slot=(0.05, 0.05)):
    """f64[M] scores of task d on machines with free f and capacity c ([M, R]); -inf infeasible."""
    d = np.asarray(d, np.float64)
    f = np.asarray(f, np.float64)
    c = np.asarray(c, np.float64)
    M, R = f.shape
    slot = tuple(slot) + (0.0,) * (R - len(slot))
    with np.errstate(divide="ignore", invalid="ignore"):
        inv = np.where(c > 0, 1.0 / np.where(c > 0, c, 1.0), 0.0)
        r = np.maximum(f - d, 0.0)
        rho = r * inv
        u = 1.0 - rho
        u0 = 1.0 - np.maximum(f, 0.0) * inv
        fit = u.sum(1)
        a = _clamped_ratio(d[0], f[:, 0])
        b = _clamped_ratio(d[1], f[:, 1])
        x, y = d[None, :] * inv, f * inv
        nx, ny = np.linalg.norm(x, axis=1), np.linalg.norm(y, axis=1)
        cos = np.where(nx * ny > 0, (x * y).sum(1) / np.where(nx * ny > 0, nx * ny, 1.0), 0.0)
        if name == "first_fit":
            s = np.zeros(M)
        elif name == "random":
            s = np.asarray(noise, np.float64)
        elif name == "best_fit":
            s = fit
        elif name == "norm2":
            s = -(rho**2).sum(1)
        elif name == "cheby":
            s = -rho.max(1)
        elif name == "dot":
            s = (d[None, :] * f * inv**2).sum(1)
        elif name == "cosine":
            s = cos
        elif name == "tetris":
            s = (d[None, :] * f).sum(1)
        elif name == "align_fill":
            s = cos + 0.5 * fit
        elif name == "worst_fit":
            s = -fit
        elif name == "epvm":
            s = -(10.0**u - 10.0**u0).sum(1)
        elif name == "convex_spread":
            s = -(1.0 / (1.05 - u)).sum(1)
        elif name == "balance":
            s = -np.abs(rho[:, 0] - rho[:, 1])
        elif name == "min_strand":
            s = -(rho[:, 0] * (r[:, 1] < slot[1]) + rho[:, 1] * (r[:, 0] < slot[0])) + EPS * fit
        elif name == "imbalance_wt":
            s = -np.abs(rho[:, 0] - rho[:, 1]) * (rho[:, 0] + rho[:, 1])
        elif name == "slot_loss":
            s = -(slots(np.maximum(f, 0.0), slot) - slots(r, slot)) + EPS * fit
        elif name == "alpha_evolve":
            s = -(a + b + b / a + a / b)
        elif name == "ae_tight":
            s = (a + b) - (b / a + a / b)
        elif name == "ae_shape":
            s = -(b / a + a / b)
        elif name == "ae_pow":
            s = -(a + b + (b / a) ** 2 + (a / b) ** 2)
        elif name in ("family", "evo_search"):
            if name == "evo_search":
                genome = evo_search_record()["champion"]["genome"]
            w0, w1, w2, w3, w4, w5, p1, p2 = np.asarray(genome, np.float64)
            s = -(w0 * a**p1 + w1 * b**p1 + w2 * (b / a) ** p2 + w3 * (a / b) ** p2
                  + w4 * fit + w5 * np.abs(rho[:, 0] - rho[:, 1]))
        else:
            raise KeyError(name)
    return np.where(feasible(d, f, c), s, -np.inf)


def pick_full(s):
    """Lowest-index argmax, or -1 when nothing is feasible."""
    return int(np.argmax(s)) if np.any(s > -np.inf) else -1


def pick_sampled(s_all, idx):
    """Best of the drawn machines idx (ties to the lowest machine index), else full scan."""
    s = s_all[idx]
    if np.any(s > -np.inf):
        best = s.max()
        return int(np.min(idx[s == best]))
    return pick_full(s_all)


def pack(cap, demand, order, name, genome=None, sample_idx=None, noise=None, slot=(0.05, 0.05),
         fragility=0.0):
    """Greedy packing of demand[order] onto cap: (machine per task or -1, free, fragile).

    sample_idx[i]: machines drawn at step i (None: full scan); noise[i]: the `random`
    policy's per-machine draws at step i. With fragility > 0, `fragile` reports whether
    some choice changes when free capacities and demands move by that much (a near tie;
    zero capacities and zero demands do not move).
    """
    cap = np.asarray(cap, np.float64)
    free = cap.copy()
    out = np.full(len(demand), -1, np.int64)
    fragile = False
    for step, task in enumerate(order):
        d = np.asarray(demand[task], np.float64)
        nz = None if noise is None else noise[step]

        def choose(fr, dd):
            s = scores(name, dd, fr, cap, genome, nz, slot)
            return pick_full(s) if sample_idx is None else pick_sampled(s, np.asarray(sample_idx[step]))

        j = choose(free, d)
        if fragility > 0 and not fragile:  # structural zeros (no capacity, no demand) stay exact
            for df in (fragility, -fragility):
                for dd in (fragility, -fragility):
                    if choose(np.where(cap > 0, free + df, free), np.where(d > 0, np.maximum(d + dd, 0.0), d)) != j:
                        fragile = True
        if j >= 0:
            free[j] -= d
            out[task] = j
    return out, free, fragile


def metrics(free, cap, placed, demand, slot=(0.05, 0.05)):
    """Snapshot metrics of POLICIES.md for one packed state, float64."""
    free = np.asarray(free, np.float64)
    cap = np.asarray(cap, np.float64)
    demand = np.asarray(demand, np.float64)
    R = cap.shape[1]
    slot = tuple(slot) + (0.0,) * (R - len(slot))
    fpos = np.maximum(free, 0.0)
    fs, cs = slots(fpos, slot), slots(cap, slot)
    w = demand.sum(1)
    util = (cap - free).sum(0) / cap.sum(0)
    none = fs == 0
    strand = np.where(fpos.sum(0) > 0, fpos[none].sum(0) / np.where(fpos.sum(0) > 0, fpos.sum(0), 1), 0.0)
    return {
        "placed": int(placed.sum()),
        "placed_fraction": placed.sum() / len(placed),
        "placed_weighted": w[placed].sum() / w.sum(),
        "utilization": util,
        "holes": fs.sum() / cs.sum() if cs.sum() > 0 else 0.0,
        "stranding": strand,
    }
