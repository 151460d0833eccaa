"""The `jaxsched` command line: parse flags and TOML configs, call the library, write results.

Precedence: built-in defaults < `--config FILE` < flags given on the command line.
Bad flags or configs print one `jaxsched: error: ...` line and exit 2.

Modules: `options` (converters and the shared flags), `config` (config files and
precedence), `common` (what every command does alike), `workloads` (synthetic and trace
inputs), then one module per command.
"""

from __future__ import annotations

import argparse
import re
import sys

from ..devices import exit_after_threads
from ..errors import InputError
from . import cvx, event, evolve, gpushare, policies, report, snapshot, tune
from .common import add_options
from .config import UsageError, load_config, resolve, tomllib

EXIT_USAGE = 2
COMMANDS = {"snapshot": snapshot, "evolve": evolve, "tune": tune, "event": event, "cvx": cvx, "gpushare": gpushare,
            "report": report, "policies": policies}
# Each command's flags (tests and docs list them).
SNAPSHOT_OPTIONS = snapshot.OPTIONS
EVOLVE_OPTIONS = evolve.OPTIONS
TUNE_OPTIONS = tune.OPTIONS
EVENT_OPTIONS = event.OPTIONS
CVX_OPTIONS = cvx.OPTIONS
GPUSHARE_OPTIONS = gpushare.OPTIONS


# A negative number, or a comma-separated list of numbers that starts with one ("-0.05,0.05"):
# a flag's value, never a flag (argparse's own test knows single numbers only).
_UNSIGNED = r"(?:\d+\.?\d*|\.\d+)(?:[eE][-+]?\d+)?"
_NEGATIVE_VALUE = re.compile(rf"^-{_UNSIGNED}(?:,-?{_UNSIGNED})*,?$")


class _Parser(argparse.ArgumentParser):
    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self._negative_number_matcher = _NEGATIVE_VALUE

    def error(self, message):  # one line, exit 2, no usage dump
        self.exit(EXIT_USAGE, f"jaxsched: error: {message} (see `{self.prog} --help`)\n")


def build_parser() -> argparse.ArgumentParser:
    """The argument parser of every subcommand."""
    parser = _Parser(prog="jaxsched", description="Batched JAX evaluation of cluster-scheduling "
                     "placement policies (docs/spec/POLICIES.md).")
    parser.add_argument("--cpu-devices", metavar="N|auto", default="auto",
                        help="on a CPU, split the trials over N devices, one thread each (give it before the "
                        "command; default auto: one per core, or what XLA_FLAGS' "
                        "--xla_force_host_platform_device_count says; results are identical for any N)")
    parser.add_argument("--no-compile-cache", action="store_true",
                        help="do not keep compiled programs in JAX's persistent cache (default: kept in "
                        "$XDG_CACHE_HOME/jaxsched/xla or ~/.cache/jaxsched/xla, or JAX_COMPILATION_CACHE_DIR; "
                        "JAXSCHED_COMPILE_CACHE=0 also turns it off), so that a second run does not compile again")
    multi = parser.add_argument_group("several hosts (jax.distributed; give these before the command)")
    multi.add_argument("--coordinator", metavar="HOST:PORT", help="address of process 0; with --num-processes "
                       "and --process-id, every process runs the same command and the batch is split over the "
                       "devices of all of them (only process 0 prints and writes files)")
    multi.add_argument("--num-processes", type=int, metavar="N", help="processes taking part")
    multi.add_argument("--process-id", type=int, metavar="I", help="this process's number, 0..N-1")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", parser_class=_Parser)
    for name, module in COMMANDS.items():
        p = sub.add_parser(name, help=module.HELP, description=getattr(module, "DESCRIPTION", None))
        if hasattr(module, "OPTIONS"):
            add_options(p, module.OPTIONS)
        if hasattr(module, "add_arguments"):
            module.add_arguments(p)
    return parser


def _set_cpu_devices(args: argparse.Namespace) -> None:
    """--cpu-devices, before any JAX backend starts; a jax.distributed run keeps one device
    per process unless the flag is given."""
    from ..devices import set_cpu_devices

    if args.num_processes and str(args.cpu_devices).lower() == "auto":
        return
    try:
        set_cpu_devices(args.cpu_devices)
    except InputError as e:
        raise UsageError(f"--cpu-devices: {e}") from None


def _start_distributed(args: argparse.Namespace) -> None:
    """jax.distributed.initialize from --coordinator/--num-processes/--process-id; quiet on processes > 0."""
    if not (args.coordinator and args.num_processes and args.process_id is not None):
        raise UsageError("--coordinator, --num-processes and --process-id go together")
    if args.num_processes < 1 or not 0 <= args.process_id < args.num_processes:
        raise UsageError(f"--process-id must be in 0..{args.num_processes - 1}")
    import jax

    from .. import output

    # Before any backend starts; CPU processes talk through gloo (JAX's default CPU collectives).
    jax.distributed.initialize(args.coordinator, args.num_processes, args.process_id)
    if args.process_id > 0:
        args.quiet = True
        output.PRIMARY = False


def main(argv: list[str] | None = None) -> int:
    """Entry point of the `jaxsched` console script: the exit status of the command."""
    parser = build_parser()
    args = parser.parse_args(argv)
    args.argv = argv
    if args.command is None:
        parser.print_help()
        return EXIT_USAGE
    try:
        _set_cpu_devices(args)
        if not args.no_compile_cache and args.command not in ("report", "policies"):
            from ..compile_cache import enable

            enable()
        if args.coordinator or args.num_processes is not None or args.process_id is not None:
            _start_distributed(args)
        return COMMANDS[args.command].run(args)
    except (UsageError, InputError) as e:  # a bad flag, or an invalid workload or setting found by the library
        print(f"jaxsched: error: {e}", file=sys.stderr)
        return EXIT_USAGE
    except KeyboardInterrupt:
        print("jaxsched: interrupted", file=sys.stderr)
        return exit_after_threads(130)
    except BrokenPipeError:  # the reader of stdout went away (`jaxsched policies | head`)
        sys.stderr.close()
        return 141


__all__ = ["CVX_OPTIONS", "EVENT_OPTIONS", "EVOLVE_OPTIONS", "GPUSHARE_OPTIONS", "SNAPSHOT_OPTIONS", "TUNE_OPTIONS",
           "UsageError",
           "build_parser", "load_config", "main", "resolve", "tomllib"]
