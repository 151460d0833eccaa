"""Benchmark: event-mode replay, 4 policies in one batched JAX loop against the plain-Python reference.

Workload: the Google 2011 sample (all 14 task_events parts, about 19.6 h: 12,551 machines,
573,410 tasks), FIFO queue, sample_k = 64, seed 1, policies best_fit, alpha_evolve,
evo_search, first_fit. An event is an arrival or a completion of one task in one policy's
replay (2 N per policy); events/s counts them over all policies.

- JAX: `event.replay` of the 4 policies at once, timed twice: the first run's wall time
  includes compilation (its first call, compile + 4,096 steps, is reported too), the
  second runs the compiled program (the steady rate a sweep sees).
- reference: tests/reference_event.py (heapq, numpy float64 scores), one policy after the
  other, on the first --prefix tasks by arrival; the JAX replay is timed on the same prefix
  too, so the ratio compares the same input. Placements agree between the two (checked on
  the prefix, except where a float32 near tie decides). The full-sample JAX rate is
  reported beside it.

    python experiments/bench_event.py [--prefix 60000] [--quick]
"""

from __future__ import annotations

import argparse
import os
import sys
import time

import numpy as np

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)
sys.path.insert(0, os.path.join(ROOT, "tests"))

import jax  # noqa: E402
import jax.numpy as jnp  # noqa: E402

from jaxsched import event, rng  # noqa: E402
from jaxsched.output import write_json_atomic  # noqa: E402
from jaxsched.traces import load_trace  # noqa: E402

import reference_event  # noqa: E402
from benchlib import add_cpu_devices_arg, apply_cpu_devices, hardware  # noqa: E402

POLICIES = ("best_fit", "alpha_evolve", "evo_search", "first_fit")


def jax_replay(cluster, workload, k):
    keys = jnp.concatenate([rng.trial_keys(1, event.EXPERIMENT, 1)] * len(POLICIES))
    calls = []
    t0 = time.perf_counter()
    rep = event.replay(cluster, workload, event.EventConfig(POLICIES, sample_k=k), keys,
                       progress=lambda d, n: calls.append(time.perf_counter() - t0))
    wall = time.perf_counter() - t0
    return rep, wall, calls[0], keys


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--trace-dir", default=os.path.join(ROOT, "..", "shared", "data", "google2011"))
    ap.add_argument("--prefix", type=int, default=60_000, help="tasks (by arrival) the reference replays")
    ap.add_argument("--sample-k", type=int, default=64)
    ap.add_argument("--quick", action="store_true", help="prefix 5,000 tasks and no full-sample run")
    ap.add_argument("--out", default=os.path.join(ROOT, "results", "bench_event.json"))
    add_cpu_devices_arg(ap)
    a = ap.parse_args()
    apply_cpu_devices(a.cpu_devices)
    if a.quick:
        a.prefix = 5_000
    trace = load_trace(a.trace_dir)
    order = np.argsort(np.asarray(trace.workload.arrival), kind="stable")
    hw = hardware()
    print(f"bench_event: google2011 sample, {trace.cluster.num_machines} machines, {trace.workload.num_tasks} tasks; "
          f"policies {','.join(POLICIES)}, sample_k={a.sample_k}, FIFO; reference on the first {a.prefix} tasks")
    print(f"hardware: {hw['cpu']}, {hw['cores']} cores, jax {hw['jax']} {hw['backend']} x{hw['devices']}")

    prefix = trace.workload.take(np.sort(order[: a.prefix]))
    rep, wall, first_call, keys = jax_replay(trace.cluster, prefix, a.sample_k)
    events = 2 * prefix.num_tasks * len(POLICIES)
    inp = rep.inputs
    sw = np.asarray(rng.hash_words(keys, rng.STREAM_SAMPLE))
    nw = np.asarray(rng.hash_words(keys, rng.STREAM_NOISE))
    cap = np.asarray(trace.cluster.capacity)
    ref_s, agree = [], []
    for b, name in enumerate(POLICIES):
        t0 = time.perf_counter()
        segs, first, ev, tie = reference_event.replay(cap, inp.demand, inp.arrival, inp.duration,
                                                      np.asarray(prefix.priority)[inp.order], name, a.sample_k,
                                                      False, sw[b], nw[b])
        ref_s.append(time.perf_counter() - t0)
        segs = np.asarray(segs, np.int64).reshape(-1, 4)
        segs[:, 0] = inp.order[segs[:, 0]]
        agree.append("same" if np.array_equal(segs, rep.segments[b]) else ("near tie" if tie else "DIFFERENT"))
        print(f"  reference {name}: {ref_s[-1]:.1f}s, {2 * prefix.num_tasks / ref_s[-1]:,.0f} events/s, "
              f"placements vs JAX: {agree[-1]}", flush=True)
    _, wall_compiled, _, _ = jax_replay(trace.cluster, prefix, a.sample_k)  # the same program, now compiled
    ref_rate = events / sum(ref_s)
    jax_rate = events / wall
    row = {"tasks": prefix.num_tasks, "events": events, "jax_s": wall, "jax_first_call_s": first_call,
           "jax_events_per_s": jax_rate, "reference_s": sum(ref_s), "reference_events_per_s": ref_rate,
           "ratio": jax_rate / ref_rate, "jax_compiled_s": wall_compiled,
           "jax_compiled_events_per_s": events / wall_compiled, "ratio_compiled": events / wall_compiled / ref_rate,
           "agreement": dict(zip(POLICIES, agree)), "steps": rep.steps}
    print(f"prefix {prefix.num_tasks} tasks: JAX {wall:.1f}s incl. compile ({jax_rate:,.0f} events/s; first call "
          f"{first_call:.1f}s), {wall_compiled:.1f}s compiled ({row['jax_compiled_events_per_s']:,.0f} events/s) vs "
          f"reference {sum(ref_s):.1f}s ({ref_rate:,.0f} events/s): ratio {row['ratio']:.1f}x incl. compile, "
          f"{row['ratio_compiled']:.1f}x compiled", flush=True)
    doc = {"benchmark": "event", "hardware": hw, "policies": list(POLICIES), "sample_k": a.sample_k, "prefix": row}
    write_json_atomic(a.out, doc)  # the prefix figures stand even if the full-sample run is cut short
    if not a.quick:
        full, wall_full, first_full, _ = jax_replay(trace.cluster, trace.workload, a.sample_k)
        n = trace.workload.num_tasks
        ev_full = 2 * n * len(POLICIES)
        doc["full"] = {"tasks": n, "events": ev_full, "jax_s": wall_full, "jax_first_call_s": first_full,
                       "jax_events_per_s": ev_full / wall_full, "steps": full.steps,
                       "ratio_vs_prefix_reference_rate": ev_full / wall_full / ref_rate}
        print(f"full sample {n} tasks: JAX {wall_full:.1f}s ({ev_full / wall_full:,.0f} events/s, first call "
              f"{first_full:.1f}s); against the reference's prefix rate: {doc['full']['ratio_vs_prefix_reference_rate']:.1f}x"
              " (the reference's rate is scaled from the prefix)")
    write_json_atomic(a.out, doc)
    print(f"wrote {a.out}")


if __name__ == "__main__":
    main()
