"""`jaxsched evolve`: (mu + lambda) evolutionary search over the family's genome."""

from __future__ import annotations

import argparse
import dataclasses
import time
from typing import Any

from .common import check_sources, check_writable, checked, envelope, printer, settings_doc, slot_for, \
    write_result
from .config import resolve
from .options import JSON, MACHINES, POLICY_FILE, POLICY_PARAMS, RHO, SAMPLE_K, SEED, SLOT, TRACE_WINDOW_OPTIONS, TRIALS, Option, choice, path, \
    positive_float, positive_int
from .workloads import tuning_problems, user_policies

OPTIONS = (
    MACHINES,
    RHO.but(default=1.0, help="synthetic load in (0, 10] (default 1.0: at lower loads most policies place everything and "
            "fitness cannot tell genomes apart)"),
    SEED.but(help="random seed of the search, the trials and (synthetic) the workload"),
    Option("generations", positive_int, 20, "generations after the initial population", "G"),
    Option("population", positive_int, 64, "genomes packed per generation (lambda), all in one batched "
           "packing", "N"),
    Option("parents", positive_int, 16, "genomes kept from each generation (mu of mu + lambda)", "MU"),
    Option("sigma", positive_float, 0.3, "mutation scale: Gaussian steps on weights scaled to max |w| = 1, "
           "log-normal steps on the powers", "S"),
    Option("policy", path, "family", "the parameterized policy searched: the family, or a user policy of "
           "--policy-file with finite bounds on its parameters", "NAME"),
    POLICY_FILE, POLICY_PARAMS,
    Option("strategy", choice("mu_lambda", "cma_es", "snes", "open_es"), "mu_lambda", "the search: (mu + lambda), "
           "or an evosax evolution strategy from alpha_evolve's point (CMA-ES, SNES, OpenAI-ES; --sigma is its "
           "initial scale, --parents unused)", "S"),
    TRIALS.but(default=2, help="shuffled task orders each genome is scored over (common random numbers)"),
    SAMPLE_K.but(default=64, help="picker of the fitness packing: K sampled machines, full scan if none fits "
                 "(0: always full scan, slow on a trace-sized cluster)"),
    SLOT.but(help="standard slot per dimension"),
    JSON.but(help="write the search (settings, history, champion, alpha_evolve) as JSON"),
) + TRACE_WINDOW_OPTIONS
EVOLVE_ONLY = ("generations", "population", "parents", "sigma", "strategy")


HELP = "evolve genomes of the parameterized scoring family"
DESCRIPTION = ("(mu + lambda) evolutionary search over the family's genome (w0..w5, p1, p2): fitness "
               "is the demand-weighted placed fraction on the peak snapshot; a held-out snapshot is "
               "reported every generation.")


def tuning_inputs(s: dict[str, Any], quiet: bool):
    """(train, held-out, JSON description, slot vector) of a tuning run; a bad --slot exits 2."""
    train, held, source = tuning_problems(s, quiet)
    return train, held, source, slot_for(s, train.cluster.num_resources)


def run(args: argparse.Namespace) -> int:
    """Evolve family genomes on the peak snapshot; report held-out fitness against alpha_evolve."""
    s, given = resolve(args, "evolve", OPTIONS)
    return run_search(s, given, args, skip=())


def run_search(s: dict[str, Any], given: set[str], args: argparse.Namespace, skip) -> int:
    """The evolutionary search of these settings (also `tune --method evolve`); `skip`: settings
    of the command that the search does not use, left out of the JSON."""
    from .. import progress
    from ..evolve import EvolveConfig, evolve
    from ..policies import get_policy

    check_sources(s, given)
    check_writable(s["json"])
    user_policies(s)
    cfg = EvolveConfig(generations=s["generations"], population=s["population"], parents=s["parents"],
                       sigma=s["sigma"], trials=s["trials"], sample_k=s["sample_k"], seed=s["seed"],
                       strategy=s.get("strategy", "mu_lambda"), policy=s.get("policy", "family"))
    checked(cfg.check, ("generations", "population", "parents", "sigma", "trials", "sample_k", "strategy"))
    t0 = time.perf_counter()
    train, held, source, slot = tuning_inputs(s, args.quiet)
    cfg = dataclasses.replace(cfg, slot=slot)
    say = printer(args.quiet)
    say(f"evolve: train {train.cluster.num_machines} machines x {train.workload.num_tasks} tasks, held-out "
        f"{held.cluster.num_machines} x {held.workload.num_tasks}; population {cfg.population}, parents "
        f"{cfg.parents}, {cfg.generations} generations, strategy {cfg.strategy}, {cfg.trials} trials, sample_k={cfg.sample_k or 'full scan'}")
    base = "alpha_evolve" if cfg.policy == "family" else f"{cfg.policy}'s defaults"
    coords = "w0..w5, p1, p2" if cfg.policy == "family" else ", ".join(get_policy(cfg.policy).param_names)
    say(f"{'gen':>3}  {'best%':>8}  {'median%':>8}  {'held-out%':>9}  {'elapsed':>7}  best genome ({coords})")

    def report(g):
        genome = ",".join(f"{x:.3g}" for x in g.genome)
        say(f"{g.index:>3}  {100 * g.best:8.3f}  {100 * g.median:8.3f}  {100 * g.heldout:9.3f}  "
            f"{time.perf_counter() - t0:6.0f}s  {genome}")

    bar = None if args.quiet else progress.maybe("packing population")
    result = evolve(train, held, cfg, on_generation=report, progress=bar)
    doc = envelope("evolve", args, settings_doc(s, skip) | {"slot": list(cfg.slot)}, workload=source)
    write_result(s["json"], doc | result.to_json())
    say(f"champion: train {100 * result.train:.3f}% vs {base} {100 * result.baseline_train:.3f}%; "
        f"held-out {100 * result.heldout:.3f}% vs {base} {100 * result.baseline_heldout:.3f}% "
        f"({result.evaluations} genome evaluations, {time.perf_counter() - t0:.0f}s)")
    if s["json"]:
        say(f"wrote {s['json']}")
    return 0
