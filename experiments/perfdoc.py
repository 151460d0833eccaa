"""The detail tables of docs/performance.md, generated from the benchmarks' JSON under results/.

`run_all.py --docs` writes them (with the headline table) between the page's
`<!-- perf:begin -->` and `<!-- perf:end -->` markers; nothing here is typed by hand.
"""

from __future__ import annotations

import json
import os
import re


def _load(results: str, name: str) -> dict | None:
    path = os.path.join(results, name)
    if not os.path.exists(path):
        return None
    with open(path) as f:
        return json.load(f)


def _hw(d: dict) -> str:
    hw = d.get("hardware", {})
    devices = f", {hw['devices']} {hw.get('backend', 'cpu')} device(s)" if "devices" in hw else ""
    jax = f", jax {hw['jax']}" if "jax" in hw else ""
    return f"{hw.get('cpu', '?')}, {hw.get('cores', '?')} cores{devices}{jax}"


def _table(header: list[str], rows: list[list]) -> list[str]:
    out = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    return out + ["| " + " | ".join(str(c) for c in r) + " |" for r in rows]


def _g(x, digits: int = 3) -> str:
    return f"{x:,.{digits}g}" if isinstance(x, (int, float)) else str(x)


def snapshot(d: dict, src: str) -> list[str]:
    w, base = d["workload"], d["baseline_numba_single_thread"]
    rows = []
    for r in d["results"]:
        full = r["picker"] == "full scan"
        rate = r["machine_scores_per_s"] if full else r["placements_per_s"]
        ref = base["full_scan_machine_scores_per_s"] if full else base["sample64_placements_per_s"]
        rows.append([r["picker"], r["batch"], f"{_g(rate)} {'machine-scores' if full else 'placements'}/s",
                     _g(ref), f"**{r['ratio_vs_numba']:.2f}x**", f"{r['compile_s']:.1f} s"])
    return [f"### Snapshot packing (`{src}`)", "",
            f"{w['machines']:,} machines ({w['source']}), {w['policy']}, first {w['tasks_full']:,} tasks (full scan) / "
            f"{w['tasks_sampled']:,} (sample_k=64); baseline: a single-thread numba loop of the same policy. "
            f"{_hw(d)}.", ""] + _table(["picker", "batch", "jaxsched", "numba loop", "ratio", "compile"], rows)


def trace_load(d: dict, src: str) -> list[str]:
    t, r, m, s = d["median_wall_s"], d["rows_per_s"], d["peak_rss_mb"], d["speedup_vs_csv"]
    rows = [[k, f"{t[k]:.3g} s", _g(r[k]), f"{m[k]:.0f} MB", "" if k == "csv" else f"**{s[k]:.1f}x**"]
            for k in ("csv", "cold", "warm")]
    return [f"### Trace load (`{src}`)", "",
            f"{d['files']} Google 2011 task_events parts, {d['event_rows']:,} rows; cold = parse and write the "
            f"Parquet cache, warm = read it; baseline: the `csv` module. {_hw(d)}.", ""] + _table(
        ["load", "median", "rows/s", "peak RSS", "vs csv"], rows)


def compaction(d: dict, src: str) -> list[str]:
    w, seq = d["workload"], d["sequential"]
    rows = [[b["depth"], f"{b['run_s']:.1f} s", b["packings"], f"{b['compile_s']:.1f} s",
             f"{seq['scaled_total_s']:.0f} s", f"**{b['speedup_vs_sequential']:.2f}x**"] for b in d["batched"]]
    out = [f"### Compaction and inflation (`{src}`)", "",
           f"{w['machines']:,} machines, {w['tasks']:,} tasks (rho {w['rho']}), {len(w['policies'])} policies x "
           f"{w['trials']} trials, {w['inflate_mode']}-mode inflation; baseline: the sequential binary search, "
           f"{seq['searches_measured']} of {seq['searches_total']} searches run and scaled. {_hw(d)}.", ""]
    out += _table(["depth", "batched", "packings", "compile", "sequential", "ratio"], rows)
    if "inside_blocks" in d:
        out += ["", f"Time inside packing blocks only: {d['inside_blocks']['ratio']:.2f}x."]
    return out


def evolve(d: dict, src: str) -> list[str]:
    rows = []
    for r in d["results"]:
        rng = r.get("ratio_range")
        rows.append([r["sample_k"] or "full scan", f"{r['batched_evals_per_s']:.3g}/s",
                     f"{r['one_at_a_time_evals_per_s']:.3g}/s", f"**{r['ratio']:.2f}x**",
                     f"{rng[0]:.2f}-{rng[1]:.2f}x" if rng else "", f"{r['block_ratio']:.2f}x" if "block_ratio" in r
                     else "", "yes" if r["same_fitness"] else "**no**"])
    return [f"### Evolution (`{src}`)", "",
            f"Population {d['population']}, {d['machines']:,} machines, {d['tasks']:,} tasks (rho {d['rho']}); "
            f"baseline: the same genomes packed one at a time ({d['sequential_genomes']} run and scaled), alternating "
            f"with the batched runs; median of {d['repeats']} pairs. {_hw(d)}.", ""] + _table(
        ["sample_k", "batched", "one at a time", "ratio", "range", "inside blocks", "same fitness"], rows)


def event(d: dict, src: str) -> list[str]:
    p = d["prefix"]
    rows = [[f"first {p['tasks']:,} tasks", f"{p.get('jax_compiled_s', float('nan')):.1f} s compiled "
             f"({_g(p.get('jax_compiled_events_per_s', 0))} events/s); {p['jax_s']:.1f} s with compilation",
             f"{p['reference_s']:.1f} s ({_g(p['reference_events_per_s'])} events/s)",
             f"**{p.get('ratio_compiled', float('nan')):.1f}x** compiled, {p['ratio']:.1f}x with compilation"]]
    if "full" in d:
        f = d["full"]
        drawn = sum(f["drain_draws"].values())
        tries = drawn + sum(f["drain_certain"].values())
        rows.append([f"all {f['tasks']:,} tasks", f"{f['jax_s']:.0f} s ({_g(f['jax_events_per_s'])} events/s; "
                     f"{tries:.3g} drain tries, {drawn:.3g} drawn)",
                     f"cannot finish: modeled {f['reference_modeled_s']:.3g} s",
                     f"{f['ratio_vs_modeled_reference']:,.0f}x against the model"])
    return [f"### Event mode (`{src}`)", "",
            f"Google 2011 sample, policies {', '.join(d['policies'])}, sample_k={d['sample_k']}, FIFO; baseline: the "
            f"heapq reference engine (tests/reference_event.py), one policy after the other. {_hw(d)}.", ""] + _table(
        ["workload", "jaxsched", "reference", "ratio"], rows)


def event_cvx(d: dict, src: str) -> list[str]:
    c, w = d["cvx"], d["workload"]
    rows = [[name] + [f"{100 * f[k]:.1f}%" if k.startswith("utilization") else f"{f[k]:,.1f}" for k in
                      ("utilization_cpu", "utilization_mem", "latency_p50_s", "latency_p99_s", "pending_mean")]
            for name, f in d["figures"].items()]
    cmd = re.sub(r"\S*/\.\./shared/", "../shared/", re.sub(r" --json \S+| --quiet", "", d["command"]))
    return [f"### CvxCluster in event mode (`{src}`)", "",
            f"`jaxsched {cmd}`: {w.get('tasks', 0):,} tasks on {w.get('machines', 0):,} machines, one process "
            f"with a warm trace cache. {_hw(d)}.", "",
            f"End to end **{d['wall_s']:.0f} s** (goal {d['goal_s']:.0f} s: {'met' if d['within_goal'] else 'not met'}): "
            f"the scoring rows' batched replay {d['scoring_s']:.0f} s ({100 * d['scoring_share']:.0f}%), the "
            f"CvxCluster rounds {d['cvxcluster_s']:.0f} s ({100 * d['cvxcluster_share']:.0f}%). CvxCluster: "
            f"{c['rounds']:,.0f} rounds of 1 s, {c['tasks_per_s']:,.0f} tasks placed per second of allocation "
            f"({d['tasks_per_s_over_paper']:.3f}x the paper's 19,000), round {1e3 * c['round_s_mean']:.1f} ms mean, "
            f"{1e3 * c['round_s_p99']:.1f} ms p99 (the paper: 574 ms per round, on 785 servers at about 100,000x the "
            f"arrival rate), {c['candidates_mean']:.0f} tasks per round on average ({c['candidates_max']:,.0f} at "
            f"most).", ""] + _table(["row", "util cpu", "util mem", "latency p50 s", "p99 s", "pending mean"], rows)


def cvx(d: dict, src: str) -> list[str]:
    out = [f"### CvxCluster (`{src}`)", "", f"{_hw(d)}.", ""]
    rows = [[f"seed {r['seed']}: {r['tasks']} tasks x {r['servers']} servers", f"{1e3 * r['cvx_seconds']:.0f} ms",
             f"{r['mip_objective']:.0f} (bound {r['mip_bound']:.0f}) in {r['mip_seconds']:.0f} s",
             f"{r['gap_to_bound_pct']:.2f}%", f"**{r['speed_ratio']:,.0f}x**"] for r in d.get("vs_mip", [])]
    out += _table(["vs HiGHS MIP", "CvxCluster", "HiGHS MIP", "gap to bound", "time ratio"], rows)
    if "vs_lp" in d:
        v = d["vs_lp"]
        out += ["", f"Price stage against the HiGHS LP ({v['servers']} servers, {v['tasks']:,} tasks, {v['shapes']} "
                f"shapes): JAX dual {v['jax_seconds']:.2f} s ({v['jax_iterations']} steps, "
                f"{v['dual_over_lp_pct']:+.3f}% of the optimum) against {v['highs_seconds']:.0f} s: "
                f"**{v['speed_ratio']:.0f}x**."]
    if "scale" in d:
        s = d["scale"]
        out += ["", f"At scale ({s['servers']:,} servers, {s['tasks']:,} tasks, {s['groups']:,} groups): stage 1 "
                f"{s['price_seconds']:.1f} s ({s['price_iterations']} steps), stage 2 {s['place_seconds']:.1f} s = "
                f"{s['place_tasks_per_s']:,.0f} tasks/s, {100 * s['objective_over_dual']:.1f}% of the dual bound."]
    runs = [r | {"servers": r.get("servers", 785)} for r in d.get("online", []) + d.get("online_large", [])]
    if runs:
        out += [""] + _table(["online", "servers", "solve mean", "tasks/s", "queue max", "compiling rounds"], [
            [f"x{r['rate_multiplier']:g}", f"{r['servers']:,}", f"{1e3 * r['solve_s_mean']:.0f} ms",
             f"{r['tasks_per_s']:,.0f}", f"{r['queue_max']:,}", r["compile_rounds"]] for r in runs])
    return out


def sharding(d: dict, src: str) -> list[str]:
    rows = [[k, f"{v:.2f}x"] for k, v in d["ratios"].items()]
    return [f"### Devices (`{src}`)", "", f"The same packing on 1 and 2 devices, each in its own process, identical "
            f"placements. {_hw(d)}.", ""] + _table(["run", "speed vs 1 device"], rows)


def policy_cost(d: dict, src: str) -> list[str]:
    rel = d["relative_to_best_fit"]
    rows = [[name, f"{v:.2f}"] for name, v in sorted(rel.items(), key=lambda kv: kv[1])]
    w = d["workload"]
    return [f"### Policy cost (`{src}`)", "", f"Full-scan step time relative to best_fit ({w['machines']:,} machines, "
            f"{w['trials']} trials), which balances the device shares. {_hw(d)}.", ""] + _table(
        ["policy", "relative cost"], rows)


def relaxation(d: dict, src: str) -> list[str]:
    rows = [[r["temperature"], r["coordinate"], f"{r['spearman']:.2f}", f"{r['sign_agree']} of {r['sign_counted']}"]
            for r in d["runs"]]
    return [f"### Gradient relaxation (`{src}`)", "", f"Lines through alpha_evolve on a {d['machines']}-machine "
            f"synthetic snapshot at rho {d['rho']}: rank agreement of the relaxed and the hard objective (Spearman), "
            f"and how often the gradient's sign matches the hard objective's direction. {_hw(d)}.", ""] + _table(
        ["temperature", "coordinate", "Spearman", "sign agrees"], rows)


def gpushare(d: dict, src: str) -> list[str]:
    rows = [[p, f"{d['alloc_at_100'][p]:.2f}%", f"{v:.2f}%", f"{d['diff_pp'][p]:+.2f}"]
            for p, v in d["published_at_100"].items()]
    runs = ", ".join(f"{x:.1f}" for x in d["runs_s"])
    return [f"### GPU sharing, the FGD paper (`{src}`)", "",
            f"The openb default pod list on {d['workload']['nodes']:,} GPU nodes, {d['workload']['policies']} policies x "
            f"{d['workload']['seeds']} seeds, `jaxsched gpushare` end to end (runs: {runs} s): median "
            f"**{d['wall_s']:.1f} s** against the paper's simulator's stated {d['reference_s']:,.0f} s "
            f"(60 runs x {d['reference_s_per_run']:.0f} s on 2 vCPU): **{d['ratio_vs_stated_reference']:,.0f}x** "
            f"against that stated cost (the simulator cannot run here). {_hw(d)}.", ""] + _table(
        ["policy", "allocation at 100% (mean of seeds)", "published", "difference, points"], rows) + _search(d)


def _search(d: dict) -> list[str]:
    s = d.get("search")
    if not s:
        return []
    f, g = s["family"], s["FGD"]
    return ["", f"Search throughput (`jaxsched gpushare --search`'s generation): {s['population']} random genomes x "
            f"{s['seeds']} seeds of the default list, in process, compiled, median of {len(f['times_s'])}: "
            f"**{f['runs_per_s']:.2f} runs/s** ({f['median_s']:.0f} s; FGD's rows alone at the same width "
            f"{g['runs_per_s']:.2f} runs/s, so the family costs {s['family_over_fgd_time']:.2f}x FGD; the family's "
            f"genomes run as programs of about 32 rows, FGD's single policy as one program). The standard "
            f"search ({s['standard_search_runs']:,} runs) would take **{s['standard_search_s'] / 60:.0f} min** at "
            f"that rate, against its goal of {s['standard_search_goal_s'] / 60:.0f} min: a projection from one "
            f"generation on one list, not a timed search (the held-out runs and the other lists' lengths come on top)."]


def user_policy(d: dict, src: str) -> list[str]:
    rows = [[mode, f"{m['median_s']['best_fit']:.3f} s", f"{m['median_s']['user_best_fit']:.3f} s",
             f"{m['user_over_builtin']:.3f}", "yes" if m["identical_placements"] else "NO"]
            for mode, m in d["modes"].items()]
    w = d["workload"]
    return [f"### A user policy against the built-in (`{src}`)", "",
            f"`t.u[0] + t.u[1]` registered with `jaxsched.policy` against best_fit, synthetic {w['machines']:,} "
            f"machines, {w['tasks']:,} tasks, batch {w['batch']}, medians, side by side in one run (goal: at most "
            f"1.10). {_hw(d)}.", ""] + _table(["mode", "best_fit", "user policy", "user / built-in",
                                               "identical placements"], rows)


def peer(d: dict, src: str) -> list[str]:
    rows = []
    for name, c in d["cases"].items():
        s = c["summary"]
        placed = s["placed_equal_peer"]
        rows.append([f"{name}: {c['title']}", f"{s['cli_cold_s']:.2f} s", f"{s['cli_s']:.2f} s", f"{s['inproc_s']:.3f} s",
                     f"{s['peerN_pack_s']:.3f} s", f"{s['peerN_wall_s']:.2f} s", f"{s['peer1_pack_s']:.3f} s",
                     f"**{s['inproc_over_peerN']:.2f}x**", f"**{s['e2e_over_peerN_e2e']:.2f}x**",
                     f"{sum(placed.values())}/{len(placed)}"])
    hw = d["hardware"]
    return [f"### Against the C++ peer (`{src}`)", "",
            f"The C++ packer of `../shared/bench/peer` on the same cores ({d['peer_threads']} threads), reading "
            f"jaxsched's trial orders and draws; jaxsched on {hw.get('devices')} {hw.get('backend')} device(s). "
            f"Medians of {d['pairs']} paired rounds; ratios are jaxsched / peer within a round (below 1: jaxsched "
            f"faster). In process: the second `pack` call; e2e: the whole `jaxsched snapshot` process, a second run "
            f"(compiled programs from the persistent cache), warm trace cache; cold: an empty compilation cache. "
            f"{_hw(d)}.", ""] + _table(
        ["case", "CLI cold", "CLI e2e", "in process", "peer pack", "peer e2e", "peer 1 thread", "in process / peer",
         "e2e / peer e2e", "placed = peer"], rows)


def profile_sampled(d: dict, src: str) -> list[str]:
    rows = [[name, f"{share * 100:.1f}%", f"{share * d['untraced_us_per_step']:.1f} us"]
            for name, share in d["phases"].items()]
    return [f"### Where a sampled step's time goes (`{src}`)", "",
            f"`python experiments/profile_sampled.py`: {', '.join(d['policies'])} x {d['trials']} trials, "
            f"sample_k={d['sample_k']}, {d['machines']:,} machines x {d['tasks']:,} tasks (case a of the peer) on one "
            f"CPU device; window {d['window']}, {d['steps']:,} steps ({d['tasks'] / max(d['steps'], 1):.1f} tasks per "
            f"row and step), {d['fallback_scans']:,} fallback scans, {d['untraced_us_per_step']:.0f} us a step "
            f"untraced, {d['kernels_per_step']} kernels a step. Kernel times from JAX's profiler, each kernel traced "
            f"back to the line of jaxsched that made it; the shares apply to the untraced step. {_hw(d)}.", ""] + \
        _table(["phase", "share", "per step"], rows)


SECTIONS = (("bench_peer.json", peer), ("profile_sampled.json", profile_sampled), ("bench_snapshot.json", snapshot), ("bench_trace_load.json", trace_load),
            ("bench_compaction.json", compaction), ("bench_evolve.json", evolve), ("bench_event.json", event),
            ("bench_event_cvx.json", event_cvx),
            ("bench_cvx.json", cvx), ("bench_sharding.json", sharding), ("bench_policy_cost.json", policy_cost),
            ("bench_gpushare.json", gpushare), ("bench_user_policy.json", user_policy), ("relaxation_sweep.json", relaxation))
GPU_DIR = "gpu_h200"


def detail_tables(results: str) -> str:
    """Every benchmark's table from its JSON under `results` (CPU), then the GPU runs' (results/gpu_h200)."""
    out = ["## Details (CPU)", ""]
    for name, fn in SECTIONS:
        d = _load(results, name)
        if d is not None:
            out += fn(d, f"results/{name}") + [""]
    gpu = os.path.join(results, GPU_DIR)
    if os.path.isdir(gpu):
        out += ["## Details (GPU)", ""]
        for name, fn in SECTIONS:
            d = _load(gpu, name)
            if d is not None:
                out += fn(d, f"results/{GPU_DIR}/{name}") + [""]
    return "\n".join(out)
