"""Experiment: does FGD's integer truncation help or hurt? FGD with its score at other resolutions.

FGD's score is floor(100 sigmoid(dF / 1000)) (docs/spec/GPU_SHARING.md, 4.6): 100 levels, so
many feasible nodes tie at the top and the random node rank decides among them. Here the same
policy runs with floor(L sigmoid(dF / 1000)) for several L (L = 100 is FGD itself, checked to
place exactly as the registered FGD does; a very large L is FGD without truncation, whose ties
are only the exact ones). Fitness is the family search's: the mean GPU allocation over arrived
90..130% on the search's training lists and seeds (`jaxsched.gpushare.search`), with the
allocation at exactly 100% beside it.

This is a what-if study, not a policy: the score of `jaxsched.gpushare.frag` is swapped in this
process only (`frag._score`), and JAX's caches are cleared between resolutions.

    python experiments/gpushare_fgd_resolution.py [--levels 25,50,100,200,100000]
        [--trace-dir ../shared/data/alibaba-gpu-v2023] [--out results/gpushare_fgd_resolution.json]
"""

from __future__ import annotations

import argparse
import os
import sys
import time

import numpy as np

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)

import jax  # noqa: E402
import jax.numpy as jnp  # noqa: E402
from benchlib import hardware  # noqa: E402

from jaxsched.gpushare import frag  # noqa: E402
from jaxsched.gpushare import search as gs  # noqa: E402
from jaxsched.output import write_json_atomic  # noqa: E402

FGD_SCORE = frag._score


def at_levels(levels: float):
    """FGD's score function with `levels` levels instead of 100."""
    def score(fs, F, new):
        z = (F - new).astype(jnp.float64) / (fs.total * 1000.0)
        return jnp.floor(levels * (1.0 / (1.0 + jnp.exp(-z)))).astype(jnp.int32)
    return score


def run(lists, seeds, levels):
    """{list: {"fitness": [per seed], "at_100": [per seed]}} of FGD at `levels` (None: the registered FGD)."""
    frag._score = FGD_SCORE if levels is None else at_levels(levels)
    jax.clear_caches()
    try:
        out = {}
        for name in lists.pods:
            r = gs.allocation(lists, name, ("FGD",), None, seeds)
            out[name] = {"fitness": r["fitness"][0].tolist(), "at_100": r["at_100"][0].tolist()}
        return out
    finally:
        frag._score = FGD_SCORE
        jax.clear_caches()


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--levels", default="25,50,100,200,100000")
    ap.add_argument("--trace-dir", default=os.path.join(ROOT, "..", "shared", "data", "alibaba-gpu-v2023"))
    ap.add_argument("--out", default=os.path.join(ROOT, "results", "gpushare_fgd_resolution.json"))
    args = ap.parse_args()
    levels = [float(x) for x in args.levels.split(",")]
    cfg = gs.GpuSearchConfig()
    lists = gs.Lists.load(args.trace_dir, cfg.train_lists)
    seeds = list(cfg.train_seeds)
    t0 = time.perf_counter()
    fgd = run(lists, seeds, None)
    rows = []
    for L in levels:
        r = run(lists, seeds, L)
        if L == 100:  # the same formula as FGD's: the same placements, so the same figures
            assert r == fgd, "FGD at 100 levels differs from the registered FGD"
        mean = float(np.mean([np.mean(v["fitness"]) for v in r.values()]))
        lead = {n: float(np.mean(r[n]["fitness"]) - np.mean(fgd[n]["fitness"])) for n in r}
        rows.append({"levels": L, "lists": r, "fitness": mean, "lead_pp": lead,
                     "mean_lead_pp": float(np.mean(list(lead.values())))})
        print(f"{L:>9g} levels: fitness {mean:.3f}%  lead over FGD {rows[-1]['mean_lead_pp']:+.3f} pp  "
              + "  ".join(f"{n} {v:+.2f}" for n, v in lead.items()), flush=True)
    doc = {"experiment": "gpushare_fgd_resolution", "hardware": hardware(),
           "workload": {"trace_dir": os.path.relpath(args.trace_dir, ROOT), "lists": list(cfg.train_lists),
                        "seeds": seeds, "fitness": "mean GPU allocation % over arrived 90..130%"},
           "fgd": {"lists": fgd, "fitness": float(np.mean([np.mean(v["fitness"]) for v in fgd.values()]))},
           "rows": rows, "wall_s": time.perf_counter() - t0}
    write_json_atomic(args.out, doc)
    print(f"FGD (100 levels) fitness {doc['fgd']['fitness']:.3f}%; wrote {args.out}")


if __name__ == "__main__":
    main()
