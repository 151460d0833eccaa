"""Benchmark: jaxsched against the C++ peer (../shared/bench/peer), side by side, in paired rounds.

The peer is the packer a user would otherwise pick: a C++20 loop in the style of the original
cluster-sim, reading jaxsched's own trial orders and counter-hash draws (so both sides make the
same placements; the script checks the placed counts). Cases, as the peer's README names them:

  a  Google 2011 sample, busiest instant (12,551 machines x 151,930 tasks), sample_k=64,
     best_fit, alpha_evolve, cosine, first_fit, epvm x 5 trials
  b  the same with the full scan
  c  synthetic 2,000 machines, rho 0.75 (19,819 tasks), all 21 policies x 5 trials, full scan

Each round runs, in turn: the jaxsched CLI end to end (`jaxsched snapshot ... --no-compaction
--no-inflation`, a second run: its compiled programs come from the persistent cache), the
peer with --threads N (whole process and its pool's time), jaxsched's packing alone in process
(the second `pack` call, peer's inproc.py) and the peer with one thread. Before the rounds, one
cold CLI run with an empty compilation cache. Ratios are taken within a round (the machine's
speed drifts), then their median. jaxsched uses one CPU device per core; the peer as many
threads (default: the cores).

--gpu (when a GPU is lent): cases a and b with all 21 policies x 48 trials (1,008 rows),
jaxsched on the GPU against the peer on every core; adds machine-scores/s of the full scan.

    python experiments/bench_peer.py [--pairs 3] [--cases a,b,c] [--threads N] [--gpu]
                                     [--out results/bench_peer.json]

Needs g++ (Debian's `g++`) to build the peer; without it, the script says so and exits 0.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(HERE)
sys.path.insert(0, HERE)

FIVE = "best_fit,alpha_evolve,cosine,first_fit,epvm"
CASES = {
    "a": dict(title="Google 2011 busiest, sample_k=64, 5 policies x 5 trials", workload="google", k=64, policy=FIVE,
              trials=5),
    "b": dict(title="Google 2011 busiest, full scan, 5 policies x 5 trials", workload="google", k=0, policy=FIVE,
              trials=5),
    "c": dict(title="synthetic 2000 machines rho 0.75, full scan, 21 policies x 5 trials", workload="synth", k=0,
              policy="all", trials=5),
}
GPU_CASES = {
    "a48": dict(title="Google 2011 busiest, sample_k=64, 21 policies x 48 trials", workload="google", k=64,
                policy="all", trials=48),
    "b48": dict(title="Google 2011 busiest, full scan, 21 policies x 48 trials", workload="google", k=0,
                policy="all", trials=48),
}
# The goals, as ratios jaxsched / peer (<= goal passes).
GOALS = {"a": dict(inproc=1.0, e2e=3.0), "b": dict(inproc=1.0, e2e=1.2), "c": dict(inproc=1.0)}


def peer_dir() -> str:
    return os.environ.get("PEER_DIR") or os.path.join(os.path.dirname(REPO), "shared", "bench", "peer")


def run(cmd, env=None, timeout=3600):
    """(wall seconds, stdout) of a command that must succeed."""
    t = time.perf_counter()
    p = subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=timeout)
    wall = time.perf_counter() - t
    if p.returncode != 0:
        raise SystemExit(f"bench_peer: {' '.join(cmd)} exited {p.returncode}:\n{p.stderr[-3000:]}")
    return wall, p.stdout


def loadavg() -> str:
    with open("/proc/loadavg") as f:
        return " ".join(f.read().split()[:3])


def med(xs):
    return statistics.median(xs) if xs else float("nan")


def build_peer(src: str, work: str) -> str | None:
    """The peer binary under `work`, built with g++ if missing; None (with a message) without g++."""
    binary = os.path.join(work, "peer")
    if os.path.exists(binary):
        return binary
    if shutil.which(os.environ.get("CXX", "g++")) is None:
        print("bench_peer: g++ not found, so the C++ peer cannot be built: nothing measured "
              "(install Debian's g++, or set CXX)", file=sys.stderr)
        return None
    run(["sh", os.path.join(src, "build.sh")], env=dict(os.environ, PEER_WORK=work))
    return binary


def commands(case: dict, peer_bin: str, data: str, tmp: str, threads: int):
    trace = os.environ.get("GOOGLE2011_DIR") or os.path.join(os.path.dirname(REPO), "shared", "data", "google2011")
    trials = ["--trials", str(case["trials"]), "--seed", "1"]
    if case["workload"] == "google":
        src, peer_in = ["--trace-dir", trace, "--days", "1"], os.path.join(data, "google.bin")
    else:
        src, peer_in = ["--machines", "2000", "--rho", "0.75"], os.path.join(data, "synth.bin")
    out_json = os.path.join(tmp, "cli.json")
    cli = [os.path.join(os.path.dirname(sys.executable), "jaxsched"), "snapshot", *src, "--policy", case["policy"],
           *trials, "--sample-k", str(case["k"]), "--no-compaction", "--no-inflation", "--quiet", "--json", out_json]
    inproc = [sys.executable, os.path.join(peer_dir(), "inproc.py"), case["workload"], "--policy",
              _names(case["policy"]), "--sample-k", str(case["k"]), "--trials", str(case["trials"]), "--seed", "1"]
    peer = lambda n: [peer_bin, "--input", peer_in, "--policy", case["policy"], "--trials", str(case["trials"]),
                      "--sample-k", str(case["k"]), "--threads", str(n), "--quiet"]
    return cli, out_json, inproc, peer


def _names(spec: str) -> str:
    from jaxsched.policies import policy_names

    return ",".join(policy_names(spec))


def measure_case(name: str, case: dict, peer_bin: str, data: str, pairs: int, threads: int, env: dict) -> dict:
    tmp = tempfile.mkdtemp(prefix=f"bench_peer_{name}_")
    cli, out_json, inproc, peer = commands(case, peer_bin, data, tmp, threads)
    cold_env = dict(env, JAX_COMPILATION_CACHE_DIR=os.path.join(tmp, "xla"))
    print(f"== case {name}: {case['title']}", flush=True)
    cold, _ = run(cli, cold_env)
    print(f"  cold CLI run (empty compilation cache): {cold:.2f}s", flush=True)
    rows = []
    for r in range(pairs):
        row = dict(load_before=loadavg())
        row["cli_s"], _ = run(cli, cold_env)
        with open(out_json) as f:
            cli_doc = json.load(f)
        row["cli_placed"] = {p: [int(x) for x in v["placed"]["trials"]] for p, v in cli_doc["policies"].items()}
        wall, out = run(peer(threads), env)
        pn = json.loads(out)
        row["peerN_wall_s"], row["peerN_pack_s"] = wall, pn["pack_s"]
        _, out = run(inproc, env)
        ip = json.loads(out)
        row["inproc_pack_s"], row["inproc_first_s"], row["inproc_load_s"] = ip["pack_s"], ip["first_call_s"], \
            ip["load_s"]
        row["inproc_placed"] = ip["placed"]
        wall, out = run(peer(1), env)
        p1 = json.loads(out)
        row["peer1_wall_s"], row["peer1_pack_s"] = wall, p1["pack_s"]
        row["peer_placed"] = {p: v["placed"] for p, v in p1["results"].items()}
        row["peerN_same_as_peer1"] = {p: v["placed"] for p, v in pn["results"].items()} == row["peer_placed"]
        row["load_after"] = loadavg()
        rows.append(row)
        print(f"  round {r + 1}: CLI {row['cli_s']:.2f}s | peer {threads}T {row['peerN_wall_s']:.2f}s (pack "
              f"{row['peerN_pack_s']:.3f}) | in process {row['inproc_pack_s']:.3f}s (first call "
              f"{row['inproc_first_s']:.2f}) | peer 1T pack {row['peer1_pack_s']:.3f} | load {row['load_before']} -> "
              f"{row['load_after']}", flush=True)
    ratio = lambda a, b: [x[a] / x[b] for x in rows]
    summary = dict(
        cli_cold_s=cold, cli_s=med([x["cli_s"] for x in rows]), inproc_s=med([x["inproc_pack_s"] for x in rows]),
        inproc_first_call_s=med([x["inproc_first_s"] for x in rows]),
        peerN_pack_s=med([x["peerN_pack_s"] for x in rows]), peerN_wall_s=med([x["peerN_wall_s"] for x in rows]),
        peer1_pack_s=med([x["peer1_pack_s"] for x in rows]),
        inproc_over_peerN=med(ratio("inproc_pack_s", "peerN_pack_s")),
        inproc_over_peerN_range=[min(ratio("inproc_pack_s", "peerN_pack_s")), max(ratio("inproc_pack_s", "peerN_pack_s"))],
        e2e_over_peerN_e2e=med(ratio("cli_s", "peerN_wall_s")),
        inproc_over_peer1=med(ratio("inproc_pack_s", "peer1_pack_s")),
        cold_e2e_over_peerN_e2e=cold / med([x["peerN_wall_s"] for x in rows]),
        steps=p1["steps"], machine_scores=p1["machine_scores"], fallback_scans_peer=p1["fallback_scans"])
    summary["machine_scores_per_s"] = dict(jaxsched=summary["machine_scores"] / summary["inproc_s"],
                                           peer=summary["machine_scores"] / summary["peerN_pack_s"])
    last = rows[-1]
    summary["placed_equal_peer"] = {p: last["cli_placed"][p] == last["peer_placed"][p] for p in last["peer_placed"]}
    summary["inproc_equal_cli"] = last["inproc_placed"] == last["cli_placed"]
    goals = GOALS.get(name, {})
    summary["goals"] = {k: dict(goal=g, ratio=summary["inproc_over_peerN" if k == "inproc" else "e2e_over_peerN_e2e"],
                                met=summary["inproc_over_peerN" if k == "inproc" else "e2e_over_peerN_e2e"] <= g)
                        for k, g in goals.items()}
    return dict(case, rounds=rows, summary=summary)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--pairs", type=int, default=3, help="paired rounds per case (default 3)")
    ap.add_argument("--cases", default="a,b,c", help="comma-separated cases (default a,b,c; --gpu: a48,b48)")
    ap.add_argument("--threads", type=int, default=os.cpu_count(), help="the peer's threads (default: the cores)")
    ap.add_argument("--gpu", action="store_true", help="cases a48,b48 on the GPU against the peer on every core")
    ap.add_argument("--out", default=os.path.join(REPO, "results", "bench_peer.json"))
    args = ap.parse_args()
    src = peer_dir()
    if not os.path.isdir(src):
        print(f"bench_peer: no peer at {src} (set PEER_DIR): nothing measured", file=sys.stderr)
        return 0
    work = os.environ.get("PEER_WORK") or os.path.join(tempfile.gettempdir(), "jaxsched-peer")
    os.makedirs(os.path.join(work, "data"), exist_ok=True)
    peer_bin = build_peer(src, work)
    if peer_bin is None:
        return 0
    cases = GPU_CASES if args.gpu else CASES
    names = list(cases) if args.gpu and args.cases == "a,b,c" else args.cases.split(",")
    trials = max(cases[n]["trials"] for n in names)
    data = os.path.join(work, f"data{trials}" if trials != 5 else "data")
    env = dict(os.environ, JAXSCHED_CACHE_DIR=os.environ.get("JAXSCHED_CACHE_DIR", os.path.join(work, "cache")),
               PEER_PYTHON=sys.executable, PEER_WORK=work)
    if not (os.path.exists(os.path.join(data, "google.bin")) and os.path.exists(os.path.join(data, "synth.bin"))):
        run([sys.executable, os.path.join(src, "export.py"), data, "--trials", str(trials)], env)
    # Warm jaxsched's trace cache (a cold load parses the CSVs: not what either side measures).
    run([sys.executable, "-c", "import jaxsched, sys; jaxsched.load_trace(sys.argv[1])",
         os.environ.get("GOOGLE2011_DIR") or os.path.join(os.path.dirname(REPO), "shared", "data", "google2011")], env)

    from benchlib import apply_cpu_devices, hardware

    apply_cpu_devices("auto")  # the devices the CLI and inproc.py run on, as the header reports them
    doc = dict(benchmark="peer", started=time.strftime("%Y-%m-%dT%H:%M:%S%z"), pairs=args.pairs,
               peer_threads=args.threads, hardware=hardware(), cases={})
    for name in names:
        doc["cases"][name] = measure_case(name, cases[name], peer_bin, data, args.pairs, args.threads, env)
    os.makedirs(os.path.dirname(args.out), exist_ok=True)
    with open(args.out + ".tmp", "w") as f:
        json.dump(doc, f, indent=1)
    os.replace(args.out + ".tmp", args.out)

    print(f"\nmedians over {args.pairs} paired rounds; ratios = jaxsched / peer within a round, then their median "
          f"(< 1: jaxsched faster); peer on {args.threads} threads, jaxsched on {doc['hardware'].get('devices')} "
          f"{doc['hardware'].get('backend')} devices, {doc['hardware']['cpu']}")
    print(f"{'case':5s} {'CLI cold':>9s} {'CLI e2e':>8s} {'in proc':>8s} {'peer NT':>8s} {'peer e2e':>9s} "
          f"{'peer 1T':>8s} {'in proc/peer':>13s} {'e2e/peer e2e':>13s} {'placed = peer':>14s}")
    for name, c in doc["cases"].items():
        s = c["summary"]
        print(f"{name:5s} {s['cli_cold_s']:9.2f} {s['cli_s']:8.2f} {s['inproc_s']:8.3f} {s['peerN_pack_s']:8.3f} "
              f"{s['peerN_wall_s']:9.2f} {s['peer1_pack_s']:8.3f} {s['inproc_over_peerN']:13.2f} "
              f"{s['e2e_over_peerN_e2e']:13.2f} {sum(s['placed_equal_peer'].values()):>8d}/{len(s['placed_equal_peer'])}")
        for k, g in s["goals"].items():
            print(f"      goal {k}: <= {g['goal']}x, measured {g['ratio']:.2f}x: {'met' if g['met'] else 'NOT met'}")
    print(f"wrote {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
