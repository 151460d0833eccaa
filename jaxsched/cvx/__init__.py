"""CvxCluster (Nnorom, Boyd, Levis 2026): LP shadow prices by JAX dual descent, then a
price-driven greedy placement; exact HiGHS references; online rounds."""

from .allocate import Allocation, allocate, summarize
from .exact import LPSolution, MIPSolution, exact_summary, solve_lp, solve_mip
from .instances import replicate, synthetic_problem
from .online import OnlineResult, run_online
from .prices import PriceConfig, Prices, solve_prices
from .problem import CvxProblem, aggregate, band_weights, check_placement, from_snapshot, make_problem, objective

__all__ = ["Allocation", "CvxProblem", "LPSolution", "MIPSolution", "OnlineResult", "PriceConfig", "Prices",
           "aggregate", "allocate", "band_weights", "check_placement", "exact_summary", "from_snapshot",
           "make_problem", "objective", "replicate", "run_online", "solve_lp", "solve_mip", "solve_prices",
           "summarize", "synthetic_problem"]
