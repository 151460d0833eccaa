"""What every command does alike: registering its flags, checking output paths, printing,
and the envelope of its JSON result."""

from __future__ import annotations

import argparse
import os
import shlex
import sys
from typing import Any, Callable

from ..errors import InputError
from .config import UsageError
from .options import SYNTHETIC_ONLY, TRACE_ONLY, Option, dest_flag, flag


def checked(check: Callable[[], None], settings: tuple[str, ...]) -> None:
    """check(), its InputError turned into a UsageError whose message names each of `settings` by its
    flag (a config's check names its fields: sample_k -> --sample-k)."""
    import re

    try:
        check()
    except InputError as e:
        raise UsageError(re.sub(rf"\b({'|'.join(settings)})\b", lambda m: dest_flag(m.group(1)), str(e))) from None


def add_options(parser: argparse.ArgumentParser, options: tuple[Option, ...]) -> None:
    """Register `options` on a subcommand's parser, with --config and --quiet."""
    parser.add_argument("--config", metavar="FILE", help="TOML file of defaults for these flags "
                        "(keys as the flag names, top level or under a table named after the command); "
                        "flags given here override it")
    for opt in options:
        if opt.convert is flag:
            parser.add_argument(f"--{opt.name}", dest=opt.dest, action="store_const", const=True, default=None,
                                help=opt.help.replace("%", "%%"))
            continue
        default = opt.default if not isinstance(opt.default, tuple) else ",".join(map(str, opt.default))
        parser.add_argument(f"--{opt.name}", dest=opt.dest, default=None, metavar=opt.metavar,
                            help=f"{opt.help} (default: {default})".replace("%", "%%"))
    parser.add_argument("--quiet", action="store_true", help="no table on stdout, no progress bar")


def check_writable(value: str | None, flag_name: str = "--json") -> None:
    """A file the command will write must be writable, before any work starts."""
    from ..output import check_writable as check

    if value:
        try:
            check(value)
        except InputError as e:
            raise UsageError(f"{flag_name}: {e}") from None


def check_sources(s: dict[str, Any], given: set[str]) -> None:
    """Synthetic-only and trace-only settings must not be mixed."""
    if s["trace_dir"]:
        both = [dest_flag(k) for k in SYNTHETIC_ONLY if k in given]
        if both:
            raise UsageError(f"{', '.join(both)}: only for the synthetic workload, not with --trace-dir")
    else:
        lone = [dest_flag(k) for k in TRACE_ONLY if k in given]
        if lone:
            raise UsageError(f"{', '.join(lone)}: only for a real trace; give --trace-dir too")


def slot_for(s: dict[str, Any], num_resources: int) -> tuple[float, ...]:
    """The --slot setting for this many resource dimensions; a bad one is a usage error."""
    from ..policies import slot_vector

    try:
        return slot_vector(s["slot"], num_resources)
    except InputError as e:
        raise UsageError(f"--slot: {e}") from None


def printer(quiet: bool) -> Callable[..., None]:
    """print, flushed, or nothing with --quiet."""
    return (lambda *a: None) if quiet else (lambda *a: print(*a, flush=True))


def command_line(argv: list[str] | None) -> str:
    """The command as it was given, shell-quoted."""
    return "jaxsched " + " ".join(shlex.quote(a) for a in (sys.argv[1:] if argv is None else argv))


def settings_doc(s: dict[str, Any], skip=(), drop_unused: bool = True) -> dict:
    """The settings as JSON: tuples as lists, without the output flags in `skip` and (drop_unused)
    the flags of the workload source not in use."""
    unused = (SYNTHETIC_ONLY if s.get("trace_dir") else TRACE_ONLY) if drop_unused else ()
    return {k: (list(v) if isinstance(v, tuple) else v) for k, v in s.items()
            if k != "json" and k not in unused and k not in skip}


def envelope(experiment: str, args: argparse.Namespace, settings: dict, **fields) -> dict:
    """Every result document's head: the jaxsched version, the experiment, the command line and
    the settings, followed by `fields`."""
    from .. import __version__

    return {"jaxsched": __version__, "experiment": experiment, "command": command_line(args.argv),
            "settings": settings, **fields}


def write_result(path: str | None, doc: dict) -> None:
    """Write a result document atomically, where --json asks for one."""
    from ..output import write_json_atomic

    if path:
        write_json_atomic(path, doc)


def describe_devices() -> str:
    """'2 cpu device(s)': the devices JAX runs on."""
    import jax

    dev = jax.devices()
    return f"{len(dev)} {dev[0].platform} device(s)"


SYNTHETIC_TASKS_PER_MACHINE = 14.0  # per unit of rho: the generator gives about 13.2 (2,000 machines, rho 0.75)


def physical_memory() -> int | None:
    """This machine's memory in bytes, or None where the OS does not say."""
    try:
        return os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    except (ValueError, OSError, AttributeError):
        return None


def check_memory(s: dict[str, Any], rows: int, machines: int, tasks: int, resources: int,
                 per_row_task_bytes: int = 4, estimated: bool = False) -> None:
    """Refuse, before any work, a run whose arrays cannot fit in this machine's memory: per
    (row, trial) its free capacity and placements, plus the trials' orders and the workload.
    The message names the flags that set the size."""
    phys = physical_memory()
    trials = int(s.get("trials") or 1)
    need = 4.0 * rows * trials * (2 * machines * resources) + per_row_task_bytes * float(rows) * trials * tasks \
        + 4.0 * trials * tasks + 8.0 * (machines + tasks) * resources
    if phys is None or need <= phys:
        return
    flags = [f"--machines {machines}"] if not s.get("trace_dir") else []
    flags += [f"--trials {trials}"] + ([f"{rows} policy rows"] if rows > 1 else [])
    raise UsageError(f"{' x '.join(flags)}: {machines:,} machines x {'about ' if estimated else ''}{tasks:,} tasks "
                     f"would need about "
                     f"{need / 2**30:,.1f} GiB of memory, more than this machine's {phys / 2**30:,.1f} GiB")


def synthetic_tasks(s: dict[str, Any]) -> int:
    """About how many tasks the synthetic generator draws for --machines and --rho (a bound)."""
    return int(SYNTHETIC_TASKS_PER_MACHINE * s["rho"] * s["machines"]) + 1
