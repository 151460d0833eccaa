"""`jaxsched gpushare`: the FGD paper's GPU-sharing experiment on an Alibaba openb pod list."""

from __future__ import annotations

import argparse
import time
from typing import Any

from .common import check_writable, describe_devices, envelope, printer, settings_doc, write_result
from .config import UsageError, resolve
from .options import JSON, MAX_SEED, Option, path, positive_float

HELP = "GPU-sharing clusters: the FGD paper's policies x seeds on an Alibaba openb pod list"
DESCRIPTION = ("Place the pods of an Alibaba GPU v2023 (openb) pod list, sampled and shuffled per seed until "
               "the arrived GPU demand reaches --tune times the cluster's GPUs, on the paper's 1,213 GPU nodes "
               "(per-GPU shares, whole GPUs, GPU models), every (policy, seed) run batched in one program; "
               "report the GPU allocation ratio and fragmentation against arrived workload (Weng et al., "
               "ATC'23).")


MAX_SEEDS = 100_000  # runs of one command (each a row of the batched program)


def seed_list(v: Any) -> tuple[int, ...]:
    """'42-51', '42,45' or a TOML list: distinct seeds in 0..2^64-1, at most MAX_SEEDS of them."""
    if isinstance(v, (list, tuple)):
        parts = [str(x) for x in v]
    elif isinstance(v, str):
        parts = [p.strip() for p in v.split(",") if p.strip()]
    else:
        raise ValueError(f"expected seeds such as 42-51 or 42,43, got {v!r}")
    out: list[int] = []
    for part in parts:
        lo, sep, hi = part.partition("-")
        try:
            a, b = int(lo), int(hi) if sep else int(lo)
        except ValueError:
            raise ValueError(f"expected seeds such as 42-51 or 42,43, got {part!r}") from None
        if a < 0 or b < a or b > MAX_SEED:
            raise ValueError(f"expected a range low-high of seeds in 0..2^64-1, got {part!r}")
        if b - a + 1 + len(out) > MAX_SEEDS:
            raise ValueError(f"expected at most {MAX_SEEDS} seeds, got {part!r}")
        out += [s for s in range(a, b + 1) if s not in out]
    if not out:
        raise ValueError("expected at least one seed")
    return tuple(out)


OPTIONS = (
    Option("trace-dir", path, None, "the Alibaba GPU v2023 directory (openb_*.csv, in it or in csv/)", "DIR"),
    Option("pod-list", path, "default", "the pod list openb_pod_list_NAME.csv (default, cpu050..cpu250, "
           "gpushare20..100, gpuspec05..33, multigpu20..50)", "NAME"),
    Option("node-list", path, "gpu_node", "the node list openb_node_list_NAME.csv (the paper's cluster)", "NAME"),
    Option("policy", path, "all", "comma-separated policies: Random, DotProd, GpuClustering, GpuPacking, "
           "BestFit, FGD ('all': these six), or registered scores such as best_fit (GPU rule: best)", "LIST"),
    Option("seeds", seed_list, tuple(range(42, 52)), "the runs' seeds, e.g. 42-51 or 42,43", "S"),
    Option("tune", positive_float, 1.3, "pods arrive until their GPU demand reaches this multiple of the "
           "cluster's GPU capacity", "X"),
    JSON.but(help="write the curves (mean, std, min, max over seeds at every arrived workload) as JSON"),
    Option("csv", path, None, "write PREFIX_alloc.csv, PREFIX_frag.csv and PREFIX_frag_ratio.csv, a row per "
           "(policy, seed), laid out as the paper's analysis files", "PREFIX"),
)
CURVE_FILES = ("alloc", "frag", "frag_ratio")


def policy_list(text: str) -> tuple[str, ...]:
    """The --policy names: 'all' is the paper's six; duplicates dropped."""
    from ..gpushare import PAPER_POLICIES, gpu_policy

    names: list[str] = []
    for part in (p.strip() for p in text.split(",") if p.strip()):
        for name in (PAPER_POLICIES if part == "all" else [part]):
            try:
                gpu_policy(name)
            except KeyError as e:
                raise UsageError(f"--policy: {e.args[0]}") from None
            if name not in names:
                names.append(name)
    if not names:
        raise UsageError("--policy: no policy given")
    return tuple(names)


def run(args: argparse.Namespace) -> int:
    """Run the experiment and write its curves."""
    from .. import progress
    from ..gpushare import GpuShareConfig, load_gpushare, run_gpushare
    from ..output import write_csv_atomic

    s, _ = resolve(args, "gpushare", OPTIONS)
    if not s["trace_dir"]:
        raise UsageError("--trace-dir: the Alibaba GPU v2023 directory is required")
    policies = policy_list(s["policy"])
    check_writable(s["json"])
    paths = {c: f"{s['csv']}_{c}.csv" for c in CURVE_FILES} if s["csv"] else {}
    for p in paths.values():
        check_writable(p, "--csv")
    say = printer(args.quiet)
    t0 = time.perf_counter()
    cluster, pods = load_gpushare(s["trace_dir"], s["pod_list"], s["node_list"])
    cfg = GpuShareConfig(policies=policies, seeds=s["seeds"], tune=s["tune"])
    say(f"gpushare: {cluster.num_nodes} nodes, {cluster.total_gpus} GPUs; pod list {pods.name}, {pods.num_pods} "
        f"pods; {len(policies)} policies x {len(cfg.seeds)} seeds, tune {cfg.tune:g}; {describe_devices()}")
    bar = None if args.quiet else progress.maybe("placing")
    result = run_gpushare(cluster, pods, cfg, progress=bar)
    wall = time.perf_counter() - t0
    summary = result.summary()
    workload = {"source": "alibaba-gpu-v2023", "trace_dir": s["trace_dir"], "pod_list": pods.name,
                "node_list": s["node_list"], "nodes": cluster.num_nodes, "gpus": cluster.total_gpus,
                "pods": pods.num_pods, "typical_pods": len(result.typical.count),
                "typical_covered": result.typical.covered}
    doc = envelope("gpushare", args, settings_doc(s, ("csv",), drop_unused=False) | {"policy": list(policies)},
                   workload=workload, arrived_percent=list(range(131)), policies=summary)
    for curve, p in paths.items():
        header, rows = result.csv_rows(curve)
        write_csv_atomic(p, header, rows)
    write_result(s["json"], doc)
    say(f"{'policy':14s} {'alloc% @100':>12s} {'frag% @100':>11s} {'frag_ratio @100':>15s} {'failed pods':>11s}")
    for name, e in summary.items():
        a, f, r = (e[c]["at_100"] for c in CURVE_FILES)
        mean = lambda v: sum(x for x in v if x is not None) / max(1, sum(x is not None for x in v))
        spread = lambda v: "" if len(v) < 2 else f" ± {_sd([x for x in v if x is not None]):.2f}"
        say(f"{name:14s} {mean(a):7.2f}{spread(a):>7s} {mean(f):11.2f} {mean(r):15.2f} "
            f"{sum(e['failed']) / len(e['failed']):11.0f}")
    say(f"({wall:.1f} s)")
    for p in list(paths.values()) + ([s["json"]] if s["json"] else []):
        say(f"wrote {p}")
    return 0


def _sd(v: list[float]) -> float:
    m = sum(v) / len(v)
    return (sum((x - m) ** 2 for x in v) / max(len(v) - 1, 1)) ** 0.5
