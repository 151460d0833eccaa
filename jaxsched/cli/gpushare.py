"""`jaxsched gpushare`: the FGD paper's GPU-sharing experiment on an Alibaba openb pod list."""

from __future__ import annotations

import argparse
import time
from typing import Any

from .common import check_writable, checked, describe_devices, envelope, printer, settings_doc, write_result
from .config import UsageError, resolve
from .options import dest_flag
from .options import JSON, MAX_SEED, SEED, Option, choice, flag, float_list, path, positive_float, positive_int

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
    Option("genome", float_list, None, "the genome of the policy gpushare_family: 10 term weights in [-1, 1] and "
           "the GPU blend in [0, 1] (docs/gpushare.md, 'The family')", "G"),
)

SEARCH_OPTIONS = (
    Option("search", flag, False, "search the family for a policy that beats FGD (docs/gpushare.md, 'Searching "
           "beyond FGD') instead of running --policy"),
    Option("strategy", choice("cma_es", "snes", "open_es", "mu_lambda"), "cma_es", "--search: an evosax "
           "evolution strategy from FGD's point, or (mu + lambda) from the paper's policies", "S"),
    Option("generations", positive_int, 20, "--search: populations evaluated, the first included", "G"),
    Option("population", positive_int, 64, "--search: genomes per generation, all in one batched simulation per "
           "list", "N"),
    Option("parents", positive_int, 16, "--search: genomes kept each generation (mu of mu + lambda)", "MU"),
    Option("sigma", positive_float, 0.15, "--search: initial scale (an evosax strategy's std; for mu + lambda, "
           "the mutation step x each coordinate's range)", "S"),
    SEED.but(name="search-seed", help="--search: the search's own random seed, 0..2^64-1"),
    Option("train-lists", path, ",".join(("default", "cpu100", "gpushare60", "gpuspec20", "multigpu30")),
           "--search: the comma-separated pod lists fitness is measured on", "LIST"),
    Option("train-seeds", seed_list, (0, 1, 2, 3), "--search: the training runs' seeds (never 42..51)", "S"),
    Option("heldout-lists", path, ",".join(("cpu050", "cpu200", "cpu250", "gpushare40", "gpushare80", "gpushare100",
                                            "gpuspec10", "gpuspec25", "gpuspec33", "multigpu20", "multigpu40",
                                            "multigpu50")),
           "--search: the pod lists the champion is reported on after the search, never selected on", "LIST"),
    Option("heldout-seeds", seed_list, tuple(range(42, 52)), "--search: the held-out runs' seeds (the paper's)",
           "S"),
)
RUN_ONLY = ("pod_list", "policy", "seeds", "csv", "genome")
SEARCH_ONLY = tuple(o.dest for o in SEARCH_OPTIONS if o.name != "search")
OPTIONS = OPTIONS + SEARCH_OPTIONS
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

    s, given = resolve(args, "gpushare", OPTIONS)
    if not s["trace_dir"]:
        raise UsageError("--trace-dir: the Alibaba GPU v2023 directory is required")
    if s["search"]:
        return run_search(s, given, args)
    stray = [k for k in SEARCH_ONLY if k in given]
    if stray:
        raise UsageError(f"{dest_flag(stray[0])} applies to --search only")
    policies = policy_list(s["policy"])
    genome = _genome(s, policies)
    check_writable(s["json"])
    paths = {c: f"{s['csv']}_{c}.csv" for c in CURVE_FILES} if s["csv"] else {}
    for p in paths.values():
        check_writable(p, "--csv")
    say = printer(args.quiet)
    t0 = time.perf_counter()
    cluster, pods = load_gpushare(s["trace_dir"], s["pod_list"], s["node_list"])
    cfg = GpuShareConfig(policies=policies, seeds=s["seeds"], tune=s["tune"], genome=genome)
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
    say(f"{'policy':16s} {'alloc% @100':>12s} {'frag% @100':>11s} {'frag_ratio @100':>15s} {'failed pods':>11s}")
    for name, e in summary.items():
        a, f, r = (e[c]["at_100"] for c in CURVE_FILES)
        mean = lambda v: sum(x for x in v if x is not None) / max(1, sum(x is not None for x in v))
        spread = lambda v: "" if len(v) < 2 else f" ± {_sd([x for x in v if x is not None]):.2f}"
        say(f"{name:16s} {mean(a):7.2f}{spread(a):>7s} {mean(f):11.2f} {mean(r):15.2f} "
            f"{sum(e['failed']) / len(e['failed']):11.0f}")
    say(f"({wall:.1f} s)")
    for p in list(paths.values()) + ([s["json"]] if s["json"] else []):
        say(f"wrote {p}")
    return 0


def _sd(v: list[float]) -> float:
    m = sum(v) / len(v)
    return (sum((x - m) ** 2 for x in v) / max(len(v) - 1, 1)) ** 0.5


def _genome(s: dict[str, Any], policies: tuple[str, ...]) -> tuple[float, ...] | None:
    """The --genome of gpushare_family, checked; it must come with that policy and only with it."""
    from ..errors import InputError
    from ..gpushare import family

    if family.FAMILY not in policies:
        if s["genome"] is not None:
            raise UsageError(f"--genome applies to --policy {family.FAMILY} only")
        return None
    if s["genome"] is None:
        raise UsageError(f"--policy {family.FAMILY} needs --genome ({', '.join(family.GENOME_NAMES)})")
    try:
        return tuple(float(x) for x in family.check_genome(s["genome"], "--genome"))
    except InputError as e:
        raise UsageError(str(e)) from None


def _lists(text: str, flag_name: str) -> tuple[str, ...]:
    names = tuple(dict.fromkeys(p.strip() for p in text.split(",") if p.strip()))
    if not names:
        raise UsageError(f"{flag_name}: no pod list given")
    return names


def run_search(s: dict[str, Any], given: set[str], args: argparse.Namespace) -> int:
    """Search the family on the training lists, then report the champion against FGD and BestFit on
    the held-out lists and on the training lists with the held-out seeds."""
    from .. import progress
    from ..gpushare import family
    from ..gpushare import search as gs

    stray = [k for k in RUN_ONLY if k in given]
    if stray:
        raise UsageError(f"{dest_flag(stray[0])} does not apply to --search (it searches gpushare_family on "
                         f"--train-lists; see --help)")
    cfg = gs.GpuSearchConfig(strategy=s["strategy"], generations=s["generations"], population=s["population"],
                             parents=s["parents"], sigma=s["sigma"], seed=s["search_seed"],
                             train_lists=_lists(s["train_lists"], "--train-lists"), train_seeds=s["train_seeds"],
                             heldout_lists=_lists(s["heldout_lists"], "--heldout-lists"),
                             heldout_seeds=s["heldout_seeds"], tune=s["tune"])
    checked(cfg.check, ("generations", "population", "parents", "sigma", "strategy", "train_seeds", "train_lists",
                        "tune"))
    check_writable(s["json"])
    say = printer(args.quiet)
    t0 = time.perf_counter()
    lists = gs.Lists.load(s["trace_dir"], cfg.train_lists + cfg.heldout_lists)
    runs = cfg.generations * cfg.population * len(cfg.train_lists) * len(cfg.train_seeds)
    say(f"gpushare --search: {cfg.strategy}, {cfg.generations} generations x {cfg.population} genomes x "
        f"{len(cfg.train_lists)} lists x {len(cfg.train_seeds)} seeds ({runs:,} runs); held-out: "
        f"{len(cfg.heldout_lists)} lists x {len(cfg.heldout_seeds)} seeds; {describe_devices()}")
    say(f"{'gen':>3}  {'evals':>6}  {'best':>7}  {'median':>7}  {'elapsed':>7}  best genome "
        f"({', '.join(family.GENOME_NAMES)})")

    def report(g, evaluations):
        say(f"{g.index:>3}  {evaluations:>6}  {g.best:7.3f}  {g.median:7.3f}  {time.perf_counter() - t0:6.0f}s  "
            + ",".join(f"{x:.3g}" for x in g.genome))

    found = gs.search(lists, cfg, on_generation=report, progress=None if args.quiet else progress.maybe("searching"))
    champion = found.result.champion
    say(f"champion: training fitness {found.result.train:.3f}% against FGD's {found.result.baseline_train:.3f}% "
        f"({found.runs:,} runs, {found.wall_s:.0f} s, {found.runs / max(found.wall_s, 1e-9):.2f} runs/s)")
    say(f"held-out: the champion against FGD and BestFit at arrived 100%, seeds "
        f"{cfg.heldout_seeds[0]}..{cfg.heldout_seeds[-1]}")
    bar = None if args.quiet else progress.maybe("held-out runs")
    heldout = gs.compare(lists, champion, cfg.heldout_lists, cfg.heldout_seeds, cfg.tune, bar)
    train = gs.compare(lists, champion, cfg.train_lists, cfg.heldout_seeds, cfg.tune, bar)
    for title, table in (("held-out lists", heldout), ("training lists, held-out seeds", train)):
        say(f"  {title}:")
        say(f"  {'list':12s} {'champion':>8s} {'FGD':>8s} {'BestFit':>8s} {'vs FGD':>8s} {'better':>6s}")
        for name, e in table.items():
            say(f"  {name:12s} {e['champion']['mean']:8.2f} {e['FGD']['mean']:8.2f} {e['BestFit']['mean']:8.2f} "
                f"{e['vs_FGD']['mean']:+8.2f} {e['vs_FGD']['better']:>3d}/{len(e['seeds'])}")
    verdict = gs.goal(heldout, train)
    say(f"goal (+0.5 pp over FGD on the held-out lists, none below by 0.1, a lead on the training lists): "
        f"{'met' if verdict['met'] else 'not met'}; mean lead {verdict['heldout_mean_lead_pp']:+.3f} pp")
    settings = settings_doc(s, RUN_ONLY, drop_unused=False)
    doc = envelope("gpushare-search", args, settings, workload={"source": "alibaba-gpu-v2023",
                                                                "trace_dir": s["trace_dir"],
                                                                "nodes": lists.cluster.num_nodes,
                                                                "gpus": lists.cluster.total_gpus},
                   search=found.to_json(), heldout=heldout, train_heldout_seeds=train, goal=verdict,
                   wall_s=time.perf_counter() - t0)
    write_result(s["json"], doc)
    if s["json"]:
        say(f"wrote {s['json']}")
    return 0
