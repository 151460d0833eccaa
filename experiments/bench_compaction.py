"""Benchmark: compaction + inflation, batched searches against the sequential binary search, in one run.

Workload: the synthetic 2,000-machine cluster at rho 0.75 (seed 1), every deterministic
registered policy (20: the spec's 21 less random) x 5
trials, full scan, inflation in scale mode.

- batched: jaxsched's compaction and inflation as `jaxsched snapshot` runs them
  (`compaction_and_inflation`): every (policy, trial) search of both metrics advanced in
  the same packing each round (`--depths`: binary-search levels per round), including
  the full-cluster packing compaction starts from;
- sequential: the spec's binary search, one `pack` call of one (policy, trial) per step,
  the same packing function. It runs on one (policy, trial) pair per policy (or
  --baseline-searches of them) and is scaled to all pairs by the number of searches
  (say so in any figure quoted); each policy's program is compiled before timing.

Both find the same answers (checked on the pairs the baseline runs). Reports the median
wall time of --repeats batched runs, alternating with shares of the sequential searches
(the machine's speed drifts), packings (row x trial) and the speedup; compile time of
the batched run separately. One more batched run and the sequential searches again
(--block-searches of them) time only what runs inside the packing blocks (`inside_blocks`):
a one-row packing also spends host work per call that a batched round pays once.

    python experiments/bench_compaction.py [--depths 1,2] [--repeats 3] [--baseline-searches N] [--quick]
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
from jaxsched.compaction import (STEPS_PER_UNIT, _max_steps, compaction_and_inflation, machine_ranks,  # noqa: E402
                                 scale_cap)
from jaxsched.output import write_json_atomic  # noqa: E402
from jaxsched.packing import PackConfig, RowVariants, pack  # noqa: E402
from jaxsched.search import bisect_sequential  # noqa: E402
from jaxsched.snapshot import EXPERIMENT  # noqa: E402
from jaxsched.synthetic import synthetic_instance  # noqa: E402

from benchlib import add_cpu_devices_arg, apply_cpu_devices, block_time, hardware  # noqa: E402

GENOME = np.asarray(policies.ALPHA_EVOLVE_GENOME, np.float32)


def batched(cluster, wl, names, keys, depth):
    """Compaction and inflation of every (policy, trial): (compaction, inflation, packings)."""
    cfg = PackConfig(policies=tuple(names))
    genomes = np.stack([GENOME] * len(names))
    full = pack(cluster, wl, cfg, keys)
    packs_full = np.all(full.placement >= 0, axis=-1)
    comp, infl = compaction_and_inflation(cluster, wl, cfg, keys, genomes, packs_full, depth)
    return comp.value, infl.value, len(names) * keys.shape[0] + comp.packings + infl.packings


def sequential(cluster, wl, name, keys, t, rank, orders, K):
    """The plain binary searches of one (policy, trial), one packing per step: (compaction, inflation, packings)."""
    cfg = PackConfig(policies=(name,))
    key, order, M, N = keys[t:t + 1], orders[t:t + 1], cluster.num_machines, wl.num_tasks
    count = [0]

    def packs(variants):
        count[0] += 1
        return bool(np.all(pack(cluster, wl, cfg, key, orders=order, variants=variants).placement >= 0))

    by_prefix = lambda L: packs(RowVariants(machine_rank=rank[t:t + 1], prefix=np.array([[L]])))
    comp = bisect_sequential(1, M, by_prefix, "first") / M if by_prefix(M) else 1.0
    by_scale = lambda k: packs(RowVariants(demand_scale=np.array([[k / STEPS_PER_UNIT]], np.float32)))
    if by_scale(K):
        k = K
    elif not by_scale(1):
        k = 0
    else:
        k = bisect_sequential(1, K - 1, by_scale, "last")
    return comp, k / STEPS_PER_UNIT, count[0]


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--machines", type=int, default=2000)
    ap.add_argument("--trials", type=int, default=5)
    ap.add_argument("--depths", default="1")
    ap.add_argument("--baseline-searches", type=int, default=None,
                    help="(policy, trial) pairs the sequential search runs (default: one per policy)")
    ap.add_argument("--repeats", type=int, default=3, help="timed batched runs (the median is reported)")
    ap.add_argument("--block-searches", type=int, default=None,
                    help="sequential searches of the inside-blocks comparison (default: all the baseline's)")
    ap.add_argument("--quick", action="store_true", help="300 machines, 4 policies, 2 trials (smoke run)")
    ap.add_argument("--out", default="results/bench_compaction.json")
    add_cpu_devices_arg(ap)
    args = ap.parse_args()
    apply_cpu_devices(args.cpu_devices)
    names = [n for n, p in policies.REGISTRY.items() if p.deterministic]
    machines, trials = args.machines, args.trials
    if args.quick:
        names, machines, trials = names[:4], 300, 2
    cluster, wl = synthetic_instance(machines, 0.75, seed=1)
    keys = rng.trial_keys(1, EXPERIMENT, trials)
    hw = hardware()
    searches = len(names) * trials
    print(f"workload: synthetic {machines} machines, {wl.num_tasks} tasks (rho 0.75, seed 1), {len(names)} "
          f"deterministic policies x {trials} trials = {searches} searches per metric; compaction + inflation (scale)")
    print(f"hardware: {hw['cpu']}, {hw['cores']} cores, jax {hw['jax']} on {hw['devices']} {hw['backend']} device(s)")

    rank = machine_ranks(keys, machines)
    orders = np.asarray(rng.trial_orders(keys, wl.num_tasks))
    K = _max_steps(scale_cap(cluster, wl))
    # One search per policy by default (trials taken in turn): the policies' costs differ a lot.
    pairs = [(p % len(names), (p // len(names) + p) % trials) for p in range(args.baseline_searches or len(names))]
    for p in sorted({p for p, _ in pairs}):  # compile each policy's batch-1 program before timing
        pack(cluster, wl, PackConfig(policies=(names[p],)), keys[:1], orders=orders[:1])
    depths = [int(d) for d in args.depths.split(",")]
    compile_s = {}
    for depth in depths:  # first runs: compile
        t0 = time.perf_counter()
        batched(cluster, wl, names, keys, depth)
        compile_s[depth] = time.perf_counter() - t0
    # The batched runs and the sequential searches alternate (a share of the searches after each
    # round of batched runs), so that the machine's drifting speed weighs on both alike.
    runs = {d: [] for d in depths}
    answers, packings = {}, {}
    times, seq_packings = [], 0
    share = -(-len(pairs) // args.repeats)
    for r in range(args.repeats):
        for depth in depths:
            t0 = time.perf_counter()
            comp, infl, packings[depth] = batched(cluster, wl, names, keys, depth)
            runs[depth].append(time.perf_counter() - t0)
            answers[depth] = (comp, infl)
            print(f"  batched, depth {depth} ({2**depth - 1} candidate(s) per search a round), run {r + 1}: "
                  f"{runs[depth][-1]:.1f} s, {packings[depth]} packings", flush=True)
        for p, t in pairs[r * share:(r + 1) * share]:
            t0 = time.perf_counter()
            comp, infl, n = sequential(cluster, wl, names[p], keys, t, rank, orders, K)
            times.append(time.perf_counter() - t0)
            seq_packings += n
            for depth, (c, i) in answers.items():
                assert (c[p, t], i[p, t]) == (comp, infl), (names[p], t, depth, c[p, t], comp, i[p, t], infl)
    rows = []
    for depth in depths:
        run = statistics.median(runs[depth])
        rows.append({"depth": depth, "candidates_per_round": 2**depth - 1, "run_s": run, "runs_s": runs[depth],
                     "compile_s": max(compile_s[depth] - run, 0.0), "packings": packings[depth]})
        print(f"  batched, depth {depth}: median {run:.1f} s of {args.repeats} run(s) "
              f"(compile {max(compile_s[depth] - run, 0.0):.1f} s apart)")
    per_search = statistics.mean(times)
    seq_total = per_search * searches
    print(f"  sequential: {len(pairs)} of {searches} (policy, trial) searches measured, "
          f"{statistics.median(times):.1f} s median each, {seq_packings / len(pairs):.0f} packings each; "
          f"scaled to all: {seq_total:.0f} s (same answers as the batched runs)")
    for r in rows:
        r["speedup_vs_sequential"] = seq_total / r["run_s"]
        print(f"  depth {r['depth']}: {r['speedup_vs_sequential']:.1f}x faster than the sequential binary search")
    # The same comparison on the time inside packing blocks only: one more batched run (the first
    # depth) and the first --block-searches sequential searches, timed apart. A one-row packing of
    # the sequential search also spends host work per call that a batched round pays once per round.
    block_batched = block_time(lambda: batched(cluster, wl, names, keys, depths[0]))
    block_pairs = pairs[:args.block_searches]
    block_seq = block_time(lambda: [sequential(cluster, wl, names[p], keys, t, rank, orders, K) for p, t in block_pairs])
    block_seq_total = block_seq / len(block_pairs) * searches
    block_ratio = block_seq_total / block_batched
    print(f"  inside packing blocks only: batched depth {depths[0]} {block_batched:.1f} s (busier device), sequential "
          f"{block_seq:.1f} s for {len(block_pairs)} searches, scaled {block_seq_total:.0f} s: {block_ratio:.1f}x")
    best = max(r["speedup_vs_sequential"] for r in rows)
    print(f"goal >= 5x: {'met' if best >= 5 else 'NOT met'} (best {best:.1f}x)")
    doc = {"benchmark": "compaction_inflation", "hardware": hw,
           "workload": {"machines": machines, "tasks": wl.num_tasks, "rho": 0.75, "policies": names,
                        "trials": trials, "inflate_mode": "scale"},
           "batched": rows,
           "sequential": {"searches_measured": len(pairs), "searches_total": searches, "seconds_each": times,
                          "scaled_total_s": seq_total, "packings_measured": seq_packings},
           "inside_blocks": {"depth": depths[0], "batched_s": block_batched, "searches_measured": len(block_pairs),
                             "sequential_s": block_seq, "sequential_scaled_total_s": block_seq_total,
                             "ratio": block_ratio},
           "goal": 5, "best_speedup": best}
    os.makedirs(os.path.dirname(os.path.abspath(args.out)), exist_ok=True)
    write_json_atomic(args.out, doc)
    print(f"wrote {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
