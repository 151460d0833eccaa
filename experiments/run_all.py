"""Run every experiments/bench_*.py and collect their headline figures in one place.

Each benchmark runs in its own process (with --quick if asked and the script has it),
its output saved beside its JSON; then results/bench.json gets the hardware, the
library versions and each benchmark's headline ratios against its goal, and
results/bench.md a short markdown table. --docs writes that table and every
benchmark's detail table (`perfdoc`, from results/*.json) into docs/performance.md,
between its `<!-- perf:begin -->` and `<!-- perf:end -->` markers. The same command runs
unchanged on a GPU machine.

    python experiments/run_all.py [--quick] [--only cvx,sharding] [--timeout 3600] [--docs] [--collect]
"""

from __future__ import annotations

import argparse
import datetime
import glob
import json
import os
import re
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
sys.path.insert(0, ROOT)
sys.path.insert(0, HERE)


def _snapshot(d):
    out = []
    for r in d["results"]:
        out.append((f"{r['picker']}, batch {r['batch']}: vs single-thread numba", r["ratio_vs_numba"],
                    2.0 if r["picker"] == "full scan" and r["batch"] >= 32 else None))
        if r["picker"] != "full scan" and r["batch"] >= 256:
            out.append((f"{r['picker']}, batch {r['batch']}: placements/s", r["placements_per_s"], 2e6))
    return out


def _trace(d):
    s, g = d["speedup_vs_csv"], d["goal"]
    return [("cold load vs csv module", s["cold"], g["cold"]), ("warm load vs csv module", s["warm"], g["warm"])]


def _compaction(d):
    rows = [("compaction + inflation vs sequential binary search", d["best_speedup"], d["goal"])]
    if "inside_blocks" in d:
        rows.append(("the same, time inside packing blocks only", d["inside_blocks"]["ratio"], None))
    return rows


def _evolve(d):
    rows = []
    for r in d["results"]:
        rows.append((f"population of 64 vs one at a time, sample_k={r['sample_k']}", r["ratio"], 10.0))
        if "block_ratio" in r:
            rows.append((f"the same, time inside packing blocks only, sample_k={r['sample_k']}", r["block_ratio"], None))
    return rows


def _event(d):
    p = d["prefix"]
    rows = [(f"events/s vs heapq reference, first {p['tasks']:,} tasks, incl. compile", p["ratio"], None)]
    if "ratio_compiled" in p:
        rows.append((f"events/s vs heapq reference, first {p['tasks']:,} tasks, compiled", p["ratio_compiled"], 20.0))
    return rows


def _cvx(d):
    gaps = [r["gap_to_bound_pct"] for r in d["vs_mip"]]
    speed = sorted(r["speed_ratio"] for r in d["vs_mip"])[len(d["vs_mip"]) // 2]
    return [("CvxCluster vs HiGHS MIP time (median; MIP at its time limit)", speed, 100.0),
            ("worst gap to the proven bound, % (goal: at most 3)", max(gaps), None),
            (f"price stage vs HiGHS LP, {d['vs_lp']['servers']:,} servers", d["vs_lp"]["speed_ratio"], None),
            (f"stage 2 tasks/s at {d['scale']['servers']:,} servers", d["scale"]["place_tasks_per_s"], None)]


def _sharding(d):
    return [(k, v, None) for k, v in d["ratios"].items()]


def _policy_cost(d):
    rel = d["relative_to_best_fit"]
    top = max(rel, key=rel.get)
    return [(f"costliest full-scan step vs best_fit ({top})", rel[top], None)]


def _gpushare(d):
    return [("FGD paper's 60 runs vs its simulator's stated cost (60 x 10 min)", d["ratio_vs_stated_reference"],
             600.0), ("largest distance to a published allocation ratio, points (goal: at most 0.5)",
                      max(abs(v) for v in d["diff_pp"].values()), None)] + (
        [("standard family search (25,600 runs): 60 min / its time projected from one generation on one list "
          "(no verdict: the timed search is in docs/gpushare.md)",
          d["search"]["standard_search_goal_s"] / d["search"]["standard_search_s"], None)] if "search" in d else [])


def _user_policy(d):
    return [(f"user policy of best_fit's formula / built-in, {mode} (time ratio; goal: at most 1.10)", m["user_over_builtin"],
             None) for mode, m in d["modes"].items()]


def _peer(d):
    rows = []
    for name, c in d["cases"].items():
        s, goals = c["summary"], c["summary"].get("goals", {})
        g = goals.get("inproc", {}).get("goal")
        rows.append((f"case {name}, in process: peer / jaxsched time", 1 / s["inproc_over_peerN"], round(1 / g, 3) if g else None))
        g = goals.get("e2e", {}).get("goal")
        rows.append((f"case {name}, CLI end to end: peer / jaxsched time", 1 / s["e2e_over_peerN_e2e"], round(1 / g, 3) if g else None))
    return rows


def _event_cvx(d):
    return [("day-1 Google sample, best_fit + alpha_evolve + cvxcluster: 15 min / end-to-end time", d["goal_s"] / d["wall_s"],
             1.0),
            ("CvxCluster rounds: tasks/s vs the paper's 19,000", d["tasks_per_s_over_paper"], None)]


HEADLINES = {"peer": _peer, "snapshot": _snapshot, "gpushare": _gpushare, "user_policy": _user_policy, "trace_load": _trace, "compaction": _compaction, "evolve": _evolve,
             "event": _event, "event_cvx": _event_cvx, "cvx": _cvx, "sharding": _sharding, "policy_cost": _policy_cost}


def _versions() -> dict:
    import importlib.metadata as md

    out = {}
    for pkg in ("jaxsched", "jax", "jaxlib", "optax", "numpy", "scipy", "pyarrow", "numba"):
        try:
            out[pkg] = md.version(pkg)
        except md.PackageNotFoundError:
            out[pkg] = None
    return out


def markdown(doc: dict) -> str:
    """The summary table: benchmark, figure, ratio, goal, met."""
    lines = ["| benchmark | figure | value | goal | met | measured on |", "|---|---|---|---|---|---|"]
    for name, b in doc["benchmarks"].items():
        if b["rc"] != 0:
            why = (f"no results ({b['json']} missing)" if b.get("collected") else
                   f"did not finish (exit {b['rc']}, see {b['log']})")
            lines.append(f"| {name} | {why} | | | | |")
            continue
        for fig, value, goal in b["headlines"]:
            met = "" if goal is None else ("yes" if value >= goal else "**no**")
            lines.append(f"| {name} | {fig} | {value:,.3g} | {'' if goal is None else f'{goal:g}'} | {met} | "
                         f"{b.get('measured_on', '')} |")
    hw = doc["hardware"]
    lines.append(f"\nrun_all on {hw['cpu']}, {hw['cores']} cores (each benchmark picks its own device count); "
                 f"jax {doc['versions']['jax']}; {doc['date']}{' (--quick sizes)' if doc['quick'] else ''}"
                 f"{'; collected from each benchmark JSON of its own run' if doc.get('collect') else ''}")
    return "\n".join(lines) + "\n"


def write_docs(path: str, table: str, results: str) -> None:
    """The headline table and the detail tables of `results`, between the page's markers."""
    from perfdoc import detail_tables

    text = open(path).read()
    if "<!-- perf:begin -->" not in text:
        raise SystemExit(f"run_all: {path} has no <!-- perf:begin --> marker")
    body = "## Headlines\n\n" + table + "\n" + detail_tables(results)
    new = re.sub(r"(<!-- perf:begin -->\n).*?(<!-- perf:end -->)", lambda m: m.group(1) + body + m.group(2), text,
                 flags=re.S)
    with open(path, "w") as f:
        f.write(new)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--quick", action="store_true", help="pass --quick to every benchmark that has it")
    ap.add_argument("--only", default=None, help="comma-separated benchmark names (bench_NAME.py)")
    ap.add_argument("--timeout", type=float, default=3600.0, help="seconds per benchmark")
    ap.add_argument("--results", default=os.path.join(ROOT, "results"))
    ap.add_argument("--docs", action="store_true", help="write the tables into docs/performance.md")
    ap.add_argument("--collect", action="store_true", help="run nothing: collect the JSONs the benchmarks "
                    "already wrote under --results (each entry says so, with its file's date)")
    args = ap.parse_args()
    from benchlib import hardware

    scripts = sorted(glob.glob(os.path.join(HERE, "bench_*.py")))
    names = [os.path.basename(s)[6:-3] for s in scripts]
    if args.only:
        wanted = args.only.split(",")
        unknown = [w for w in wanted if w not in names]
        if unknown:
            raise SystemExit(f"run_all: unknown benchmark {unknown[0]!r} (have: {', '.join(names)})")
        scripts = [s for s, n in zip(scripts, names) if n in wanted]
    os.makedirs(args.results, exist_ok=True)
    doc = {"date": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"), "quick": args.quick, "collect": args.collect,
           "hardware": hardware(), "versions": _versions(), "benchmarks": {}}
    for script in scripts:
        name = os.path.basename(script)[6:-3]
        out = os.path.join(args.results, f"bench_{name}{'_quick' if args.quick else ''}.json")
        log = out[:-5] + ".txt"
        cmd = [sys.executable, script, "--out", out]
        helptext = "" if args.collect else subprocess.run([sys.executable, script, "--help"], capture_output=True,
                                                           text=True).stdout
        if args.quick and "--quick" in helptext:
            cmd.append("--quick")
        t = time.perf_counter()
        if args.collect:
            rc = 0 if os.path.exists(out) else 2
        else:
            print(f"run_all: {name} ...", flush=True)
            try:
                with open(log, "w") as f:
                    rc = subprocess.run(cmd, stdout=f, stderr=subprocess.STDOUT, timeout=args.timeout,
                                        cwd=ROOT).returncode
            except subprocess.TimeoutExpired:
                rc = 124
        wall = time.perf_counter() - t
        entry = {"rc": rc, "wall_s": wall, "json": os.path.relpath(out, ROOT), "log": os.path.relpath(log, ROOT),
                 "headlines": []}
        if args.collect:
            entry["collected"] = (datetime.datetime.fromtimestamp(os.path.getmtime(out), datetime.timezone.utc)
                                  .isoformat(timespec="seconds") if rc == 0 else "no such file")
        if rc == 0:
            with open(out) as f:
                result = json.load(f)
            hw = result.get("hardware", {})
            devices = f" x{hw['devices']}" if "devices" in hw else ""
            entry["measured_on"] = f"{hw.get('cpu', '?')}, {hw.get('backend', 'cpu')}{devices}"
            if name in HEADLINES:
                entry["headlines"] = [list(h) for h in HEADLINES[name](result)]
        doc["benchmarks"][name] = entry
        print(f"run_all: {name}: exit {rc}, {wall:.0f} s" + "".join(
            f"\n    {fig}: {value:,.3g}" + ("" if goal is None else f" (goal {goal:g})")
            for fig, value, goal in entry["headlines"]), flush=True)
    from jaxsched.output import write_json_atomic

    suffix = "_quick" if args.quick else ""
    write_json_atomic(os.path.join(args.results, f"bench{suffix}.json"), doc)
    table = markdown(doc)
    with open(os.path.join(args.results, f"bench{suffix}.md"), "w") as f:
        f.write(table)
    print(table)
    if args.docs:
        write_docs(os.path.join(ROOT, "docs", "performance.md"), table, args.results)
    failed = [n for n, b in doc["benchmarks"].items() if b["rc"] != 0]
    if failed:
        raise SystemExit(f"run_all: {len(failed)} benchmark(s) failed: {', '.join(failed)}")


if __name__ == "__main__":
    main()
