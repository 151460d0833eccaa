"""`jaxsched tune`: a family genome tuned by gradient on the differentiable relaxation, or by evolution."""

from __future__ import annotations

import argparse
import time

import numpy as np

from .common import check_sources, check_writable, envelope, printer, settings_doc, write_result
from .config import UsageError, resolve
from .evolve import EVOLVE_ONLY, OPTIONS as EVOLVE_OPTIONS, run_search, tuning_inputs
from .options import Option, choice, dest_flag, float_list, nonneg_int, positive_float

GRAD_OPTIONS = (
    Option("start", float_list, (1.0, 1.0, 1.0, 1.0, 0.0, 0.0, 1.0, 1.0), "grad: the genome to start from "
           "(w0..w5, p1, p2; default alpha_evolve)", "G"),
    Option("steps", nonneg_int, 20, "grad: optimizer steps", "N"),
    Option("learning-rate", positive_float, 0.05, "grad: Adam learning rate", "LR"),
    Option("temperature", positive_float, 0.1, "grad: softmax temperature of the relaxation, in units of the "
           "spread of the feasible machines' scores", "TAU"),
    Option("sharpness", positive_float, 0.01, "grad: width of the relaxation's soft feasibility sigmoid, in "
           "normalized resource units", "K"),
)
OPTIONS = (Option("method", choice("grad", "evolve"), "grad", "grad: gradient ascent on the differentiable "
                  "relaxation (optax Adam); evolve: the same search as `jaxsched evolve`", "M"),) \
    + GRAD_OPTIONS + EVOLVE_OPTIONS


HELP = "tune a family genome: by gradient on a relaxation, or by evolution"
DESCRIPTION = ("Tune a genome of the parameterized family. --method grad: Adam on a differentiable "
               "relaxation of the packing, reporting every step's hard (argmax) objective, which is "
               "what counts; --method evolve: `jaxsched evolve`.")


def run(args: argparse.Namespace) -> int:
    """Tune a family genome by gradient on the relaxation (or by evolution)."""
    s, given = resolve(args, "tune", OPTIONS)
    other = [o.dest for o in GRAD_OPTIONS] if s["method"] == "evolve" else list(EVOLVE_ONLY)
    wrong = [dest_flag(k) for k in other if k in given]
    if wrong:
        raise UsageError(f"{', '.join(wrong)}: not used by --method {s['method']}")
    if s["method"] == "evolve":
        return run_search(s, given, args, skip=[o.dest for o in GRAD_OPTIONS])
    check_sources(s, given)
    check_writable(s["json"])
    from ..evolve import canonical
    from ..policies import GENOME_NAMES, get_policy
    from ..relax import RelaxConfig, tune

    from .workloads import user_policies

    user_policies(s)
    family = s["policy"] == "family"
    if family:
        if len(s["start"]) != len(GENOME_NAMES):
            raise UsageError(f"--start: expected {len(GENOME_NAMES)} numbers ({','.join(GENOME_NAMES)}), "
                             f"got {len(s['start'])}")
        if not np.all(np.isfinite(s["start"])) or min(s["start"][6:]) <= 0:
            raise UsageError("--start: expected finite numbers with powers p1, p2 > 0")
    else:
        if "start" in given:
            raise UsageError("--start: a user policy starts from its parameters (set them with --policy-params)")
        try:
            names = get_policy(s["policy"]).param_names
        except KeyError as e:
            raise UsageError(f"--policy: {e.args[0]}") from None
        if not names:
            raise UsageError(f"--policy: policy {s['policy']!r} has no parameters to tune")
    cfg = RelaxConfig(temperature=s["temperature"], sharpness=s["sharpness"], policy=s["policy"])
    t0 = time.perf_counter()
    train, held, source, slot = tuning_inputs(s, args.quiet)
    say = printer(args.quiet)
    say(f"tune --method grad{'' if family else ' --policy ' + cfg.policy}: train {train.cluster.num_machines} "
        f"machines x {train.workload.num_tasks} tasks; "
        f"{s['steps']} Adam steps, lr {s['learning_rate']:g}, temperature {cfg.temperature:g}, sharpness "
        f"{cfg.sharpness:g}, {s['trials']} trials; hard objective with sample_k={s['sample_k'] or 'full scan'}")
    coords = "w0..w5, p1, p2" if family else ", ".join(names)
    say(f"{'step':>4}  {'relaxed%':>8}  {'hard%':>8}  {'elapsed':>7}  genome ({coords})")
    shown = (lambda g: canonical(np.asarray(g))[0]) if family else (lambda g: g)

    def report(h):
        say(f"{h.index:>4}  {100 * h.relaxed:8.3f}  {100 * h.hard:8.3f}  {time.perf_counter() - t0:6.0f}s  "
            + ",".join(f"{x:.3g}" for x in shown(h.genome)))

    result = tune(train, held, s["start"] if family else None, steps=s["steps"], learning_rate=s["learning_rate"],
                  trials=s["trials"], seed=s["seed"], sample_k=s["sample_k"], slot=slot, cfg=cfg, on_step=report)
    skip = EVOLVE_ONLY + (() if family else ("start",))
    doc = envelope("tune", args, settings_doc(s, skip) | {"slot": list(slot)}, method="grad", workload=source)
    write_result(s["json"], doc | result.to_json())
    say(f"best hard objective {100 * result.hard:.3f}% (start {100 * result.start_hard:.3f}%); held-out "
        f"{100 * result.heldout:.3f}% (start {100 * result.start_heldout:.3f}%), {time.perf_counter() - t0:.0f}s")
    if s["json"]:
        say(f"wrote {s['json']}")
    return 0
