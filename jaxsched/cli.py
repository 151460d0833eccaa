"""The `jaxsched` command line: parse flags and TOML configs, call the library, write results.

Precedence: built-in defaults < `--config FILE` < flags given on the command line.
Bad flags or configs print one `jaxsched: error: ...` line and exit 2.
"""

from __future__ import annotations

import argparse
import dataclasses
import os
import sys
import time
from dataclasses import dataclass
from typing import Any, Callable

import numpy as np

from .errors import InputError

try:
    import tomllib
except ModuleNotFoundError:  # Python 3.10
    import tomli as tomllib

EXIT_USAGE = 2


class UsageError(Exception):
    """A bad flag, config key or value: reported as one line, exit 2."""


def _positive_int(v: Any) -> int:
    if isinstance(v, bool) or not isinstance(v, (int, str)):
        raise ValueError(f"expected an integer, got {v!r}")
    n = int(v)
    if n < 1:
        raise ValueError(f"expected an integer >= 1, got {n}")
    return n


def _nonneg_int(v: Any) -> int:
    if isinstance(v, bool) or not isinstance(v, (int, str)):
        raise ValueError(f"expected an integer, got {v!r}")
    n = int(v)
    if n < 0:
        raise ValueError(f"expected an integer >= 0, got {n}")
    return n


def _positive_float(v: Any) -> float:
    if isinstance(v, bool):
        raise ValueError(f"expected a number, got {v!r}")
    x = float(v)
    if not x > 0 or x != x or x == float("inf"):
        raise ValueError(f"expected a finite number > 0, got {v!r}")
    return x


def _float_list(v: Any) -> tuple[float, ...]:
    items = v.split(",") if isinstance(v, str) else list(v)
    out = tuple(float(x) for x in items if str(x).strip() != "")
    if not out:
        raise ValueError("expected a comma-separated list of numbers")
    return out


def _nonneg_float(v: Any) -> float:
    if isinstance(v, bool):
        raise ValueError(f"expected a number, got {v!r}")
    x = float(v)
    if not x >= 0 or x == float("inf"):
        raise ValueError(f"expected a finite number >= 0, got {v!r}")
    return x


def _priority(v: Any) -> int:
    n = _nonneg_int(v)
    if n > 11:
        raise ValueError(f"expected a trace priority 0..11, got {n}")
    return n


def _instant(v: Any) -> str | float:
    if v in ("busiest", "all"):
        return v
    try:
        return _nonneg_float(v)
    except ValueError:
        raise ValueError(f"expected 'busiest', 'all' or a time in seconds >= 0, got {v!r}") from None


def _choice(*allowed: str) -> Callable[[Any], str]:
    def convert(v: Any) -> str:
        if v not in allowed:
            raise ValueError(f"expected one of {', '.join(allowed)}, got {v!r}")
        return v
    return convert


def _flag(v: Any) -> bool:
    if not isinstance(v, bool):
        raise ValueError(f"expected true or false, got {v!r}")
    return v


def _policy_list(v: Any) -> str:
    return v if isinstance(v, str) else ",".join(str(x) for x in v)


def _path(v: Any) -> str:
    if not isinstance(v, str) or not v:
        raise ValueError(f"expected a path, got {v!r}")
    return v


@dataclass(frozen=True)
class Option:
    name: str  # flag name without dashes, e.g. "sample-k"
    convert: Callable[[Any], Any]
    default: Any
    help: str
    metavar: str | None = None  # None with convert=_flag: a switch without a value

    @property
    def dest(self) -> str:
        return self.name.replace("-", "_")


TRACE_OPTIONS = (
    Option("trace-dir", _path, None, "pack a real trace instead of the synthetic workload: a Google "
           "2011 directory (task_events/, machine_events/) or an Alibaba GPU v2023 one (openb_*.csv)", "DIR"),
    Option("trace-format", _choice("auto", "google2011", "alibaba-gpu"), "auto",
           "format of --trace-dir (auto: detected from its files)", "FMT"),
    Option("days", _positive_float, None, "trace: keep tasks arriving in the first N days of the window", "N"),
    Option("min-priority", _priority, None, "trace: keep tasks of priority >= N (9: production and "
           "monitoring)", "N"),
    Option("max-task-dim", _positive_float, None, "trace: drop tasks with any request > X (whales)", "X"),
    Option("max-tasks", _positive_int, None, "trace: then keep the first N tasks by arrival", "N"),
    Option("at", _instant, None, "trace: the snapshot instant: 'busiest' (earliest instant with the most "
           "alive tasks), 'all' (every task at once) or seconds from the trace start (default: busiest; "
           "all for Alibaba GPU pod lists)", "T"),
    Option("cache-dir", _path, None, "trace: where parsed traces are cached as Parquet (default: "
           "$JAXSCHED_CACHE_DIR, else DIR/.jaxsched-cache if writable, else ~/.cache/jaxsched)", "DIR"),
    Option("no-cache", _flag, False, "trace: parse the trace files without reading or writing the cache"),
    Option("pod-list", _path, "default", "Alibaba GPU trace: the pod list openb_pod_list_NAME.csv", "NAME"),
    Option("node-list", _path, "all_node", "Alibaba GPU trace: the node list openb_node_list_NAME.csv", "NAME"),
)

SYNTHETIC_OPTIONS = (
    Option("machines", _positive_int, 2000, "synthetic cluster size (machines)", "M"),
    Option("rho", _positive_float, 0.75, "synthetic load: tasks are drawn until the binding "
           "dimension's total demand reaches RHO of capacity", "RHO"),
)

SNAPSHOT_OPTIONS = SYNTHETIC_OPTIONS + (
    Option("trials", _positive_int, 5, "shuffled task orders per policy (common random numbers)", "T"),
    Option("policy", _policy_list, "all", "comma-separated policies, or 'all' (see `jaxsched policies`); "
           "'cvxcluster' adds the CvxCluster allocator (not part of 'all')", "LIST"),
    Option("sample-k", _nonneg_int, 0, "score K machines drawn at random per placement, full scan "
           "if none fits (0: always full scan)", "K"),
    Option("seed", _nonneg_int, 1, "random seed: same seed, same results on any device count", "S"),
    Option("slot", _float_list, (0.05, 0.05), "standard slot per dimension for holes/stranding/"
           "slot_loss (dims beyond the list get 0 = not counted)", "C,M"),
    Option("genome", _float_list, None, "w0,w1,w2,w3,w4,w5,p1,p2 for the 'family' policy "
           "(default: alpha_evolve's point 1,1,1,1,0,0,1,1)", "G"),
    Option("json", _path, None, "write the full results as JSON to this file (atomically)", "FILE"),
    Option("no-compaction", _flag, False, "skip compaction (the smallest share of machines, in random "
           "order, that still packs everything; binary search, median over trials)"),
    Option("no-inflation", _flag, False, "skip inflation (the largest multiplier of the workload that "
           "still packs 100%, resolution 0.005)"),
    Option("inflate-mode", _choice("scale", "clone"), "scale", "inflation by scaling every demand "
           "(scale) or by adding copies of tasks drawn with replacement (clone)", "MODE"),
    Option("search-depth", _positive_int, 1, "binary-search levels per batched round of compaction and "
           "inflation: 2^D - 1 candidates per search and round (same answers for any D; 1 is fastest on "
           "a CPU, larger D cuts the rounds where devices are idle, as on a GPU)", "D"),
) + TRACE_OPTIONS
SYNTHETIC_ONLY = ("machines", "rho")
TRACE_ONLY = ("trace_format", "days", "min_priority", "max_task_dim", "max_tasks", "at", "cache_dir", "no_cache",
              "pod_list", "node_list")


EVOLVE_OPTIONS = (
    SYNTHETIC_OPTIONS[0],
    Option("rho", _positive_float, 1.0, "synthetic load (default 1.0: at lower loads most policies place "
           "everything and fitness cannot tell genomes apart)", "RHO"),
    Option("seed", _nonneg_int, 1, "random seed of the search, the trials and (synthetic) the workload", "S"),
    Option("generations", _positive_int, 20, "generations after the initial population", "G"),
    Option("population", _positive_int, 64, "genomes packed per generation (lambda), all in one batched "
           "packing", "N"),
    Option("parents", _positive_int, 16, "genomes kept from each generation (mu of mu + lambda)", "MU"),
    Option("sigma", _positive_float, 0.3, "mutation scale: Gaussian steps on weights scaled to max |w| = 1, "
           "log-normal steps on the powers", "S"),
    Option("trials", _positive_int, 2, "shuffled task orders each genome is scored over (common random "
           "numbers)", "T"),
    Option("sample-k", _nonneg_int, 64, "picker of the fitness packing: K sampled machines, full scan if none "
           "fits (0: always full scan, slow on a trace-sized cluster)", "K"),
    Option("slot", _float_list, (0.05, 0.05), "standard slot per dimension", "C,M"),
    Option("json", _path, None, "write the search (settings, history, champion, alpha_evolve) as JSON", "FILE"),
) + tuple(o for o in TRACE_OPTIONS if o.name != "at")

GRAD_OPTIONS = (
    Option("start", _float_list, (1.0, 1.0, 1.0, 1.0, 0.0, 0.0, 1.0, 1.0), "grad: the genome to start from "
           "(w0..w5, p1, p2; default alpha_evolve)", "G"),
    Option("steps", _nonneg_int, 20, "grad: optimizer steps", "N"),
    Option("learning-rate", _positive_float, 0.05, "grad: Adam learning rate", "LR"),
    Option("temperature", _positive_float, 0.1, "grad: softmax temperature of the relaxation, in units of the "
           "spread of the feasible machines' scores", "TAU"),
    Option("sharpness", _positive_float, 0.01, "grad: width of the relaxation's soft feasibility sigmoid, in "
           "normalized resource units", "K"),
)
EVOLVE_ONLY = ("generations", "population", "parents", "sigma")
TUNE_OPTIONS = (Option("method", _choice("grad", "evolve"), "grad", "grad: gradient ascent on the "
                       "differentiable relaxation (optax Adam); evolve: the same search as `jaxsched evolve`",
                       "M"),) + GRAD_OPTIONS + EVOLVE_OPTIONS

EVENT_OPTIONS = (
    SYNTHETIC_OPTIONS[0],
    Option("rho", _positive_float, 0.75, "synthetic offered load: tasks are drawn until total demand x mean "
           "duration / the one-day arrival horizon reaches RHO of capacity in the binding dimension", "RHO"),
    Option("trials", _positive_int, 1, "replays per policy, each with its own random draws (common random "
           "numbers across policies)", "T"),
    Option("policy", _policy_list, "best_fit,alpha_evolve", "comma-separated policies, or 'all'", "LIST"),
    Option("sample-k", _nonneg_int, 64, "score K machines drawn at random per try; an arrival whose draws all "
           "miss gets a full scan, a retry from the queue does not (0: always full scan)", "K"),
    Option("preempt", _flag, False, "Borg-style priorities: the queue drains production (priority >= 9) first, "
           "and an arriving production task that fits nowhere may evict tasks of priority < 9"),
    Option("max-evictions", _positive_int, None, "with --preempt: room for this many evictions per replay "
           "(default: the task count); more is an error, never a silent cap", "N"),
    Option("seed", _nonneg_int, 1, "random seed: same seed, same results on any device count", "S"),
    Option("slot", _float_list, (0.05, 0.05), "standard slot per dimension (slot_loss, min_strand)", "C,M"),
    Option("genome", _float_list, None, "w0,w1,w2,w3,w4,w5,p1,p2 for the 'family' policy", "G"),
    Option("json", _path, None, "write the figures per policy and trial as JSON (atomically)", "FILE"),
    Option("util-csv", _path, None, "write a utilization time series per policy (and trial) to "
           "PREFIX_<policy>[_t<trial>].csv", "PREFIX"),
    Option("util-dt", _positive_float, 300.0, "bucket width of the --util-csv series in seconds (at most "
           "1,000,000 rows per file)", "S"),
) + tuple(o for o in TRACE_OPTIONS if o.name != "at")
EVENT_ONLY = ("preempt", "max_evictions", "util_csv", "util_dt")


CVX_OPTIONS = (
    Option("machines", _positive_int, 785, "synthetic cluster size (servers)", "M"),
    Option("rho", _positive_float, 1.2, "synthetic load (snapshot: total demand / capacity in the binding "
           "dimension; --online: offered load of the one-day arrival stream)", "RHO"),
    Option("seed", _nonneg_int, 1, "random seed of the workload and of the server draws", "S"),
    Option("trials", _positive_int, 1, "allocations with different random server draws", "T"),
    Option("no-gpus", _flag, False, "synthetic: no GPU dimension (default: 10% GPU servers, 5% GPU tasks)"),
    Option("no-types", _flag, False, "synthetic: no machine types (default: 2 types, 10% of tasks pinned to one)"),
    Option("no-anti-affinity", _flag, False, "synthetic: no anti-affinity (default: 10% of tasks in jobs of "
           "2-16 that need distinct servers)"),
    Option("replicate", _positive_int, 1, "proportional growth: N disjoint copies of the servers and tasks "
           "(785 x 128 = 100,480 servers)", "N"),
    Option("gap-tol", _positive_float, 2e-3, "stage 1 stops when (dual - primal) / tasks <= this, in utility "
           "units (a free-band task is worth 1)", "X"),
    Option("max-iters", _positive_int, 1000, "stage 1: at most this many dual steps (not converging is reported)",
           "N"),
    Option("exact", _flag, False, "also solve the LP exactly and the integer problem with HiGHS (the MIP stops "
           "at --mip-time-limit and reports its bound)"),
    Option("mip-time-limit", _positive_float, 60.0, "seconds for the HiGHS MIP", "S"),
    Option("online", _flag, False, "rounds over the arriving task queue instead of one snapshot"),
    Option("rate-multiplier", _float_list, (1.0,), "--online: arrival-rate multipliers, one run each", "X,.."),
    Option("round-s", _positive_float, 1.0, "--online: simulated seconds between rounds", "S"),
    Option("max-rounds", _positive_int, None, "--online: stop each run after this many rounds (reported)", "N"),
    Option("json", _path, None, "write the results as JSON (atomically)", "FILE"),
) + TRACE_OPTIONS
CVX_SYNTHETIC_ONLY = ("machines", "rho", "no_gpus", "no_types", "no_anti_affinity")
CVX_ONLINE_ONLY = ("rate_multiplier", "round_s", "max_rounds")


class _Parser(argparse.ArgumentParser):
    def error(self, message):  # one line, exit 2, no usage dump
        self.exit(EXIT_USAGE, f"jaxsched: error: {message} (see `{self.prog} --help`)\n")


def _add_options(parser: argparse.ArgumentParser, options) -> None:
    parser.add_argument("--config", metavar="FILE", help="TOML file of defaults for these flags "
                        "(keys as the flag names, top level or under a table named after the command); "
                        "flags given here override it")
    for opt in options:
        if opt.convert is _flag:
            parser.add_argument(f"--{opt.name}", dest=opt.dest, action="store_const", const=True, default=None,
                                help=opt.help.replace("%", "%%"))
            continue
        default = opt.default if not isinstance(opt.default, tuple) else ",".join(map(str, opt.default))
        parser.add_argument(f"--{opt.name}", dest=opt.dest, default=None, metavar=opt.metavar,
                            help=f"{opt.help} (default: {default})".replace("%", "%%"))
    parser.add_argument("--quiet", action="store_true", help="no table on stdout, no progress bar")


def build_parser() -> argparse.ArgumentParser:
    """The argument parser of every subcommand."""
    parser = _Parser(prog="jaxsched", description="Batched JAX evaluation of cluster-scheduling "
                     "placement policies (POLICIES.md).")
    parser.add_argument("--cpu-devices", metavar="N|auto", default="auto",
                        help="on a CPU, split the trials over N devices, one thread each (give it before the "
                        "command; default auto: one per core, or what XLA_FLAGS' "
                        "--xla_force_host_platform_device_count says; results are identical for any N)")
    multi = parser.add_argument_group("several hosts (jax.distributed; give these before the command)")
    multi.add_argument("--coordinator", metavar="HOST:PORT", help="address of process 0; with --num-processes "
                       "and --process-id, every process runs the same command and the batch is split over the "
                       "devices of all of them (only process 0 prints and writes files)")
    multi.add_argument("--num-processes", type=int, metavar="N", help="processes taking part")
    multi.add_argument("--process-id", type=int, metavar="I", help="this process's number, 0..N-1")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", parser_class=_Parser)
    snap = sub.add_parser("snapshot", help="pack a snapshot with every policy over shuffled trials",
                          description="Pack a synthetic snapshot with each policy over shuffled trials "
                          "and report placed, utilization, holes and stranding per policy.")
    _add_options(snap, SNAPSHOT_OPTIONS)
    evo = sub.add_parser("evolve", help="evolve genomes of the parameterized scoring family",
                         description="(mu + lambda) evolutionary search over the family's genome "
                         "(w0..w5, p1, p2): fitness is the demand-weighted placed fraction on the peak "
                         "snapshot; a held-out snapshot is reported every generation.")
    _add_options(evo, EVOLVE_OPTIONS)
    tune = sub.add_parser("tune", help="tune a family genome: by gradient on a relaxation, or by evolution",
                          description="Tune a genome of the parameterized family. --method grad: Adam on "
                          "a differentiable relaxation of the packing, reporting every step's hard "
                          "(argmax) objective, which is what counts; --method evolve: `jaxsched evolve`.")
    _add_options(tune, TUNE_OPTIONS)
    ev = sub.add_parser("event", help="replay the arrival stream through a discrete-event scheduler",
                        description="Replay arrivals through each policy with a pending queue (and Borg-style "
                        "preemption with --preempt), every policy and trial batched in one JAX loop; report "
                        "utilization over the steady-state window, placement latency percentiles and queue "
                        "statistics per policy.")
    _add_options(ev, EVENT_OPTIONS)
    cvx = sub.add_parser("cvx", help="CvxCluster: LP prices by JAX dual descent, then price-driven greedy "
                         "placement", description="Allocate a snapshot (or, with --online, an arriving queue in "
                         "rounds) with CvxCluster (Nnorom, Boyd, Levis 2026): shadow prices of the LP relaxation "
                         "over server shapes from a JAX first-order dual method, then a greedy placement by net "
                         "utility with machine types, GPUs and anti-affinity; --exact checks it against HiGHS.")
    _add_options(cvx, CVX_OPTIONS)
    rep = sub.add_parser("report", help="a self-contained HTML page comparing the policies of result files",
                         description="Render JSON results (snapshot, event, evolve, tune, cvx, results/bench.json) "
                         "and event utilization CSVs as one HTML page: sortable tables, SVG plots, definitions; "
                         "no network needed to view it.")
    rep.add_argument("files", nargs="+", metavar="FILE", help="result files (*.json, PREFIX_<policy>.csv)")
    rep.add_argument("-o", "--output", default="report.html", metavar="FILE", help="the page (default: report.html)")
    sub.add_parser("policies", help="list the registered policies")
    return parser


def load_config(path: str, command: str, options) -> dict[str, Any]:
    """Read a TOML config for `command`, checking every key and value against `options`."""
    try:
        with open(path, "rb") as f:
            data = tomllib.load(f)
    except FileNotFoundError:
        raise UsageError(f"config {path}: no such file") from None
    except (OSError, tomllib.TOMLDecodeError) as e:
        raise UsageError(f"config {path}: {e}") from None
    table = data.get(command, data) if isinstance(data.get(command), dict) else data
    known = {o.name.replace("-", "_"): o for o in options}
    out = {}
    for key, value in table.items():
        if isinstance(value, dict):
            continue  # another command's table
        opt = known.get(key.replace("-", "_"))
        if opt is None:
            raise UsageError(f"config {path}: unknown key {key!r} for `{command}` "
                             f"(known: {', '.join(o.name for o in options)})")
        try:
            out[opt.dest] = opt.convert(value)
        except (TypeError, ValueError) as e:
            raise UsageError(f"config {path}: key {key!r}: {e}") from None
    return out


def resolve(args: argparse.Namespace, command: str, options) -> tuple[dict[str, Any], set[str]]:
    """Final settings (defaults, then the config file, then explicit flags) and the keys set explicitly."""
    settings = {o.dest: o.default for o in options}
    given: set[str] = set()
    if args.config:
        from_config = load_config(args.config, command, options)
        settings.update(from_config)
        given.update(from_config)
    for opt in options:
        raw = getattr(args, opt.dest)
        if raw is not None:
            try:
                settings[opt.dest] = opt.convert(raw)
            except (TypeError, ValueError) as e:
                raise UsageError(f"--{opt.name}: {e}") from None
            given.add(opt.dest)
    return settings, given


def snapshot_columns(resources, searches=()) -> list[tuple]:
    """The stdout table's (metric, header, scale[, digits]) columns for these dimensions and searches."""
    cols = [("placed_fraction", "placed%", 100.0), ("placed_weighted", "placed_w%", 100.0)]
    cols += [(f"utilization_{r}", f"util_{r}%", 100.0) for r in resources]
    cols += [("holes", "holes%", 100.0)]
    cols += [(f"stranding_{r}", f"strand_{r}%", 100.0) for r in resources]
    return cols + [(k, h, 1.0, 3) for k, h in (("compaction", "compaction"), ("inflation", "inflation")) if k in searches]


def _check_sources(s: dict[str, Any], given: set[str]) -> None:
    """Synthetic-only and trace-only settings must not be mixed."""
    flag = lambda dest: "--" + dest.replace("_", "-")
    if s["trace_dir"]:
        both = [flag(k) for k in SYNTHETIC_ONLY if k in given]
        if both:
            raise UsageError(f"{', '.join(both)}: only for the synthetic workload, not with --trace-dir")
    else:
        lone = [flag(k) for k in TRACE_ONLY if k in given]
        if lone:
            raise UsageError(f"{', '.join(lone)}: only for a real trace; give --trace-dir too")


def _load_trace(s: dict[str, Any], quiet: bool):
    """(trace, filters) of the trace settings."""
    from . import progress
    from .filters import Filters
    from .traces import load_trace

    bar = None if quiet else progress.maybe("loading trace")
    trace = load_trace(s["trace_dir"], s["trace_format"], cache_dir=s["cache_dir"], use_cache=not s["no_cache"],
                       pods=s["pod_list"], nodes=s["node_list"], progress=bar)
    filters = Filters(days=s["days"], min_priority=s["min_priority"], max_task_dim=s["max_task_dim"],
                      max_tasks=s["max_tasks"])
    return trace, filters


def _trace_snapshot(s, trace, filters, at, within=None):
    """(cluster, workload, JSON description) of one snapshot of a loaded trace."""
    from .filters import snapshot_tasks

    index, chosen = snapshot_tasks(trace.workload, filters, trace.window[0], at, within)
    snap = trace.take(index)
    doc = dict(trace.describe(), trace_dir=s["trace_dir"], loaded_tasks=trace.workload.num_tasks,
               tasks=snap.workload.num_tasks, snapshot=chosen)
    return snap.cluster, snap.workload, doc


def _load_workload(s: dict[str, Any], quiet: bool):
    """(cluster, workload, JSON description, cache state) of the synthetic workload or the trace snapshot.

    The cache state stays out of the JSON, which must not depend on what ran before.
    """
    if not s["trace_dir"]:
        from .synthetic import synthetic_instance

        cluster, workload = synthetic_instance(s["machines"], s["rho"], s["seed"])
        return cluster, workload, _synthetic_doc(cluster, workload, s["seed"]), None
    trace, filters = _load_trace(s, quiet)
    return (*_trace_snapshot(s, trace, filters, s["at"] or trace.default_instant), trace.cache)


def _synthetic_doc(cluster, workload, seed) -> dict:
    return {"source": "synthetic", "machines": cluster.num_machines, "tasks": workload.num_tasks,
            "resources": list(cluster.resources), "seed": seed}


def _policies_and_genome(s: dict[str, Any], command: str) -> tuple[str, ...]:
    """The --policy list, checked (placement methods such as cvxcluster only in snapshot, after
    the scoring policies), after checking that --genome (if given) has 8 numbers."""
    from .policies import GENOME_NAMES, PLACEMENT_METHODS, policy_names

    parts = [p.strip() for p in s["policy"].split(",") if p.strip()]
    methods = tuple(dict.fromkeys(p for p in parts if p in PLACEMENT_METHODS))
    if methods and command != "snapshot":
        raise UsageError(f"--policy: {methods[0]} is not available in `{command}` (use it in `snapshot` or "
                         f"`jaxsched cvx`)")
    rest = ",".join(p for p in parts if p not in PLACEMENT_METHODS)
    try:
        policies = policy_names(rest) if rest or not methods else ()
    except KeyError as e:
        raise UsageError(f"--policy: {e.args[0]}") from None
    if s["genome"] is not None and len(s["genome"]) != len(GENOME_NAMES):
        raise UsageError(f"--genome: expected {len(GENOME_NAMES)} numbers ({','.join(GENOME_NAMES)}), "
                         f"got {len(s['genome'])}")
    return policies + methods


def cmd_snapshot(args: argparse.Namespace) -> int:
    """Run the snapshot experiment on the synthetic workload or a trace snapshot."""
    s, given = resolve(args, "snapshot", SNAPSHOT_OPTIONS)
    _check_sources(s, given)
    from . import __version__, progress
    from .output import check_writable, format_table, write_json_atomic
    from .policies import slot_vector

    policies = _policies_and_genome(s, "snapshot")
    try:
        slot_vector(s["slot"], 3 if s["trace_dir"] else 2)
    except InputError as e:
        raise UsageError(f"--slot: {e}") from None
    if s["json"]:
        try:
            check_writable(s["json"])
        except InputError as e:
            raise UsageError(f"--json: {e}") from None

    import jax

    from .snapshot import run_snapshot

    t0 = time.perf_counter()
    cluster, workload, source, cache_state = _load_workload(s, args.quiet)
    try:
        slot = slot_vector(s["slot"], cluster.num_resources)
    except InputError as e:
        raise UsageError(f"--slot: {e}") from None
    bar = None if args.quiet else progress.maybe("packing")
    tickers = {}

    def search_bar(name, rounds):
        if args.quiet or not progress.enabled():
            return
        for other in [k for k in tickers if k != name]:
            tickers.pop(other).close()
        tickers.setdefault(name, progress.Ticker(name, "round"))(rounds)

    result = run_snapshot(cluster, workload, policies, s["trials"], s["seed"], s["sample_k"], slot,
                          s["genome"], progress=bar, compact=not s["no_compaction"],
                          inflate=None if s["no_inflation"] else s["inflate_mode"],
                          search_depth=s["search_depth"], search_progress=search_bar)
    for ticker in tickers.values():
        ticker.close()
    wall = time.perf_counter() - t0
    summary = result.summary()
    unused = SYNTHETIC_ONLY if s["trace_dir"] else TRACE_ONLY
    doc = {
        "jaxsched": __version__,
        "experiment": "snapshot",
        "settings": {k: (list(v) if isinstance(v, tuple) else v) for k, v in s.items()
                     if k != "json" and k not in unused} | {"policy": list(policies), "slot": list(slot)},
        "workload": source,
        "policies": summary,
    }
    if s["json"]:
        write_json_atomic(s["json"], doc)
    if not args.quiet:
        dev = jax.devices()
        where = "synthetic" if not s["trace_dir"] else _describe_snapshot(source, cache_state)
        print(f"snapshot: {where}, {cluster.num_machines} machines, {workload.num_tasks} tasks, "
              f"{s['trials']} trials, sample_k={s['sample_k'] or 'full scan'}, seed {s['seed']}, "
              f"{len(dev)} {dev[0].platform} device(s), {wall:.1f}s")
        print(format_table(summary, snapshot_columns(result.resources, result.searches)))
        if s["json"]:
            print(f"wrote {s['json']}")
    return 0


def _describe_snapshot(source: dict, cache_state: str) -> str:
    snap = source["snapshot"]
    when = "every task" if snap["instant"] == "all" else f"alive at t={snap['instant_s']:g}s ({snap['instant']})"
    skipped = ", ".join(f"{k} {v}" for k, v in source["skipped"].items() if v)
    return (f"{source['source']} trace ({source['loaded_tasks']} tasks loaded, cache {cache_state}"
            f"{'; skipped: ' + skipped if skipped else ''}), {when}")


def _tuning_problems(s: dict[str, Any], quiet: bool):
    """(train, held-out, JSON description) for tuning: the peak snapshot and one from the other half.

    Synthetic: the workload of the seed, and for held-out the one of seed + 1. Trace: the
    busiest instant of the (filtered) window, and the busiest instant of the second half
    of the window (the first half if the peak lies in the second). Traces packed whole
    (Alibaba pod lists) split at the middle of the window by arrival instead.
    """
    from .evolve import Problem
    from .filters import DAY_S

    if not s["trace_dir"]:
        from .synthetic import synthetic_instance

        train = synthetic_instance(s["machines"], s["rho"], s["seed"])
        held = synthetic_instance(s["machines"], s["rho"], s["seed"] + 1)
        return Problem(*train), Problem(*held), {"train": _synthetic_doc(*train, s["seed"]),
                                                 "heldout": _synthetic_doc(*held, s["seed"] + 1)}
    trace, filters = _load_trace(s, quiet)
    start, end = trace.window
    if s["days"] is not None:
        end = min(end, start + s["days"] * DAY_S)
    mid = 0.5 * (start + end)
    if trace.default_instant == "all":
        arrival = np.asarray(trace.workload.arrival)
        first, second = trace.take(arrival < mid), trace.take(arrival >= mid)
        if first.workload.num_tasks == 0 or second.workload.num_tasks == 0:
            raise InputError(f"{s['trace_dir']}: every task arrives in one half of the window; nothing to hold out")
        c1, w1, d1 = _trace_snapshot(s, first, filters, "all")
        c2, w2, d2 = _trace_snapshot(s, second, filters, "all")
        return Problem(c1, w1), Problem(c2, w2), {"train": d1, "heldout": d2, "split_at_s": mid}
    c1, w1, d1 = _trace_snapshot(s, trace, filters, "busiest")
    peak = d1["snapshot"]["instant_s"]
    half = (mid, end) if peak < mid else (start, mid)
    c2, w2, d2 = _trace_snapshot(s, trace, filters, "busiest", within=half)
    return Problem(c1, w1), Problem(c2, w2), {"train": d1, "heldout": d2}


def _tuning_inputs(s: dict[str, Any], quiet: bool):
    """(train, held-out, JSON description, slot vector) of a tuning run; a bad --slot exits 2."""
    from .policies import slot_vector

    train, held, source = _tuning_problems(s, quiet)
    try:
        slot = slot_vector(s["slot"], train.cluster.num_resources)
    except InputError as e:
        raise UsageError(f"--slot: {e}") from None
    return train, held, source, slot


def _printer(quiet: bool) -> Callable[..., None]:
    """print, flushed, or nothing with --quiet."""
    return (lambda *a: None) if quiet else (lambda *a: print(*a, flush=True))


def _check_json_flag(s: dict[str, Any]) -> None:
    from .output import check_writable

    if s.get("json"):
        try:
            check_writable(s["json"])
        except InputError as e:
            raise UsageError(f"--json: {e}") from None


def _command_line(argv: list[str] | None) -> str:
    import shlex

    return "jaxsched " + " ".join(shlex.quote(a) for a in (sys.argv[1:] if argv is None else argv))


def cmd_evolve(args: argparse.Namespace) -> int:
    """Evolve family genomes on the peak snapshot; report held-out fitness against alpha_evolve."""
    s, given = resolve(args, "evolve", EVOLVE_OPTIONS)
    return _run_evolve(s, given, args)


def _settings_doc(s: dict[str, Any], skip=()) -> dict:
    unused = SYNTHETIC_ONLY if s["trace_dir"] else TRACE_ONLY
    return {k: (list(v) if isinstance(v, tuple) else v) for k, v in s.items()
            if k != "json" and k not in unused and k not in skip}


def _run_evolve(s: dict[str, Any], given: set[str], args: argparse.Namespace) -> int:
    _check_sources(s, given)
    _check_json_flag(s)
    from . import __version__, progress
    from .evolve import EvolveConfig, evolve
    from .output import write_json_atomic

    cfg = EvolveConfig(generations=s["generations"], population=s["population"], parents=s["parents"],
                       sigma=s["sigma"], trials=s["trials"], sample_k=s["sample_k"], seed=s["seed"])
    try:
        cfg.check()
    except InputError as e:
        raise UsageError(str(e)) from None
    t0 = time.perf_counter()
    train, held, source, slot = _tuning_inputs(s, args.quiet)
    cfg = dataclasses.replace(cfg, slot=slot)
    say = _printer(args.quiet)
    say(f"evolve: train {train.cluster.num_machines} machines x {train.workload.num_tasks} tasks, held-out "
        f"{held.cluster.num_machines} x {held.workload.num_tasks}; population {cfg.population}, parents "
        f"{cfg.parents}, {cfg.generations} generations, {cfg.trials} trials, sample_k={cfg.sample_k or 'full scan'}")
    say(f"{'gen':>3}  {'best%':>8}  {'median%':>8}  {'held-out%':>9}  {'elapsed':>7}  best genome (w0..w5, p1, p2)")

    def report(g):
        genome = ",".join(f"{x:.3g}" for x in g.genome)
        say(f"{g.index:>3}  {100 * g.best:8.3f}  {100 * g.median:8.3f}  {100 * g.heldout:9.3f}  "
            f"{time.perf_counter() - t0:6.0f}s  {genome}")

    bar = None if args.quiet else progress.maybe("packing population")
    result = evolve(train, held, cfg, on_generation=report, progress=bar)
    doc = {"jaxsched": __version__, "experiment": "evolve", "command": _command_line(args.argv),
           "settings": _settings_doc(s, [o.dest for o in GRAD_OPTIONS]) | {"slot": list(cfg.slot)},
           "workload": source} | result.to_json()
    if s["json"]:
        write_json_atomic(s["json"], doc)
    say(f"champion: train {100 * result.train:.3f}% vs alpha_evolve {100 * result.baseline_train:.3f}%; "
        f"held-out {100 * result.heldout:.3f}% vs alpha_evolve {100 * result.baseline_heldout:.3f}% "
        f"({result.evaluations} genome evaluations, {time.perf_counter() - t0:.0f}s)")
    if s["json"]:
        say(f"wrote {s['json']}")
    return 0


def cmd_tune(args: argparse.Namespace) -> int:
    """Tune a family genome by gradient on the relaxation (or by evolution)."""
    s, given = resolve(args, "tune", TUNE_OPTIONS)
    flag = lambda dest: "--" + dest.replace("_", "-")
    other = [o.dest for o in GRAD_OPTIONS] if s["method"] == "evolve" else list(EVOLVE_ONLY)
    wrong = [flag(k) for k in other if k in given]
    if wrong:
        raise UsageError(f"{', '.join(wrong)}: not used by --method {s['method']}")
    if s["method"] == "evolve":
        return _run_evolve(s, given, args)
    _check_sources(s, given)
    _check_json_flag(s)
    from .evolve import canonical
    from .output import write_json_atomic
    from .policies import GENOME_NAMES
    from .relax import RelaxConfig, tune
    from . import __version__

    if len(s["start"]) != len(GENOME_NAMES):
        raise UsageError(f"--start: expected {len(GENOME_NAMES)} numbers ({','.join(GENOME_NAMES)}), "
                         f"got {len(s['start'])}")
    if not np.all(np.isfinite(s["start"])) or min(s["start"][6:]) <= 0:
        raise UsageError("--start: expected finite numbers with powers p1, p2 > 0")
    cfg = RelaxConfig(temperature=s["temperature"], sharpness=s["sharpness"])
    t0 = time.perf_counter()
    train, held, source, slot = _tuning_inputs(s, args.quiet)
    say = _printer(args.quiet)
    say(f"tune --method grad: train {train.cluster.num_machines} machines x {train.workload.num_tasks} tasks; "
        f"{s['steps']} Adam steps, lr {s['learning_rate']:g}, temperature {cfg.temperature:g}, sharpness "
        f"{cfg.sharpness:g}, {s['trials']} trials; hard objective with sample_k={s['sample_k'] or 'full scan'}")
    say(f"{'step':>4}  {'relaxed%':>8}  {'hard%':>8}  {'elapsed':>7}  genome (w0..w5, p1, p2)")

    def report(h):
        say(f"{h.index:>4}  {100 * h.relaxed:8.3f}  {100 * h.hard:8.3f}  {time.perf_counter() - t0:6.0f}s  "
            + ",".join(f"{x:.3g}" for x in canonical(np.asarray(h.genome))[0]))

    result = tune(train, held, s["start"], steps=s["steps"], learning_rate=s["learning_rate"], trials=s["trials"],
                  seed=s["seed"], sample_k=s["sample_k"], slot=slot, cfg=cfg, on_step=report)
    doc = {"jaxsched": __version__, "experiment": "tune", "method": "grad", "command": _command_line(args.argv),
           "settings": _settings_doc(s, EVOLVE_ONLY) | {"slot": list(slot)}, "workload": source} | result.to_json()
    if s["json"]:
        write_json_atomic(s["json"], doc)
    say(f"best hard objective {100 * result.hard:.3f}% (start {100 * result.start_hard:.3f}%); held-out "
        f"{100 * result.heldout:.3f}% (start {100 * result.start_heldout:.3f}%), {time.perf_counter() - t0:.0f}s")
    if s["json"]:
        say(f"wrote {s['json']}")
    return 0


def _event_workload(s: dict[str, Any], quiet: bool):
    """(cluster, workload, JSON description) of the synthetic workload or the filtered trace."""
    if not s["trace_dir"]:
        from .synthetic import synthetic_instance

        cluster, workload = synthetic_instance(s["machines"], s["rho"], s["seed"], event=True)
        return cluster, workload, dict(_synthetic_doc(cluster, workload, s["seed"]), offered_load=s["rho"])
    from .filters import apply_filters

    trace, filters = _load_trace(s, quiet)
    index, dropped = apply_filters(trace.workload, filters, trace.window[0])
    if index.size == 0:
        raise InputError(f"the filters {filters.active()} leave no task")
    kept = trace.take(index)
    doc = dict(trace.describe(), trace_dir=s["trace_dir"], loaded_tasks=trace.workload.num_tasks,
               tasks=int(index.size), filters=filters.active(), dropped=dropped)
    return kept.cluster, kept.workload, doc


def _csv_paths(prefix: str, policies, trials: int) -> dict[tuple[str, int], str]:
    return {(p, t): f"{prefix}_{p}{'' if trials == 1 else f'_t{t}'}.csv" for p in policies for t in range(trials)}


def cmd_event(args: argparse.Namespace) -> int:
    """Replay the arrivals of the synthetic workload or a trace through each policy."""
    s, given = resolve(args, "event", EVENT_OPTIONS)
    _check_sources(s, given)
    _check_json_flag(s)
    from . import __version__, progress
    from .output import check_writable, format_event_table, write_csv_atomic, write_json_atomic
    policies = _policies_and_genome(s, "event")
    if s["max_evictions"] is not None and not s["preempt"]:
        raise UsageError("--max-evictions: only with --preempt")
    csv_paths = _csv_paths(s["util_csv"], policies, s["trials"]) if s["util_csv"] else {}
    for path in csv_paths.values():
        try:
            check_writable(path)
        except InputError as e:
            raise UsageError(f"--util-csv: {e}") from None

    import jax

    from .event import run_event
    from .eventstats import SERIES_CAP, utilization_series

    say = _printer(args.quiet)
    t0 = time.perf_counter()
    cluster, workload, source = _event_workload(s, args.quiet)
    span = float(np.max(np.asarray(workload.arrival) + np.asarray(workload.duration)))
    if csv_paths and span / s["util_dt"] > SERIES_CAP:
        raise UsageError(f"--util-dt {s['util_dt']:g}: a {span:,.0f} s replay would give more than "
                         f"{SERIES_CAP:,} rows per file")
    bar = None if args.quiet else progress.maybe("replaying")
    result = run_event(cluster, workload, policies, s["trials"], s["seed"], s["sample_k"], s["preempt"],
                       s["slot"], s["genome"], s["max_evictions"], progress=bar)
    wall = time.perf_counter() - t0
    unused = (SYNTHETIC_ONLY if s["trace_dir"] else TRACE_ONLY)
    doc = {
        "jaxsched": __version__,
        "experiment": "event",
        "command": _command_line(args.argv),
        "settings": {k: (list(v) if isinstance(v, tuple) else v) for k, v in s.items()
                     if k not in ("json", "util_csv") and k not in unused} | {"policy": list(policies)},
        "workload": source,
        "tick_s": result.replay.inputs.tick_s,
        "policies": result.summary(),
    }
    rep = result.replay
    for (p, t), path in csv_paths.items():
        b = policies.index(p) * s["trials"] + t
        series = utilization_series(rep.segments[b], np.asarray(workload.arrival), np.asarray(workload.demand),
                                    np.asarray(cluster.capacity), rep.inputs.tick_s, s["util_dt"])
        header = ["time_s", "running", "pending"] + [f"util_{r}" for r in cluster.resources]
        write_csv_atomic(path, header, series)
    if s["json"]:
        write_json_atomic(s["json"], doc)
    dev = jax.devices()
    where = "synthetic" if not s["trace_dir"] else f"{source['source']} trace"
    say(f"event: {where}, {cluster.num_machines} machines, {workload.num_tasks} tasks, {s['trials']} trial(s), "
        f"sample_k={s['sample_k'] or 'full scan'}, preempt={'on' if s['preempt'] else 'off'}, seed {s['seed']}, "
        f"{len(dev)} {dev[0].platform} device(s), {wall:.1f}s")
    say(format_event_table(result.summary(), cluster.resources, s["preempt"]))
    for path in list(csv_paths.values()) + ([s["json"]] if s["json"] else []):
        say(f"wrote {path}")
    return 0


def _cvx_problem(s: dict[str, Any], quiet: bool):
    """(problem, workload or None, JSON description) of the cvx settings."""
    from .cvx import from_snapshot, replicate, synthetic_problem

    if not s["trace_dir"]:
        problem, workload = synthetic_problem(s["machines"], s["rho"], s["seed"], gpus=not s["no_gpus"],
                                              types=not s["no_types"], anti_affinity=not s["no_anti_affinity"],
                                              event=s["online"])
        doc = {"source": "synthetic", "machines": s["machines"], "rho": s["rho"], "seed": s["seed"]}
    elif s["online"]:
        cluster, workload, doc = _event_workload(s, quiet)
        problem = from_snapshot(cluster, workload)
    else:
        trace, filters = _load_trace(s, quiet)
        cluster, workload, doc = _trace_snapshot(s, trace, filters, s["at"] or trace.default_instant)
        problem = from_snapshot(cluster, workload)
    if s["replicate"] > 1:
        problem = replicate(problem, s["replicate"])
        if workload is not None:
            tile = lambda a: None if a is None else np.concatenate([np.asarray(a)] * s["replicate"])
            workload = dataclasses.replace(workload, demand=tile(workload.demand), priority=tile(workload.priority),
                                   arrival=tile(workload.arrival), duration=tile(workload.duration),
                                   sched_class=tile(workload.sched_class),
                                   different_machines=tile(workload.different_machines), job=tile(workload.job))
    from .cvx import aggregate

    doc.update(servers=problem.num_servers, tasks=problem.num_tasks, resources=list(problem.resources),
               shapes=len(aggregate(problem).count), anti_affinity_groups=problem.num_groups,
               machine_types=int(problem.server_type.max()) + 1, replicate=s["replicate"])
    return problem, workload, doc


def cmd_cvx(args: argparse.Namespace) -> int:
    """Allocate with CvxCluster: one snapshot (optionally checked against HiGHS) or online rounds."""
    s, given = resolve(args, "cvx", CVX_OPTIONS)
    flag = lambda dest: "--" + dest.replace("_", "-")
    if s["trace_dir"]:
        wrong = [k for k in CVX_SYNTHETIC_ONLY if k in given]
        if wrong:
            raise UsageError(f"{flag(wrong[0])} is for the synthetic workload, not with --trace-dir")
    else:
        wrong = [k for k in TRACE_ONLY if k in given]
        if wrong:
            raise UsageError(f"{flag(wrong[0])} needs --trace-dir")
    if not s["online"]:
        wrong = [k for k in CVX_ONLINE_ONLY if k in given]
        if wrong:
            raise UsageError(f"{flag(wrong[0])} needs --online")
    elif s["exact"]:
        raise UsageError("--exact checks one snapshot; it does not combine with --online")
    if any(m <= 0 for m in s["rate_multiplier"]):
        raise UsageError("--rate-multiplier: every multiplier must be > 0")
    _check_json_flag(s)
    from . import __version__, progress
    from .output import write_json_atomic

    import jax

    from .cvx import PriceConfig, allocate, solve_lp, solve_mip
    from .cvx.online import run_online

    say = _printer(args.quiet)
    cfg = PriceConfig(gap_tol=s["gap_tol"], max_iters=s["max_iters"], anneal_iters=min(500, s["max_iters"]))
    problem, workload, source = _cvx_problem(s, args.quiet)
    dev = jax.devices()
    say(f"cvx: {source['source']}, {problem.num_servers} servers in {source['shapes']} shapes, "
        f"{problem.num_tasks} tasks, resources {','.join(problem.resources)}, {problem.num_groups} anti-affinity "
        f"groups, {source['machine_types']} machine type(s), {len(dev)} {dev[0].platform} device(s)")
    doc = {"jaxsched": __version__, "experiment": "cvx", "command": _command_line(args.argv),
           "settings": {k: (list(v) if isinstance(v, tuple) else v) for k, v in s.items() if k != "json"},
           "workload": source}
    if s["online"]:
        runs = []
        for mult in s["rate_multiplier"]:
            bar = None if args.quiet else progress.maybe(f"online x{mult:g}")
            r = run_online(problem, workload.arrival, workload.duration, mult, s["round_s"], s["seed"], cfg,
                           s["max_rounds"], progress=bar)
            runs.append(r.summary())
            x = runs[-1]
            say(f"x{mult:g}: {x['rounds']} rounds, placed {x['placed']}/{x['tasks']}, {x['tasks_per_s']:,.0f} "
                f"tasks/s, solve {1e3 * x['solve_s_mean']:.0f} ms mean / {1e3 * x['solve_s_max']:.0f} ms max "
                f"({x['compile_rounds']} rounds with compilation left out), "
                f"queue {x['queue_mean']:.0f} mean / {x['queue_max']} max, latency p50 {x['latency_s_p50']:.1f} s "
                f"p99 {x['latency_s_p99']:.1f} s; {x['stop_reason']}")
        doc["online"] = runs
    else:
        allocs = [allocate(problem, s["seed"], t, cfg) for t in range(s["trials"])]
        a = allocs[0]
        dual, primal = float(a.prices.dual), float(a.prices.primal)
        converged = (dual - primal) / max(problem.num_tasks, 1) <= s["gap_tol"]
        objs = [x.objective for x in allocs]
        doc["cvxcluster"] = {
            "dual": dual, "primal": primal, "iterations": int(a.prices.iterations), "converged": bool(converged),
            "price_seconds": [x.price_seconds for x in allocs], "place_seconds": [x.place_seconds for x in allocs],
            "objective": objs, "placed": [int(np.sum(x.placement >= 0)) for x in allocs],
            "objective_over_dual": [o / dual if dual > 0 else float("nan") for o in objs],
        }
        say(f"stage 1: dual {dual:.2f}, primal {primal:.2f}, {int(a.prices.iterations)} steps, "
            f"{a.price_seconds:.2f} s (first call includes compilation)"
            + ("" if converged else f"; NOT converged to --gap-tol {s['gap_tol']:g} within --max-iters"))
        say(f"stage 2: objective {np.mean(objs):.1f} (mean of {len(objs)}), {100 * np.mean(objs) / dual:.2f}% of the "
            f"dual bound, placed {np.mean(doc['cvxcluster']['placed']):.0f}/{problem.num_tasks}, "
            f"{np.median([x.place_seconds for x in allocs]):.3f} s")
        if s["exact"]:
            lp = solve_lp(problem)
            mip = solve_mip(problem, s["mip_time_limit"])
            doc["exact"] = {"lp_objective": lp.objective, "lp_seconds": lp.seconds,
                            "mip_objective": mip.objective, "mip_bound": mip.bound, "mip_optimal": mip.optimal,
                            "mip_seconds": mip.seconds, "mip_status": mip.status}
            best_bound = min(lp.objective, mip.bound)
            say(f"HiGHS LP: {lp.objective:.2f} in {lp.seconds:.2f} s (JAX dual {100 * (dual / lp.objective - 1):+.3f}%)")
            say(f"HiGHS MIP: {'optimal' if mip.optimal else 'best found'} {mip.objective:.1f}, bound "
                f"{mip.bound:.1f}, {mip.seconds:.1f} s ({mip.status}); CvxCluster within "
                f"{100 * (1 - np.mean(objs) / best_bound):.2f}% of the best bound")
    if s["json"]:
        write_json_atomic(s["json"], doc)
        say(f"wrote {s['json']}")
    return 0


def cmd_report(args: argparse.Namespace) -> int:
    """Write the HTML report of the given result files."""
    from .output import check_writable, write_text_atomic
    from .report import build_report

    try:
        check_writable(args.output)
    except InputError as e:
        raise UsageError(f"-o: {e}") from None
    write_text_atomic(args.output, build_report(args.files))
    print(f"wrote {args.output}")
    return 0


def cmd_policies(args: argparse.Namespace) -> int:
    """Print the registered policies by family."""
    from .policies import FAMILY, REGISTRY

    for p in list(REGISTRY.values()) + [FAMILY]:
        print(f"{p.family:14s} {p.name}")
    return 0


def _set_cpu_devices(args: argparse.Namespace) -> None:
    """--cpu-devices, before any JAX backend starts; a jax.distributed run keeps one device
    per process unless the flag is given."""
    from .devices import set_cpu_devices

    if args.num_processes and str(args.cpu_devices).lower() == "auto":
        return
    try:
        set_cpu_devices(args.cpu_devices)
    except InputError as e:
        raise UsageError(f"--cpu-devices: {e}") from None


def _start_distributed(args: argparse.Namespace) -> None:
    """jax.distributed.initialize from --coordinator/--num-processes/--process-id; quiet on processes > 0."""
    if not (args.coordinator and args.num_processes and args.process_id is not None):
        raise UsageError("--coordinator, --num-processes and --process-id go together")
    if args.num_processes < 1 or not 0 <= args.process_id < args.num_processes:
        raise UsageError(f"--process-id must be in 0..{args.num_processes - 1}")
    import jax

    from . import output

    # Before any backend starts; CPU processes talk through gloo (JAX's default CPU collectives).
    jax.distributed.initialize(args.coordinator, args.num_processes, args.process_id)
    if args.process_id > 0:
        args.quiet = True
        output.PRIMARY = False


def main(argv: list[str] | None = None) -> int:
    """Entry point of the `jaxsched` console script."""
    parser = build_parser()
    args = parser.parse_args(argv)
    args.argv = argv
    if args.command is None:
        parser.print_help()
        return EXIT_USAGE
    try:
        _set_cpu_devices(args)
        if args.coordinator or args.num_processes is not None or args.process_id is not None:
            _start_distributed(args)
    except UsageError as e:
        print(f"jaxsched: error: {e}", file=sys.stderr)
        return EXIT_USAGE
    handler = {"snapshot": cmd_snapshot, "evolve": cmd_evolve, "tune": cmd_tune, "event": cmd_event,
               "cvx": cmd_cvx, "report": cmd_report, "policies": cmd_policies}[args.command]
    try:
        return handler(args)
    except UsageError as e:
        print(f"jaxsched: error: {e}", file=sys.stderr)
        return EXIT_USAGE
    except InputError as e:  # invalid workload or settings found by the library
        print(f"jaxsched: error: {e}", file=sys.stderr)
        return EXIT_USAGE
    except KeyboardInterrupt:
        print("jaxsched: interrupted", file=sys.stderr)
        return 130


if __name__ == "__main__":
    sys.exit(main())
