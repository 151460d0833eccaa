"""Benchmark: loading the Google 2011 sample trace, cold and warm, against the csv module, in one run.

Workload: every task_events part under --trace-dir (the 14 sample parts, 2.6 M event
rows) and its machine_events. Three loads, each in a fresh process so that its peak
memory (ru_maxrss) is its own:

- csv: the plain-Python reading of the same semantics (tests/reference_trace.py:
  `csv.reader` over `gzip.open`, one dict entry per task);
- cold: jaxsched's loader from an empty cache (pyarrow parse, reduce, Parquet write);
- warm: jaxsched's loader from that cache.

Reports the median wall time of --repeats runs, event rows/s, peak RSS, and the
speedups cold/csv and warm/csv (goal: >= 10x cold, >= 100x warm).

    python experiments/bench_trace_load.py [--trace-dir ../shared/data/google2011] [--repeats 3]
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
DEFAULT_TRACE = os.path.join(os.path.dirname(ROOT), "shared", "data", "google2011")


def worker(variant: str, trace_dir: str, cache_dir: str) -> dict:
    """Time one load in this process; report its wall time, rows and peak memory."""
    sys.path[:0] = [ROOT, os.path.join(ROOT, "tests")]
    if variant == "csv":
        import reference_trace

        t0 = time.perf_counter()
        tasks, _, _ = reference_trace.load_tasks(trace_dir)
        machines, _ = reference_trace.load_machines(trace_dir)
        wall = time.perf_counter() - t0
        n_tasks = len(tasks)
    else:
        from jaxsched.traces import load_google2011

        t0 = time.perf_counter()
        trace = load_google2011(trace_dir, cache_dir=cache_dir)
        wall = time.perf_counter() - t0
        assert trace.cache == ("written" if variant == "cold" else "hit"), trace.cache
        n_tasks = trace.workload.num_tasks
    return {"wall_s": wall, "tasks": n_tasks, "peak_rss_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024}


def run_worker(variant: str, trace_dir: str, cache_dir: str) -> dict:
    out = subprocess.run([sys.executable, __file__, "--worker", variant, "--trace-dir", trace_dir,
                          "--cache-dir", cache_dir], check=True, capture_output=True, text=True)
    return json.loads(out.stdout.strip().splitlines()[-1])


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--trace-dir", default=DEFAULT_TRACE)
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--out", default=os.path.join(ROOT, "results", "bench_trace_load.json"))
    ap.add_argument("--worker", choices=("csv", "cold", "warm"), help=argparse.SUPPRESS)
    ap.add_argument("--cache-dir", help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.worker:
        print(json.dumps(worker(args.worker, args.trace_dir, args.cache_dir)))
        return 0

    sys.path.insert(0, ROOT)
    from jaxsched.output import write_json_atomic
    from jaxsched.traces.google2011 import part_files

    files = part_files(args.trace_dir, "task_events")
    rows = sum(1 for f in files for _ in __import__("gzip").open(f))
    runs: dict[str, list[dict]] = {"csv": [], "cold": [], "warm": []}
    for r in range(args.repeats):
        cache = tempfile.mkdtemp(prefix="jaxsched-bench-cache-")
        try:
            for variant in ("csv", "cold", "warm"):
                runs[variant].append(run_worker(variant, args.trace_dir, cache))
                print(f"run {r + 1}/{args.repeats} {variant}: {runs[variant][-1]['wall_s']:.3f} s", file=sys.stderr)
        finally:
            shutil.rmtree(cache, ignore_errors=True)
    med = {v: statistics.median(x["wall_s"] for x in runs[v]) for v in runs}
    peak = {v: max(x["peak_rss_mb"] for x in runs[v]) for v in runs}
    from benchlib import hardware

    hw = hardware(with_jax=False)
    print(f"workload: {len(files)} task_events parts, {rows:,} event rows, "
          f"{runs['cold'][0]['tasks']:,} tasks ({args.trace_dir})")
    print(f"hardware: {hw['cpu']}, {hw['cores']} cores, pyarrow {hw['pyarrow']}; medians of {args.repeats}")
    print(f"{'load':<6} {'wall s':>8} {'rows/s':>12} {'peak RSS MB':>12} {'vs csv':>8}")
    for v in runs:
        print(f"{v:<6} {med[v]:8.3f} {rows / med[v]:12.3e} {peak[v]:12.0f} {med['csv'] / med[v]:7.1f}x")
    doc = {"benchmark": "trace_load", "hardware": hw, "files": len(files), "event_rows": rows,
           "median_wall_s": med, "rows_per_s": {v: rows / med[v] for v in med}, "peak_rss_mb": peak,
           "speedup_vs_csv": {"cold": med["csv"] / med["cold"], "warm": med["csv"] / med["warm"]},
           "goal": {"cold": 10, "warm": 100}, "runs": runs}
    os.makedirs(os.path.dirname(args.out), exist_ok=True)
    write_json_atomic(args.out, doc)
    print(f"wrote {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
