"""CvxCluster (Nnorom, Boyd, Levis 2026): LP shadow prices by JAX dual descent, then a
price-driven greedy placement; exact HiGHS references; online rounds.

Each name loads its module on first use (`jaxsched.lazy`), so that the
HiGHS child processes of `exact` start without JAX.
"""

from __future__ import annotations

from ..lazy import lazy_names

# name -> the submodule that defines it
_EXPORTS = {
    "Allocation": "allocation", "allocate": "allocation", "summarize": "allocation",
    "LPSolution": "exact", "MIPSolution": "exact", "exact_summary": "exact", "solve_lp": "exact",
    "solve_mip": "exact",
    "replicate": "instances", "synthetic_problem": "instances",
    "OnlineResult": "online", "run_online": "online",
    "PriceConfig": "prices", "Prices": "prices", "solve_prices": "prices",
    "CvxProblem": "problem", "aggregate": "problem", "band_weights": "problem", "check_placement": "problem",
    "from_snapshot": "problem", "make_problem": "problem", "objective": "problem",
}

__all__ = sorted(_EXPORTS)


__getattr__, __dir__ = lazy_names(__name__, _EXPORTS)
