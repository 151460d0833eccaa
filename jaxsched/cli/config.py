"""Settings of a command: built-in defaults < `--config FILE` < flags given on the command line."""

from __future__ import annotations

import argparse
from typing import Any

try:
    import tomllib
except ModuleNotFoundError:  # Python 3.10
    import tomli as tomllib

from .options import Option


class UsageError(Exception):
    """A bad flag, config key or value: reported as one line, exit 2."""


def load_config(path: str, command: str, options: tuple[Option, ...]) -> dict[str, Any]:
    """Read a TOML config for `command`, checking every key and value against `options`.

    Keys sit at the top level or in a table named after the command; other commands'
    tables are ignored.

    Raises:
        UsageError: a missing or malformed file, an unknown key or a bad value, naming it.
    """
    try:
        with open(path, "rb") as f:
            data = tomllib.load(f)
    except FileNotFoundError:
        raise UsageError(f"config {path}: no such file") from None
    except (OSError, tomllib.TOMLDecodeError) as e:
        raise UsageError(f"config {path}: {e}") from None
    table = data.get(command, data) if isinstance(data.get(command), dict) else data
    known = {o.dest: o for o in options}
    out = {}
    for key, value in table.items():
        if isinstance(value, dict):
            continue  # another command's table
        opt = known.get(key.replace("-", "_"))
        if opt is None:
            raise UsageError(f"config {path}: unknown key {key!r} for `{command}` "
                             f"(known: {', '.join(o.name for o in options)})")
        try:
            out[opt.dest] = opt.convert(value)
        except (TypeError, ValueError) as e:
            raise UsageError(f"config {path}: key {key!r}: {e}") from None
    return out


def resolve(args: argparse.Namespace, command: str, options: tuple[Option, ...]) -> tuple[dict[str, Any], set[str]]:
    """Final settings (defaults, then the config file, then explicit flags) and the keys set explicitly.

    Raises:
        UsageError: a bad config or flag value, naming it.
    """
    settings = {o.dest: o.default for o in options}
    given: set[str] = set()
    if args.config:
        from_config = load_config(args.config, command, options)
        settings.update(from_config)
        given.update(from_config)
    for opt in options:
        raw = getattr(args, opt.dest)
        if raw is not None:
            try:
                settings[opt.dest] = opt.convert(raw)
            except (TypeError, ValueError) as e:
                raise UsageError(f"--{opt.name}: {e}") from None
            given.add(opt.dest)
    return settings, given
