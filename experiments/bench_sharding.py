"""Benchmark: one packing with the trial axis on 1 device against sharded over 2 (or --devices) devices.

Workload: the synthetic 2,000-machine snapshot at rho 0.9 (seed 1), best_fit and
alpha_evolve, --trials trials, full scan and sample_k = 64. Each device count runs in
its own process (XLA_FLAGS=--xla_force_host_platform_device_count=N on a CPU; on a
machine with several GPUs, pass --devices with the GPU count and no flag is forced):
a compiling call, then the median of --repeats timed calls. The placements of every
device count must be identical (checked: a digest of the placement arrays).

    python experiments/bench_sharding.py [--devices 1,2] [--trials 8] [--repeats 3]
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import statistics
import subprocess
import sys
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)


def child(args) -> None:
    import jax
    import numpy as np

    from jaxsched import rng
    from jaxsched.packing import PackConfig, pack, shard_devices
    from jaxsched.synthetic import synthetic_instance

    cluster, workload = synthetic_instance(2000, 0.9, 1)
    keys = rng.trial_keys(1, "bench_sharding", args.trials)
    out = {"devices": len(jax.local_devices()), "sharded_over": len(shard_devices(args.trials)),
           "tasks": workload.num_tasks, "pickers": {}}
    for k in (0, 64):
        cfg = PackConfig(policies=("best_fit", "alpha_evolve"), sample_k=k)
        t = time.perf_counter()
        state = pack(cluster, workload, cfg, keys)
        first = time.perf_counter() - t
        times = []
        for _ in range(args.repeats):
            t = time.perf_counter()
            state = pack(cluster, workload, cfg, keys)
            times.append(time.perf_counter() - t)
        digest = hashlib.sha256(np.ascontiguousarray(state.placement).tobytes()).hexdigest()[:16]
        sec = statistics.median(times)
        out["pickers"][str(k)] = {"seconds": sec, "first_call_seconds": first, "digest": digest,
                                  "placements_per_s": 2 * args.trials * workload.num_tasks / sec}
    print(json.dumps(out))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--devices", default="1,2")
    ap.add_argument("--trials", type=int, default=8)
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    ap.add_argument("--out", default="results/bench_sharding.json")
    args = ap.parse_args()
    if args.child:
        return child(args)
    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
    from benchlib import hardware

    hw = hardware()
    runs = {}
    for n in (int(x) for x in args.devices.split(",")):
        env = dict(os.environ)
        if hw["backend"] == "cpu":
            env["XLA_FLAGS"] = f"{env.get('XLA_FLAGS', '')} --xla_force_host_platform_device_count={n}".strip()
        cmd = [sys.executable, os.path.abspath(__file__), "--child", "--trials", str(args.trials),
               "--repeats", str(args.repeats)]
        res = subprocess.run(cmd, env=env, capture_output=True, text=True, check=True)
        runs[n] = json.loads(res.stdout.strip().splitlines()[-1])
    base = runs[min(runs)]
    print(f"bench_sharding: {hw['cpu']}, {hw['cores']} cores, {hw['backend']}; synthetic 2,000 machines, rho 0.9, "
          f"{base['tasks']} tasks, best_fit + alpha_evolve x {args.trials} trials (medians of {args.repeats})")
    doc = {"benchmark": "sharding", "hardware": hw, "settings": vars(args), "runs": runs, "ratios": {}}
    for k, label in (("0", "full scan"), ("64", "sample_k=64")):
        digests = {r["pickers"][k]["digest"] for r in runs.values()}
        if len(digests) != 1:
            raise SystemExit(f"placements differ between device counts ({label}): {digests}")
        for n, r in runs.items():
            p = r["pickers"][k]
            ratio = base["pickers"][k]["seconds"] / p["seconds"]
            doc["ratios"][f"{label}, {n} devices"] = ratio
            print(f"  {label:12s} {n} device(s) (trials sharded over {r['sharded_over']}): {p['seconds']:.2f} s, "
                  f"{p['placements_per_s']:,.0f} placements/s, {ratio:.2f}x; first call {p['first_call_seconds']:.1f} s")
    print("  placements identical on every device count")
    if args.out:
        from jaxsched.output import write_json_atomic

        write_json_atomic(args.out, doc)
        print(f"wrote {args.out}")


if __name__ == "__main__":
    main()
