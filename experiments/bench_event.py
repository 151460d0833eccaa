"""Benchmark: event-mode replay, 4 policies in one batched JAX loop against the plain-Python reference.

Workload: the Google 2011 sample (all 14 task_events parts, about 19.6 h: 12,551 machines,
573,410 tasks), FIFO queue, sample_k = 64, seed 1, policies best_fit, alpha_evolve,
evo_search, first_fit. An event is an arrival or a completion of one task in one policy's
replay (2 N per policy); events/s counts them over all policies.

- prefix: the first --prefix tasks by arrival (no lasting queue there), replayed by the
  reference (tests/reference_event.py: heapq, numpy float64 scores, one policy after the
  other) and by JAX (timed twice: with compilation, then compiled); placements compared.
- full sample: the JAX replay of all tasks. From about task 137,000 on the cluster is
  overloaded and the pending queue holds 15,000 to 200,000 tasks: the reference, which
  tries every queued task that passes the bound at every completion (with draws), cannot
  finish (its tries number in the billions). It is therefore run for --ref-budget seconds
  per policy on the full input, and the seconds its drain tries took there (the budget
  less its events at the prefix's cost per event) give its cost per drain try; its time
  on the whole sample is modeled as (cost per event, from the prefix) x events
  + (cost per drain try, from the budget runs) x drain tries, where the drain tries are
  those the JAX replay counted (draws + certain failures: the tests check that they are
  exactly the reference's). The ratio against that model is labeled as such.

    python experiments/bench_event.py [--prefix 60000] [--ref-budget 120] [--quick]
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


def jax_replay(cluster, workload, k, label=""):
    """One batched replay of the 4 policies: (replay, wall s, first progress call s, keys)."""
    keys = jnp.concatenate([rng.trial_keys(1, event.EXPERIMENT, 1)] * len(POLICIES))
    calls, shown = [], [0.0]
    t0 = time.perf_counter()

    def progress(done, total):
        now = time.perf_counter() - t0
        calls.append(now)
        if label and now - shown[0] >= 60:
            shown[0] = now
            print(f"  {label}: {now:.0f}s, {done:,}/{total:,} events of the slowest row ({done / total:.0%})",
                  flush=True)

    rep = event.replay(cluster, workload, event.EventConfig(POLICIES, sample_k=k), keys, progress=progress)
    return rep, time.perf_counter() - t0, calls[0], keys


def reference_run(cap, inp, priority, name, b, k, keys, deadline=None):
    """The reference replay of row b: (segments in workload numbering, near tie, stats, seconds)."""
    sw = np.asarray(rng.hash_words(keys, rng.STREAM_SAMPLE))
    nw = np.asarray(rng.hash_words(keys, rng.STREAM_NOISE))
    stats = {}
    t0 = time.perf_counter()
    segs, _, _, tie = reference_event.replay(cap, inp.demand, inp.arrival, inp.duration, priority[inp.order], name,
                                             k, False, sw[b], nw[b], stats=stats, deadline=deadline)
    secs = time.perf_counter() - t0
    segs = np.asarray(segs, np.int64).reshape(-1, 4)
    segs[:, 0] = inp.order[segs[:, 0]]
    return segs, tie, stats, secs


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--trace-dir", default=os.path.join(ROOT, "..", "shared", "data", "google2011"))
    ap.add_argument("--prefix", type=int, default=None,
                    help="tasks (by arrival) the reference replays (default 60,000; 5,000 with --quick)")
    ap.add_argument("--sample-k", type=int, default=64)
    ap.add_argument("--ref-budget", type=float, default=120.0,
                    help="seconds per policy the reference runs on the full sample (it cannot finish)")
    ap.add_argument("--quick", action="store_true", help="the prefix only (5,000 tasks unless --prefix), no full sample")
    ap.add_argument("--out", default=os.path.join(ROOT, "results", "bench_event.json"))
    add_cpu_devices_arg(ap)
    a = ap.parse_args()
    apply_cpu_devices(a.cpu_devices)
    if a.prefix is None:
        a.prefix = 5_000 if a.quick else 60_000
    trace = load_trace(a.trace_dir)
    order = np.argsort(np.asarray(trace.workload.arrival), kind="stable")
    hw = hardware()
    print(f"bench_event: google2011 sample, {trace.cluster.num_machines} machines, {trace.workload.num_tasks} tasks; "
          f"policies {','.join(POLICIES)}, sample_k={a.sample_k}, FIFO; reference on the first {a.prefix} tasks")
    print(f"hardware: {hw['cpu']}, {hw['cores']} cores, jax {hw['jax']} {hw['backend']} x{hw['devices']}")

    prefix = trace.workload.take(np.sort(order[: a.prefix]))
    rep, wall, first_call, keys = jax_replay(trace.cluster, prefix, a.sample_k)
    events = 2 * prefix.num_tasks * len(POLICIES)
    cap = np.asarray(trace.cluster.capacity)
    ref_s, agree, ref_tries = [], [], 0
    for b, name in enumerate(POLICIES):
        segs, tie, stats, secs = reference_run(cap, rep.inputs, np.asarray(prefix.priority), name, b, a.sample_k, keys)
        ref_s.append(secs)
        ref_tries += stats["drain_tries"]
        agree.append("same" if np.array_equal(segs, rep.segments[b]) else ("near tie" if tie else "DIFFERENT"))
        print(f"  reference {name}: {secs:.1f}s, {2 * prefix.num_tasks / secs:,.0f} events/s, "
              f"placements vs JAX: {agree[-1]}", flush=True)
    _, wall_compiled, _, _ = jax_replay(trace.cluster, prefix, a.sample_k)  # the same program, now compiled
    ref_rate = events / sum(ref_s)
    jax_rate = events / wall
    row = {"tasks": prefix.num_tasks, "events": events, "jax_s": wall, "jax_first_call_s": first_call,
           "jax_events_per_s": jax_rate, "reference_s": sum(ref_s), "reference_events_per_s": ref_rate,
           "reference_drain_tries": ref_tries, "ratio": jax_rate / ref_rate, "jax_compiled_s": wall_compiled,
           "jax_compiled_events_per_s": events / wall_compiled, "ratio_compiled": events / wall_compiled / ref_rate,
           "agreement": dict(zip(POLICIES, agree)), "steps": rep.steps}
    print(f"prefix {prefix.num_tasks} tasks: JAX {wall:.1f}s incl. compile ({jax_rate:,.0f} events/s; first call "
          f"{first_call:.1f}s), {wall_compiled:.1f}s compiled ({row['jax_compiled_events_per_s']:,.0f} events/s) vs "
          f"reference {sum(ref_s):.1f}s ({ref_rate:,.0f} events/s): ratio {row['ratio']:.1f}x incl. compile, "
          f"{row['ratio_compiled']:.1f}x compiled", flush=True)
    doc = {"benchmark": "event", "hardware": hw, "policies": list(POLICIES), "sample_k": a.sample_k, "prefix": row}
    write_json_atomic(a.out, doc)  # the prefix figures stand even if a later part is cut short
    if a.quick:
        print(f"wrote {a.out}")
        return

    # The reference in overload: --ref-budget seconds per policy on the full input.
    full_inputs = event.prepare(trace.workload, False)
    per_event = sum(ref_s) / events  # s per event of the reference where queues stay short
    budget = {"seconds_per_policy": a.ref_budget, "events": 0, "drain_tries": 0, "seconds": 0.0}
    for b, name in enumerate(POLICIES):
        _, _, stats, secs = reference_run(cap, full_inputs, np.asarray(trace.workload.priority), name, b, a.sample_k,
                                          keys, deadline=time.perf_counter() + a.ref_budget)
        for key, value in (("events", stats["events"]), ("drain_tries", stats["drain_tries"]), ("seconds", secs)):
            budget[key] += value
        print(f"  reference {name} on the full sample, stopped after {secs:.0f}s: {stats['events']:,} events, "
              f"{stats['drain_tries']:,} drain tries", flush=True)
    per_try = max(budget["seconds"] - per_event * budget["events"], 0.0) / max(budget["drain_tries"], 1)
    budget.update(seconds_per_event=per_event, seconds_per_drain_try=per_try)
    doc["reference_budget"] = budget
    print(f"reference cost model: {per_event * 1e6:.0f} us per event (prefix), {per_try * 1e6:.1f} us per drain try "
          f"(from {budget['drain_tries']:,} tries in {budget['seconds']:.0f}s)", flush=True)
    write_json_atomic(a.out, doc)

    full, wall_full, first_full, _ = jax_replay(trace.cluster, trace.workload, a.sample_k, label="full sample")
    n = trace.workload.num_tasks
    ev_full = 2 * n * len(POLICIES)
    tries = full.drain_draws + full.drain_certain
    modeled = per_event * ev_full + per_try * float(tries.sum())
    doc["full"] = {"tasks": n, "events": ev_full, "jax_s": wall_full, "jax_first_call_s": first_full,
                   "jax_events_per_s": ev_full / wall_full, "steps": full.steps,
                   "drain_draws": dict(zip(POLICIES, full.drain_draws.tolist())),
                   "drain_certain": dict(zip(POLICIES, full.drain_certain.tolist())),
                   "reference_modeled_s": modeled, "ratio_vs_modeled_reference": modeled / wall_full,
                   "ratio_vs_prefix_reference_rate": ev_full / wall_full / ref_rate}
    print(f"full sample {n} tasks: JAX {wall_full:.1f}s incl. compile ({ev_full / wall_full:,.0f} events/s, first "
          f"call {first_full:.1f}s); drain tries {int(tries.sum()):,}, of which drawn {int(full.drain_draws.sum()):,}")
    print(f"  reference modeled on the full sample: {modeled:,.0f}s ({modeled / 86400:.1f} days): ratio "
          f"{modeled / wall_full:,.0f}x (model, not a run); against the reference's prefix rate (no overload): "
          f"{doc['full']['ratio_vs_prefix_reference_rate']:.2f}x")
    write_json_atomic(a.out, doc)
    print(f"wrote {a.out}")


if __name__ == "__main__":
    main()
