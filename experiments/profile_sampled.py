"""Profile: where the time of a sampled step goes (`jaxsched.speculative`), by phase of the step.

Packs the peer's case a (Google 2011 sample, busiest instant, sample_k=64, best_fit,
alpha_evolve, cosine, first_fit, epvm x 5 trials) on one CPU device, once to compile, once
timed, once under JAX's profiler. Each kernel of the compiled chunk is traced back, through the
HLO's stack frames, to the line of jaxsched that made it, and its run time is summed by phase:
the chunk's draws, tasks and fit bound, the gathers of drawn machines, the scoring, the pick,
the fallback scans, the conflict tests, placing, and the loop's own small kernels. The
profiler keeps a bounded number of events, so each kernel's time is scaled by the steps (or
chunks) the trace missed; the shares are applied to the untimed step.

    python experiments/profile_sampled.py [--policy LIST] [--tasks N] [--out results/profile_sampled.json]
"""

from __future__ import annotations

import argparse
import collections
import glob
import gzip
import json
import os
import re
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.dirname(HERE))
sys.path.insert(0, HERE)

DUMP = tempfile.mkdtemp(prefix="profile_sampled_")
os.environ["XLA_FLAGS"] = (os.environ.get("XLA_FLAGS", "") + f" --xla_dump_to={DUMP} --xla_dump_hlo_as_text"
                           " --xla_dump_hlo_module_re=.*chunk.*").strip()

# (phase, test on the innermost jaxsched frame (file, function, source line)), first match wins.
PHASES = (
    ("fallback scans", lambda f, fn, src: fn.startswith("_scan_") or fn in ("pick", "first_best", "_first_holding")),
    ("pick (lowest index of the top score)", lambda f, fn, src: fn == "lowest_best"),
    ("scoring (fused into the join of all policies' scores)",
     lambda f, fn, src: f.endswith("policies.py") or "concatenate(scores" in src),
    ("bound and memo tests", lambda f, fn, src: fn == "_may_fit" or "hopeless" in src or "memo" in src),
    ("gathers: drawn machines' free capacity", lambda f, fn, src: "free.reshape(-1).at[f_at]" in src),
    ("gathers: drawn machines' inverse capacity (slices of the chunk's table)",
     lambda f, fn, src: "inv_tab[trial" in src),
    ("gathers: the window's draws and demands", lambda f, fn, src: "idx = draws" in src or "d = demands" in src),
    ("conflicts (draws against the window's earlier picks)",
     lambda f, fn, src: fn == "_conflicts" or "stop =" in src or "kept =" in src),
    ("placing and recording", lambda f, fn, src: "free = free" in src or "machine" in src or "landed" in src
     or "at = " in src or "keep =" in src),
)


def frames(hlo: str):
    """frame id -> (file, function, line) of the frame's own location, from the HLO's tables (its
    innermost user frame: the parent links of this dump do not name callers, so none are walked)."""
    files = dict(re.findall(r"^(\d+) \"(.*)\"$", hlo.split("FunctionNames")[0].split("FileNames")[1], re.M))
    funcs = dict(re.findall(r"^(\d+) \"(.*)\"$", hlo.split("FileLocations")[0].split("FunctionNames")[1], re.M))
    locs = {}
    for m in re.finditer(r"^(\d+) \{file_name_id=(\d+) function_name_id=(\d+) line=(\d+)", hlo, re.M):
        locs[m.group(1)] = (files[m.group(2)], funcs[m.group(3)], int(m.group(4)))
    table = hlo.split("StackFrames")[1]
    out = {}
    for m in re.finditer(r"^(\d+) \{file_location_id=(\d+)", table, re.M):
        file, fn, line = locs[m.group(2)]
        if "/jaxsched/" in file:
            out[m.group(1)] = (file, fn, line)
    return out


def phase_of(file, fn, line, sources):
    if file and file not in sources:
        with open(file) as f:
            sources[file] = f.read().split("\n")
    src = sources[file][line - 1] if file else ""
    for name, test in PHASES:
        if test(file, fn, src):
            return name
    return "loop control and bookkeeping"


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--policy", default="best_fit,alpha_evolve,cosine,first_fit,epvm")
    ap.add_argument("--trace-dir", default=os.path.join(os.path.dirname(os.path.dirname(HERE)), "shared", "data",
                                                         "google2011"))
    ap.add_argument("--tasks", type=int, default=0,
                    help="profile only the snapshot's first N tasks (0: all; the trace of all is large)")
    ap.add_argument("--window", type=int, default=0, help="the window W (default 0: speculative.window_for)")
    ap.add_argument("--top", type=int, default=0, help="also print the N costliest kernels and their source lines")
    ap.add_argument("--out", default=os.path.join(os.path.dirname(HERE), "results", "profile_sampled.json"))
    args = ap.parse_args()
    from jaxsched.devices import set_cpu_devices

    set_cpu_devices(1)
    import jax
    import numpy as np

    import jaxsched
    from jaxsched import rng, speculative
    from jaxsched.filters import Filters, snapshot_tasks
    from jaxsched.packing import PackConfig, pack
    from jaxsched.policies import policy_names

    from benchlib import hardware

    trace = jaxsched.load_trace(args.trace_dir)
    index, _ = snapshot_tasks(trace.workload, Filters(days=1), trace.window[0], "busiest")
    snap = trace.take(index[:args.tasks] if args.tasks > 0 else index)
    keys = rng.trial_keys(1, "snapshot", 5)
    cfg = PackConfig(policies=policy_names(args.policy), sample_k=64, window=args.window)
    pack(snap.cluster, snap.workload, cfg, keys)  # compile
    calls, chunk = [], speculative._chunk
    speculative._chunk = lambda *a, **k: calls.append(1) or chunk(*a, **k)
    t = time.perf_counter()
    pack(snap.cluster, snap.workload, cfg, keys)
    untraced = time.perf_counter() - t
    speculative._chunk = chunk
    stats = dict(speculative.LAST_STATS)
    out_dir = tempfile.mkdtemp(prefix="profile_trace_")
    with jax.profiler.trace(out_dir, create_perfetto_trace=True):
        pack(snap.cluster, snap.workload, cfg, keys)
    events = json.load(gzip.open(glob.glob(f"{out_dir}/**/*.trace.json.gz", recursive=True)[0]))
    events = events["traceEvents"] if isinstance(events, dict) else events

    hlo_files = sorted(glob.glob(os.path.join(DUMP, "*chunk*.cpu_after_optimizations.txt")), key=os.path.getmtime)
    hlo = open(hlo_files[-1]).read()
    frame_of = dict(re.findall(r"%([\w.\-]+) = .*?stack_frame_id=(\d+)", hlo))
    op_name = dict(re.findall(r"%([\w.\-]+) = .*?op_name=\"([^\"]*)\"", hlo))
    where = frames(hlo)
    dur, count = collections.Counter(), collections.Counter()
    for e in events:
        a = e.get("args", {})
        if e.get("ph") == "X" and a.get("hlo_module") == "jit_chunk" and "hlo_op" in a:
            dur[a["hlo_op"]] += e["dur"]
            count[a["hlo_op"]] += 1
    # The loops a kernel runs inside (a kernel without a name is taken as one of the step's).
    depth = {op: len(re.findall(r"while/(?:body|cond)", op_name[op])) if op in op_name else 1 for op in count}
    sources, phase_of_op = {}, {}
    for op in count:
        f = where.get(frame_of.get(op, ""), ("", "", 0))
        if op_name.get(op, "").endswith("/while"):
            phase_of_op[op] = "loop control and bookkeeping"
        elif depth[op] == 0:
            phase_of_op[op] = "once a chunk: its draws, tasks and fit bound"
        else:
            phase_of_op[op] = phase_of(*f, sources) if f[0] else "loop control and bookkeeping"
    # The profiler keeps a bounded number of events: scale each kernel by the steps (or chunks) it missed.
    steps = stats.get("steps", 0)
    once = [count[op] for op in count if op_name.get(op) == "jit(chunk)/while"]  # the chunk's own loop
    per_step = [count[op] for op in count if depth[op] == 1]
    traced_chunks, traced_steps = max(once, default=1), max(per_step, default=1)
    by_phase, by_op = collections.Counter(), collections.Counter()
    for op, d in dur.items():
        in_step = depth[op] > 0
        by_op[op] = d * (steps / traced_steps if in_step else len(calls) / traced_chunks)
        by_phase[phase_of_op[op]] += by_op[op]
    total = sum(by_phase.values())
    doc = dict(benchmark="profile_sampled", hardware=hardware(), policies=list(cfg.policies), trials=5, sample_k=64,
               window=cfg.window or speculative.window_for(snap.cluster.num_machines, 64),
               machines=snap.cluster.num_machines, tasks=snap.workload.num_tasks, untraced_pack_s=untraced,
               steps=steps, fallback_scans=stats.get("scans"), untraced_us_per_step=untraced / max(steps, 1) * 1e6,
               phases={k: v / total for k, v in by_phase.most_common()},
               chunks=len(calls), traced=dict(steps=traced_steps, chunks=traced_chunks),
               kernels_per_step=round(sum(c for op, c in count.items() if depth[op] > 0)
                                      / max(traced_steps, 1), 1))
    print(f"{len(cfg.policies)} policies x 5 trials on one CPU device ({doc['hardware']['cpu']}): {untraced:.2f} s "
          f"untraced, {steps} steps ({snap.workload.num_tasks / max(steps, 1):.1f} tasks per row and step, window "
          f"{doc['window']}), {doc['untraced_us_per_step']:.1f} us a step, {stats.get('scans')} fallback scans, "
          f"{doc['kernels_per_step']} kernels a step; the trace kept {traced_steps} steps of {steps} and "
          f"{traced_chunks} chunks of {len(calls)} (kernel times scaled up to all)")
    for k, v in doc["phases"].items():
        print(f"  {v * 100:5.1f}%  {k}")
    for op, d in by_op.most_common(args.top):
        f = where.get(frame_of.get(op, ""), ("", "", 0))
        print(f"  {d / total * 100:5.1f}%  {op} ({phase_of_op[op]}; {os.path.basename(f[0])}:{f[2]} {f[1]})")
    os.makedirs(os.path.dirname(args.out), exist_ok=True)
    with open(args.out + ".tmp", "w") as f:
        json.dump(doc, f, indent=1)
    os.replace(args.out + ".tmp", args.out)
    print(f"wrote {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
