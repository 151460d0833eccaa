"""Experiment: the GPU-sharing family searches side by side, at the same evaluation budget.

Reads the records of `jaxsched gpushare --search --strategy S --json results/gpushare_search_S.json`
(one per strategy, all with the same --generations, --population and protocol) and writes
the best and median fitness of each against the genome evaluations, beside FGD's training fitness:
a plot (docs/img/gpushare_search_curves.svg) and a Markdown table on stdout. Records that differ in
budget or protocol are refused, since their curves could not be compared.

    python experiments/gpushare_search_curves.py [--strategies cma_es,snes,open_es,mu_lambda]
        [--results results] [--plot docs/img/gpushare_search_curves.svg]
"""

from __future__ import annotations

import argparse
import json
import os
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def load(results: str, strategies: list[str]) -> dict[str, dict]:
    """Each strategy's record, checked to share one budget and protocol (SystemExit if not)."""
    records = {}
    for s in strategies:
        path = os.path.join(results, f"gpushare_search_{s}.json")
        if not os.path.exists(path):
            sys.exit(f"gpushare_search_curves: {path} is missing: run jaxsched gpushare --search --strategy {s}")
        with open(path) as f:
            records[s] = json.load(f)
    keys = lambda r: (r["settings"]["generations"], r["settings"]["population"], r["search"]["protocol"])
    first = strategies[0]
    for s in strategies[1:]:
        if keys(records[s]) != keys(records[first]):
            sys.exit(f"gpushare_search_curves: {s}'s budget or protocol differs from {first}'s")
    return records


def table(records: dict[str, dict]) -> str:
    """Markdown: per strategy, the best fitness after each generation, its champion and the goal."""
    any_record = next(iter(records.values()))
    fgd = any_record["search"]["FGD"]["train_fitness"]
    gens = max(len(r["search"]["history"]) for r in records.values())
    head = "| generation | evaluations | " + " | ".join(f"{s} best (median)" for s in records) + " |"
    lines = [head, "|" + "---|" * (2 + len(records))]
    for g in range(gens):
        cells, evals = [], set()
        for r in records.values():
            h = r["search"]["history"]
            if g < len(h):
                evals.add(h[g]["evaluations"])
                cells.append(f"{h[g]['best']:.3f} ({h[g]['median']:.3f})")
            else:
                cells.append("")
        # evosax strategies also score their start point once: one evaluation ahead of (mu + lambda)
        lines.append(f"| {g} | {' / '.join(str(e) for e in sorted(evals, reverse=True))} | " + " | ".join(cells) + " |")
    lines += ["", f"FGD's training fitness: {fgd:.3f}%.", "",
              "| strategy | runs | wall | runs/s | champion's training fitness | above FGD | held-out lead (pp) "
              "| worst list (pp) | goal met |", "|---|---|---|---|---|---|---|---|---|"]
    for s, r in records.items():
        sr, goal = r["search"], r["goal"]
        champ = sr["champion"]["train_fitness"]
        lines.append(f"| {s} | {sr['runs']:,} | {sr['wall_s'] / 60:.0f} min | {sr['runs_per_s']:.2f} | {champ:.3f} "
                     f"| {champ - fgd:+.3f} | {goal['heldout_mean_lead_pp']:+.3f} | {goal['worst_list']} "
                     f"{goal['worst_lead_pp']:+.3f} | {'yes' if goal['met'] else 'no'} |")
    return "\n".join(lines)


def plot(records: dict[str, dict], path: str) -> None:
    """Best (solid) and generation median (dashed) fitness against evaluations, FGD as a line."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fgd = next(iter(records.values()))["search"]["FGD"]["train_fitness"]
    fig, ax = plt.subplots(figsize=(7, 4))
    for i, (s, r) in enumerate(records.items()):
        h = r["search"]["history"]
        ev = [x["evaluations"] for x in h]
        color = f"C{i}"
        ax.plot(ev, [x["best"] for x in h], "-o", color=color, ms=3, label=f"{s} best")
        ax.plot(ev, [x["median"] for x in h], "--", color=color, alpha=0.6, label=f"{s} median")
    ax.axhline(fgd, color="k", lw=0.8, label="FGD")
    ax.set_xlabel("genome evaluations (each: 5 training lists x 4 seeds)")
    ax.set_ylabel("fitness: GPU allocation %, arrived 90..130%")
    ax.legend(fontsize=7, ncol=2)
    ax.grid(alpha=0.3)
    fig.tight_layout()
    os.makedirs(os.path.dirname(path) or ".", exist_ok=True)
    tmp = path + ".tmp.svg"
    fig.savefig(tmp, metadata={"Date": None})  # no time stamp: the same records give the same file
    os.replace(tmp, path)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--strategies", default="cma_es,snes,open_es,mu_lambda")
    ap.add_argument("--results", default=os.path.join(ROOT, "results"))
    ap.add_argument("--plot", default=os.path.join(ROOT, "docs", "img", "gpushare_search_curves.svg"))
    args = ap.parse_args()
    records = load(args.results, [s for s in args.strategies.split(",") if s])
    print(table(records))
    plot(records, args.plot)
    print(f"\nplot: {args.plot}")


if __name__ == "__main__":
    main()
