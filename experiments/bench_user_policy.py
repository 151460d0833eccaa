"""Benchmark: a user policy of best_fit's formula against the built-in best_fit, side by side.

Workload: the synthetic 2,000-machine cluster at rho 0.75 (seed 1), all its tasks (or --tasks),
a batch of 32 rows (32 shuffled trials of one policy), full scan and sample_k=64. The user
policy is `t.u[0] + t.u[1]` registered with `jaxsched.policy` (best_fit is the sum of u over
the dimensions, here two). Each round packs the built-in and the user policy in turn, after
one compiling run of each; median of --repeats rounds. Their placements must be identical.
Goal: the user policy within 10% of the built-in's time.

    python experiments/bench_user_policy.py [--repeats 5] [--out results/bench_user_policy.json]
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

import jaxsched  # noqa: E402
from jaxsched.output import write_json_atomic  # noqa: E402

from benchlib import add_cpu_devices_arg, apply_cpu_devices, hardware  # noqa: E402

BATCH = 32
GOAL = 1.10


@jaxsched.policy
def user_best_fit(t):
    """best_fit's formula, written as a user would."""
    return t.u[0] + t.u[1]


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--repeats", type=int, default=5)
    ap.add_argument("--tasks", type=int, default=0, help="the first N tasks (0: all)")
    ap.add_argument("--out", default="results/bench_user_policy.json")
    add_cpu_devices_arg(ap)
    args = ap.parse_args()
    apply_cpu_devices(args.cpu_devices)
    cluster, wl = jaxsched.synthetic_instance(2000, 0.75, seed=1)
    wl = wl.take(np.arange(min(args.tasks or wl.num_tasks, wl.num_tasks)))
    keys = jaxsched.trial_keys(1, "user-policy", BATCH)
    hw = hardware()
    print(f"workload: synthetic 2000 machines, first {wl.num_tasks} tasks (rho 0.75, seed 1), batch {BATCH} "
          f"(trials of one policy); hardware: {hw['cpu']}, {hw['cores']} cores, jax {hw['jax']} "
          f"({hw['backend']} x{hw['devices']})", flush=True)

    def run(name, sample_k):
        cfg = jaxsched.PackConfig(policies=(name,), sample_k=sample_k)
        t0 = time.perf_counter()
        state = jaxsched.pack(cluster, wl, cfg, keys)
        placement = np.asarray(state.placement)
        return time.perf_counter() - t0, placement

    doc = {"benchmark": "user_policy", "hardware": hw,
           "workload": {"machines": 2000, "tasks": int(wl.num_tasks), "batch": BATCH}, "modes": {}}
    for mode, k in (("full scan", 0), ("sample_k=64", 64)):
        _, p_builtin = run("best_fit", k)
        _, p_user = run("user_best_fit", k)
        same = bool(np.array_equal(p_builtin, p_user))
        times = {"best_fit": [], "user_best_fit": []}
        for _ in range(args.repeats):
            for name in times:
                times[name].append(run(name, k)[0])
        med = {n: statistics.median(v) for n, v in times.items()}
        ratio = med["user_best_fit"] / med["best_fit"]
        rate = {n: wl.num_tasks * BATCH / m for n, m in med.items()}
        doc["modes"][mode] = {"runs_s": times, "median_s": med, "placements_per_s": rate,
                              "user_over_builtin": ratio, "identical_placements": same, "goal": GOAL,
                              "meets_goal": ratio <= GOAL}
        print(f"{mode:12s} best_fit {med['best_fit']:.3f} s ({rate['best_fit']:.3g} placements/s), user_best_fit "
              f"{med['user_best_fit']:.3f} s: user/built-in {ratio:.3f} (goal <= {GOAL}), identical placements: "
              f"{same}", flush=True)
    write_json_atomic(args.out, doc)
    print(f"wrote {args.out}")
    return 0 if all(m["identical_placements"] for m in doc["modes"].values()) else 1


if __name__ == "__main__":
    sys.exit(main())
