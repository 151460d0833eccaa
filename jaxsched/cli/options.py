"""The flags of the command line: value converters, the `Option` record, and the flags that
several commands share, defined once."""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass
from typing import Any, Callable


def number(kind: type = int, low: float | None = None, *, above: bool = False, high: float | None = None,
           what: str | None = None) -> Callable[[Any], Any]:
    """A converter to `kind` (int or float), finite, at least `low` (more than it, with `above`)
    and at most `high`; `what` names the expected value in its error message."""
    noun = what or ("an integer" if kind is int else "a number")

    show = (lambda x: str(int(x))) if kind is int else (lambda x: f"{x:g}")

    def bounds() -> str:
        if high is not None:
            return f"{noun} in ({show(low)}, {show(high)}]" if above else f"{noun} {show(low)}..{show(high)}"
        if low is None:
            return noun
        if kind is float:
            return f"a finite number {'>' if above else '>='} {show(low)}"
        return f"{noun} {'>' if above else '>='} {show(low)}"

    def convert(v: Any) -> Any:
        if isinstance(v, bool) or (kind is int and not isinstance(v, (int, str))):
            raise ValueError(f"expected {noun}, got {v!r}")
        x = kind(v)
        if (kind is float and not math.isfinite(x)) or (low is not None and (x <= low if above else x < low)) \
                or (high is not None and x > high):
            raise ValueError(f"expected {bounds()}, got {v!r}" if kind is float else f"expected {bounds()}, got {x}")
        return x

    return convert


positive_int = number(int, 1)
nonneg_int = number(int, 0)
positive_float = number(float, 0.0, above=True)
nonneg_float = number(float, 0.0)
priority = number(int, 0, high=11, what="a trace priority")


def float_list(v: Any) -> tuple[float, ...]:
    """Comma-separated finite numbers (or a TOML list) as a tuple of floats."""
    items = v.split(",") if isinstance(v, str) else list(v)
    out = tuple(float(x) for x in items if str(x).strip() != "")
    if not out:
        raise ValueError("expected a comma-separated list of numbers")
    if not all(math.isfinite(x) for x in out):
        raise ValueError(f"expected finite numbers, got {v if isinstance(v, str) else list(v)!r}")
    return out


def band_weightings(v: Any) -> tuple[tuple[float, float, float], ...]:
    """Utility weightings of the three priority bands: 'F,M,P' or several as 'F,M,P/F,M,P' (or a
    TOML list of lists), each three finite numbers >= 0, not all zero."""
    parts = v.split("/") if isinstance(v, str) else [v] if v and not isinstance(v[0], (list, tuple)) else list(v)
    out = []
    for part in parts:
        w = float_list(part)
        if len(w) != 3:
            raise ValueError(f"expected three numbers (free, middle, production), got {len(w)} in {part!r}")
        if any(x < 0 for x in w) or not any(x > 0 for x in w):
            raise ValueError(f"weights must be >= 0 and not all 0, got {','.join(f'{x:g}' for x in w)}")
        out.append(w)
    return tuple(out)


def instant(v: Any) -> str | float:
    """'busiest', 'all' or a time in seconds >= 0."""
    if v in ("busiest", "all"):
        return v
    try:
        return nonneg_float(v)
    except ValueError:
        raise ValueError(f"expected 'busiest', 'all' or a time in seconds >= 0, got {v!r}") from None


def choice(*allowed: str) -> Callable[[Any], str]:
    """A converter accepting one of `allowed`."""
    def convert(v: Any) -> str:
        if v not in allowed:
            raise ValueError(f"expected one of {', '.join(allowed)}, got {v!r}")
        return v
    return convert


def flag(v: Any) -> bool:
    """A switch: true or false in a config, present or absent on the command line."""
    if not isinstance(v, bool):
        raise ValueError(f"expected true or false, got {v!r}")
    return v


def policy_list(v: Any) -> str:
    """A comma-separated policy list (or a TOML list of names)."""
    return v if isinstance(v, str) else ",".join(str(x) for x in v)


def path(v: Any) -> str:
    """A non-empty path."""
    if not isinstance(v, str) or not v:
        raise ValueError(f"expected a path, got {v!r}")
    return v


@dataclass(frozen=True)
class Option:
    """One flag: its name, converter, default and help (also the key of a TOML config)."""

    name: str  # flag name without dashes, e.g. "sample-k"
    convert: Callable[[Any], Any]
    default: Any
    help: str
    metavar: str | None = None  # None with convert=flag: a switch without a value

    @property
    def dest(self) -> str:
        return self.name.replace("-", "_")

    def but(self, **changes) -> "Option":
        """This flag with another default, help or metavar (the same name and meaning)."""
        return dataclasses.replace(self, **changes)


def dest_flag(dest: str) -> str:
    """The flag of a settings key: sample_k -> --sample-k."""
    return "--" + dest.replace("_", "-")


# ---- Flags every experiment shares (their defaults and help vary by command) ----
MAX_SEED = (1 << 64) - 1  # rng.MAX_SEED (not imported: the CLI's flags load without JAX)
SEED = Option("seed", number(int, 0, high=MAX_SEED, what="a seed"), 1,
              "random seed, 0..2^64-1, each its own stream: same seed, same results on any device count", "S")
TRIALS = Option("trials", positive_int, 5, "shuffled task orders per policy (common random numbers)", "T")
POLICY = Option("policy", policy_list, "all", "comma-separated policies, or 'all' (see `jaxsched policies`)", "LIST")
POLICY_FILE = Option("policy-file", path, None, "a Python file of user policies (@jaxsched.policy): each one "
                     "it registers becomes a --policy name", "PY")
POLICY_PARAMS = Option("policy-params", path, None, "parameters of user policies, JSON or TOML: a table per "
                       "policy, e.g. [weighted_fit] w = [1.0, 0.5]", "FILE")
SAMPLE_K = Option("sample-k", nonneg_int, 0, "score K machines drawn at random per placement, full scan if none "
                  "fits (0: always full scan)", "K")
SLOT = Option("slot", float_list, (0.05, 0.05), "standard slot per dimension for holes/stranding/slot_loss "
              "(dims beyond the list get 0 = not counted)", "C,M")
GENOME = Option("genome", float_list, None, "w0,w1,w2,w3,w4,w5,p1,p2 for the 'family' policy (default: "
                "alpha_evolve's point 1,1,1,1,0,0,1,1)", "G")
JSON = Option("json", path, None, "write the full results as JSON to this file (atomically)", "FILE")
MACHINES = Option("machines", positive_int, 2000, "synthetic cluster size (machines)", "M")
RHO = Option("rho", number(float, 0.0, above=True, high=10.0, what="a load"), 0.75,
             "synthetic load, in (0, 10]: tasks are drawn until the binding dimension's total demand reaches "
             "RHO of capacity", "RHO")

TRACE_OPTIONS = (
    Option("trace-dir", path, None, "pack a real trace instead of the synthetic workload: a Google "
           "2011 directory (task_events/, machine_events/) or an Alibaba GPU v2023 one (openb_*.csv)", "DIR"),
    Option("trace-format", choice("auto", "google2011", "alibaba-gpu"), "auto",
           "format of --trace-dir (auto: detected from its files)", "FMT"),
    Option("days", positive_float, None, "trace: keep tasks arriving in the first N days of the window", "N"),
    Option("min-priority", priority, None, "trace: keep tasks of priority >= N (9: production and monitoring)", "N"),
    Option("max-task-dim", positive_float, None, "trace: drop tasks with any request > X (whales)", "X"),
    Option("max-tasks", positive_int, None, "trace: then keep the first N tasks by arrival", "N"),
    Option("at", instant, None, "trace: the snapshot instant: 'busiest' (earliest instant with the most "
           "alive tasks), 'all' (every task at once) or seconds from the trace start (default: busiest; "
           "all for Alibaba GPU pod lists)", "T"),
    Option("cache-dir", path, None, "trace: where parsed traces are cached as Parquet (default: "
           "$JAXSCHED_CACHE_DIR, else $XDG_CACHE_HOME/jaxsched/traces, else ~/.cache/jaxsched/traces)", "DIR"),
    Option("no-cache", flag, False, "trace: parse the trace files without reading or writing the cache"),
    Option("pod-list", path, "default", "Alibaba GPU trace: the pod list openb_pod_list_NAME.csv", "NAME"),
    Option("node-list", path, "all_node", "Alibaba GPU trace: the node list openb_node_list_NAME.csv", "NAME"),
)
# The trace flags without --at: commands that replay or tune over the whole window.
TRACE_WINDOW_OPTIONS = tuple(o for o in TRACE_OPTIONS if o.name != "at")
SYNTHETIC_ONLY = ("machines", "rho")
TRACE_ONLY = tuple(o.dest for o in TRACE_OPTIONS if o.name != "trace-dir")
