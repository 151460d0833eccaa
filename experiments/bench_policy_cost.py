"""Benchmark: the full-scan cost of each registered policy, relative to best_fit.

Workload: the synthetic 2,000-machine cluster at rho 0.75 (seed 1), the first 2,048 tasks
of its workload, 5 trials. For each deterministic policy, two packings on one CPU device,
of 2 and of 8 rows of that policy; the difference over the 30 extra (row, trial) pairs is
the policy's marginal cost of one (row, trial) step, free of the per-step cost every
program pays. Medians of --repeats rounds (each round measures every policy, in turn).

`policies.Policy.cost` holds the mean of two runs, rounded (the cheap policies move by
+-20% from run to run): `packing.policy_shares` uses them to
split whole policies over the CPU devices in shares of equal cost.

    python experiments/bench_policy_cost.py [--repeats 3] [--out results/bench_policy_cost.json]
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from jaxsched import policies, rng  # noqa: E402
from jaxsched.output import write_json_atomic  # noqa: E402
from jaxsched.packing import PackConfig, pack  # noqa: E402
from jaxsched.synthetic import synthetic_instance  # noqa: E402

from benchlib import add_cpu_devices_arg, apply_cpu_devices, hardware  # noqa: E402

ROWS = (2, 8)
TRIALS = 5


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--tasks", type=int, default=2048)
    ap.add_argument("--out", default="results/bench_policy_cost.json")
    add_cpu_devices_arg(ap)
    args = ap.parse_args()
    apply_cpu_devices(args.cpu_devices)
    import jax

    names = [n for n, p in policies.REGISTRY.items() if p.deterministic]
    cluster, wl = synthetic_instance(2000, 0.75, seed=1)
    wl = wl.take(np.arange(min(args.tasks, wl.num_tasks)))
    keys = rng.trial_keys(1, "policy-cost", TRIALS)
    device = jax.local_devices()[0]
    hw = hardware()
    print(f"workload: synthetic 2000 machines, first {wl.num_tasks} tasks (rho 0.75, seed 1), {TRIALS} trials, "
          f"full scan, {ROWS[0]} and {ROWS[1]} rows of one policy on one device")
    print(f"hardware: {hw['cpu']}, {hw['cores']} cores, jax {hw['jax']} ({hw['backend']})")

    def run(name, rows):
        t0 = time.perf_counter()
        pack(cluster, wl, PackConfig(policies=(name,) * rows), keys, device=device)
        return time.perf_counter() - t0

    for name in names:  # compile
        for rows in ROWS:
            run(name, rows)
    marginal = {n: [] for n in names}
    for _ in range(args.repeats):
        for name in names:
            small, big = (run(name, rows) for rows in ROWS)
            marginal[name].append((big - small) / ((ROWS[1] - ROWS[0]) * TRIALS) / wl.num_tasks)
    med = {n: statistics.median(v) for n, v in marginal.items()}
    base = med["best_fit"]
    print(f"{'policy':16s} {'ns/(row, trial) step':>22s} {'relative':>9s} {'registered':>11s}")
    for n in names:
        print(f"{n:16s} {med[n] * 1e9:22.0f} {med[n] / base:9.2f} {policies.REGISTRY[n].cost:11.2f}")
    doc = {"benchmark": "policy_cost", "hardware": hw,
           "workload": {"machines": 2000, "tasks": wl.num_tasks, "trials": TRIALS, "rows": ROWS},
           "seconds_per_row_trial_step": med, "relative_to_best_fit": {n: med[n] / base for n in names}}
    write_json_atomic(args.out, doc)
    print(f"wrote {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
