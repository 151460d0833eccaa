"""Benchmark: genome evaluations per second, a whole population in one packing against one genome at a time.

Workload: the synthetic 2,000-machine snapshot at rho 1.0 (seed 1, the `jaxsched evolve`
default), a population of 64 genomes (the search's first generation: the named seed
points and mutants of alpha_evolve), one trial each, fitness = demand-weighted placed
fraction, for both pickers (full scan and sample_k = 64).

- batched: `evolve.fitness` on all 64 genomes, one packing with 64 `family` rows;
- one at a time: the same function on one genome per call (the same packing code,
  compiled before timing), on the first --sequential genomes, scaled to the
  population (say so in any figure quoted).

Both give the same fitness for every genome evaluated both ways (checked). The two run
alternately, --repeats pairs; reports the medians of each side and of the pairs' ratios
(the machine's speed drifts between runs); compile time separately. One more pair times
only what runs inside the packing blocks (`block_ratio`): a one-genome call also spends
host work per call that a population pays once.

    python experiments/bench_evolve.py [--repeats 5] [--sequential 8] [--quick]
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from jaxsched.evolve import EvolveConfig, Problem, fitness, initial_population  # noqa: E402
from jaxsched.output import write_json_atomic  # noqa: E402
from jaxsched.synthetic import synthetic_instance  # noqa: E402

from benchlib import add_cpu_devices_arg, apply_cpu_devices, block_time, hardware  # noqa: E402


def timed(fn):
    t = time.perf_counter()
    out = fn()
    return time.perf_counter() - t, out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--machines", type=int, default=2000)
    ap.add_argument("--rho", type=float, default=1.0)
    ap.add_argument("--population", type=int, default=64)
    ap.add_argument("--sequential", type=int, default=8, help="genomes evaluated one at a time, then scaled")
    ap.add_argument("--repeats", type=int, default=5)
    ap.add_argument("--pickers", default="0,64", help="sample_k values (0 = full scan)")
    ap.add_argument("--quick", action="store_true", help="300 machines, population 16, 1 repeat")
    ap.add_argument("--out", default="results/bench_evolve.json")
    add_cpu_devices_arg(ap)
    a = ap.parse_args()
    apply_cpu_devices(a.cpu_devices)
    if a.quick:
        a.machines, a.population, a.sequential, a.repeats = 300, 16, 4, 1
    problem = Problem(*synthetic_instance(a.machines, a.rho, 1))
    cfg = EvolveConfig(population=a.population)
    genomes = initial_population(a.population, np.random.default_rng(0), cfg.sigma)
    seq = min(a.sequential, a.population)
    hw = hardware()
    print(f"bench_evolve: {problem.cluster.num_machines} machines, {problem.workload.num_tasks} tasks (rho {a.rho}), "
          f"population {a.population}, 1 trial; one-at-a-time on {seq} genomes, scaled")
    print(f"hardware: {hw['cpu']}, {hw['cores']} cores, jax {hw['jax']} {hw['backend']} x{hw['devices']}")
    rows = []
    for k in (int(x) for x in a.pickers.split(",")):
        batch = lambda: fitness(problem, genomes, 1, 1, k)
        one = lambda i: fitness(problem, genomes[i:i + 1], 1, 1, k)
        compile_batch, _ = timed(batch)
        compile_one, _ = timed(lambda: one(0))
        t_batch, t_seq, ratios = [], [], []
        for _ in range(a.repeats):  # alternating, so that both sides see the same machine
            dt, fit_batch = timed(batch)
            t_batch.append(dt)
            dt, fits = timed(lambda: [one(i) for i in range(seq)])
            t_seq.append(dt)
            ratios.append(t_seq[-1] * a.population / seq / t_batch[-1])
        # The same comparison on the time inside packing blocks only (one more pair, timed apart).
        blocks_batch, blocks_one = block_time(batch), block_time(lambda: [one(i) for i in range(seq)])
        fit_one = np.concatenate(fits, axis=0)
        same = bool(np.array_equal(fit_one, fit_batch[:seq]))
        tb, ts = statistics.median(t_batch), statistics.median(t_seq) * a.population / seq
        row = {"sample_k": k, "batched_s": tb, "batched_evals_per_s": a.population / tb,
               "one_at_a_time_s_scaled": ts, "one_at_a_time_evals_per_s": a.population / ts,
               "ratio": statistics.median(ratios), "ratio_range": [min(ratios), max(ratios)],
               "block_s_batched": blocks_batch, "block_s_one_at_a_time_scaled": blocks_one * a.population / seq,
               "block_ratio": blocks_one * a.population / seq / blocks_batch,
               "compile_batched_s": compile_batch - tb, "compile_one_s": compile_one - ts / a.population,
               "same_fitness": same, "batched_runs_s": t_batch, "one_at_a_time_runs_s": t_seq}
        rows.append(row)
        picker = f"sample_k={k}" if k else "full scan"
        print(f"{picker:>12}: batched {row['batched_evals_per_s']:8.2f} evals/s ({tb:.2f} s); one at a time "
              f"{row['one_at_a_time_evals_per_s']:8.2f} evals/s ({ts:.2f} s scaled); ratio {row['ratio']:.1f}x "
              f"(median of {a.repeats} alternating pairs, {min(ratios):.1f}-{max(ratios):.1f}x; inside the packing "
              f"blocks only {row['block_ratio']:.1f}x); "
              f"compile {row['compile_batched_s']:.1f} s batched; same fitness: {same}")
        if not same:
            raise SystemExit("batched and one-at-a-time fitness differ")
    os.makedirs(os.path.dirname(a.out) or ".", exist_ok=True)
    write_json_atomic(a.out, {"benchmark": "evolve", "hardware": hw, "machines": problem.cluster.num_machines,
                              "tasks": problem.workload.num_tasks, "rho": a.rho, "population": a.population,
                              "sequential_genomes": seq, "repeats": a.repeats, "results": rows})
    print(f"wrote {a.out}")


if __name__ == "__main__":
    main()
