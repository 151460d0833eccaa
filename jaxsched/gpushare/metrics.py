"""The paper's curves from the runs' running totals (docs/spec/GPU_SHARING.md, section 5).

After every pod t of a run: U_t allocated milli-GPU, I_t idle (C - U_t), F_t the cluster's
fragmentation (2 decimals, as logged), R_t = 100 F_t / I_t (2 decimals), A_t arrived
milli-GPU. Each run is discretized by arrived workload k = 0..130 (% of the GPU capacity):
the events with round(A_t / C * 100) = k, or else those within k +- 1, and a cell is
missing (NaN) where there are none.
"""

from __future__ import annotations

import dataclasses

import numpy as np

from .engine import Trajectories

PERCENTS = np.arange(131)
CURVES = ("alloc", "frag", "frag_ratio")


def _round2(x: np.ndarray) -> np.ndarray:
    return np.round(x, 2)  # numpy rounds half to even, as Python's round does


@dataclasses.dataclass(frozen=True)
class Curves:
    """Each row's curves over arrived workload 0..130%, [B, 131] each (NaN where missing)."""

    policies: tuple[str, ...]
    seeds: tuple[int, ...]
    total_gpus: int
    alloc: np.ndarray  # GPU allocation ratio, % of the cluster's GPUs
    frag: np.ndarray  # fragmentation amount, % of the cluster's GPU capacity
    frag_ratio: np.ndarray  # % of the idle GPUs that are fragmented

    def at(self, curve: str, percent: int) -> np.ndarray:
        """f64[B], every row's value of `curve` at arrived workload `percent`."""
        return getattr(self, curve)[:, percent]

    def by_policy(self, curve: str) -> dict[str, np.ndarray]:
        """{policy: f64[seeds, 131]}."""
        values = getattr(self, curve)
        return {p: values[[b for b, q in enumerate(self.policies) if q == p]] for p in dict.fromkeys(self.policies)}


def curves(tr: Trajectories, total_gpus: int) -> Curves:
    """The discretized curves of every row of a simulation."""
    C = total_gpus * 1000.0
    B = len(tr.policies)
    out = {name: np.full((B, len(PERCENTS)), np.nan) for name in CURVES}
    for b in range(B):
        n = int(tr.length[b])
        a = np.round(tr.arrived[b, :n] / C * 100.0)  # half to even
        u = _round2(tr.alloc[b, :n] / C * 100.0)
        f = _round2(tr.frag[b, :n])
        idle = C - tr.alloc[b, :n]
        r = _round2(np.divide(100.0 * f, idle, out=np.zeros(n), where=idle > 0))
        amount = 100.0 * f / C
        for k in PERCENTS:
            cell = a == k
            if not cell.any():
                cell = (a >= k - 1) & (a <= k + 1)
                if not cell.any():
                    continue
            out["alloc"][b, k] = _round2(u[cell].mean())
            out["frag"][b, k] = _round2(amount[cell].mean())
            out["frag_ratio"][b, k] = r[cell].mean()
    return Curves(policies=tr.policies, seeds=tr.seeds, total_gpus=total_gpus, **out)
