"""Benchmark: snapshot packing throughput against a single-thread numba loop, in one run.

Workload: a synthetic Google-2011-sized cluster (12,583 machines, jaxsched's machine mix)
and the first tasks of its rho=0.75 synthetic workload, best_fit, batch = B shuffled
trials packed together (their shuffles drawn before timing, as the loop's order is
given). Reports machine-scores/s for the full scan and placements/s
for sample_k=64 at B = 1, 32, 256, the numba loop's figures measured in the same run,
their ratios, and compile time separately. Medians of --repeats runs. JAX splits the
trials over --cpu-devices (default: one per core, as the CLI does; `--cpu-devices 1`
measures one device); the numba loop is single-threaded by definition.

    python experiments/bench_snapshot.py [--quick] [--cpu-devices N] [--out results/bench_snapshot.json]
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

import jax  # noqa: E402

from jaxsched import rng  # noqa: E402
from jaxsched.output import write_json_atomic  # noqa: E402
from jaxsched.packing import PackConfig, pack  # noqa: E402
from jaxsched.synthetic import synthetic_instance  # noqa: E402
from jaxsched.types import Workload  # noqa: E402

from benchlib import add_cpu_devices_arg, apply_cpu_devices, hardware  # noqa: E402

MACHINES = 12_583


def numba_loops():
    """The baseline: a plain single-thread best_fit loop, full scan (k = 0) or sample_k."""
    import numba

    @numba.njit(cache=False, nogil=True, inline="always")
    def score(cap, free, j, dc, dm):
        """best_fit score of machine j, -inf where the task does not fit."""
        rc, rm = free[j, 0] - dc, free[j, 1] - dm
        if rc >= -1e-6 and rm >= -1e-6:
            return 2.0 - rc / cap[j, 0] - rm / cap[j, 1]
        return -np.inf

    @numba.njit(cache=False, nogil=True)
    def pack_loop(cap, demand, k, seed):
        """Place every task in order: best of k random draws, else (or with k = 0) a full scan."""
        np.random.seed(seed)
        M = cap.shape[0]
        free = cap.copy()
        placed = 0
        for i in range(demand.shape[0]):
            dc, dm = demand[i, 0], demand[i, 1]
            best, bj = -np.inf, -1
            for c in range(k):  # best of k draws, ties to the lowest machine index
                j = np.random.randint(0, M)
                s = score(cap, free, j, dc, dm)
                if s > best or (s == best and s > -np.inf and j < bj):
                    best, bj = s, j
            if bj < 0:  # full scan: k = 0, or no draw fits
                for j in range(M):
                    s = score(cap, free, j, dc, dm)
                    if s > best:
                        best, bj = s, j
            if bj >= 0:
                free[bj, 0] -= dc
                free[bj, 1] -= dm
                placed += 1
        return placed

    return pack_loop


def timed(fn, repeats):
    first = time.perf_counter()
    fn()
    first = time.perf_counter() - first
    runs = []
    for _ in range(repeats):
        t = time.perf_counter()
        fn()
        runs.append(time.perf_counter() - t)
    return first, statistics.median(runs)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--quick", action="store_true", help="fewer tasks and repeats (smoke run)")
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--batches", default="1,32,256")
    ap.add_argument("--out", default="results/bench_snapshot.json")
    add_cpu_devices_arg(ap)
    args = ap.parse_args()
    apply_cpu_devices(args.cpu_devices)
    batches = [int(b) for b in args.batches.split(",")]
    n_full, n_sampled = (128, 1024) if args.quick else (1024, 8192)
    repeats = 1 if args.quick else args.repeats

    cluster, wl = synthetic_instance(MACHINES, 0.75, seed=1)
    cap = np.asarray(cluster.capacity, np.float32)
    demand = np.asarray(wl.demand, np.float32)
    hw = hardware()
    print(f"workload: {MACHINES} machines (synthetic mix), best_fit, first {n_full} tasks (full scan) / "
          f"{n_sampled} tasks (sample_k=64) of the rho=0.75 synthetic workload")
    print(f"hardware: {hw['cpu']}, {hw['cores']} cores, jax {hw['jax']} on {hw['devices']} {hw['backend']} device(s)")

    loop = numba_loops()
    loop(cap, demand[:8], 0, 0)
    loop(cap, demand[:8], 64, 0)
    _, t_loop_full = timed(lambda: loop(cap, demand[:n_full], 0, 1), repeats)
    _, t_loop_samp = timed(lambda: loop(cap, demand[:n_sampled], 64, 1), repeats)
    base = {
        "full_scan_machine_scores_per_s": n_full * MACHINES / t_loop_full,
        "full_scan_placements_per_s": n_full / t_loop_full,
        "sample64_placements_per_s": n_sampled / t_loop_samp,
    }
    print(f"numba single-thread loop: full scan {base['full_scan_machine_scores_per_s']:.3g} machine-scores/s, "
          f"sample_k=64 {base['sample64_placements_per_s']:.3g} placements/s")

    rows = []
    for k, n in ((0, n_full), (64, n_sampled)):
        sub = Workload(demand[:n], wl.priority[:n], wl.arrival[:n], wl.duration[:n])
        for b in batches:
            keys = rng.trial_keys(1, "bench", b)
            orders = np.asarray(rng.trial_orders(keys, n))  # shuffled once, outside the timing
            cfg = PackConfig(policies=("best_fit",), sample_k=k)
            first, run = timed(lambda: pack(cluster, sub, cfg, keys, orders=orders), repeats)
            row = {"picker": "full scan" if k == 0 else f"sample_k={k}", "batch": b, "tasks": n,
                   "run_s": run, "compile_s": max(first - run, 0.0), "placements_per_s": n * b / run}
            if k == 0:
                row["machine_scores_per_s"] = n * b * MACHINES / run
                row["ratio_vs_numba"] = row["machine_scores_per_s"] / base["full_scan_machine_scores_per_s"]
            else:
                row["ratio_vs_numba"] = row["placements_per_s"] / base["sample64_placements_per_s"]
            rows.append(row)
            rate = (f"{row['machine_scores_per_s']:.3g} machine-scores/s" if k == 0
                    else f"{row['placements_per_s']:.3g} placements/s")
            print(f"  {row['picker']:13s} batch {b:4d}: {rate:28s} x{row['ratio_vs_numba']:.2f} vs numba  "
                  f"(run {run:.2f}s, compile {row['compile_s']:.2f}s)", flush=True)

    full_ok = all(r["ratio_vs_numba"] >= 2 for r in rows if r["picker"] == "full scan" and r["batch"] >= 32)
    samp_ok = all(r["placements_per_s"] >= 2e6 for r in rows if r["picker"] != "full scan" and r["batch"] >= 256)
    print(f"goal full scan >= 2x numba at batch >= 32: {'met' if full_ok else 'NOT met'}; "
          f"sample_k=64 >= 2e6 placements/s at batch >= 256: {'met' if samp_ok else 'NOT met'}")
    doc = {"benchmark": "snapshot", "workload": {"machines": MACHINES, "policy": "best_fit", "tasks_full": n_full,
           "tasks_sampled": n_sampled, "source": "synthetic rho=0.75 seed=1"}, "hardware": hw,
           "baseline_numba_single_thread": base, "results": rows,
           "goals": {"full_scan_2x_numba_at_batch_32plus": full_ok, "sample64_2M_per_s_at_batch_256plus": samp_ok}}
    os.makedirs(os.path.dirname(os.path.abspath(args.out)), exist_ok=True)
    write_json_atomic(args.out, doc)
    print(f"wrote {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
