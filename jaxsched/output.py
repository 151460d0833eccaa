"""Writing results: JSON written atomically, and the readable stdout table."""

from __future__ import annotations

import json
import os
import tempfile

from .errors import InputError


def check_writable(path: str) -> None:
    """Raise ValueError now, before a long run, if `path` cannot be written later."""
    parent = os.path.dirname(os.path.abspath(path))
    if not os.path.isdir(parent):
        raise InputError(f"cannot write {path}: directory {parent} does not exist")
    if not os.access(parent, os.W_OK):
        raise InputError(f"cannot write {path}: directory {parent} is not writable")
    if os.path.isdir(path):
        raise InputError(f"cannot write {path}: it is a directory")


def write_json_atomic(path: str, obj) -> None:
    """Write obj as JSON to a temporary file beside `path`, then rename it into place."""
    parent = os.path.dirname(os.path.abspath(path))
    fd, tmp = tempfile.mkstemp(prefix=".tmp-", suffix=".json", dir=parent)
    try:
        with os.fdopen(fd, "w") as f:
            json.dump(obj, f, indent=1, sort_keys=False)
            f.write("\n")
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException:
        if os.path.exists(tmp):
            os.unlink(tmp)
        raise


def format_table(summary: dict, columns: list[tuple]) -> str:
    """A fixed-width table: one row per policy, `mean±std` per (metric, header, scale[, digits]) column.

    A cell gets a `*` where some trial of that metric sits at its search ceiling, and a
    line under the table says how many and what the ceiling means.
    """
    head = ["policy"] + [c[1] for c in columns]
    rows, notes = [], {}
    for name, metrics in summary.items():
        cells = [name]
        for key, _, scale, *digits in columns:
            m = metrics[key]
            d = digits[0] if digits else 2
            star = "*" if m.get("at_ceiling") else ""
            cells.append(f"{m['mean'] * scale:.{d}f}±{m['std'] * scale:.{d}f}{star}")
            if star:
                note = notes.setdefault(key, (m["ceiling_means"], []))
                note[1].append(f"{name} {m['at_ceiling']}/{len(m['trials'])}")
        rows.append(cells)
    widths = [max(len(r[i]) for r in [head] + rows) for i in range(len(head))]
    fmt = lambda r: "  ".join(c.ljust(w) if i == 0 else c.rjust(w) for i, (c, w) in enumerate(zip(r, widths)))
    lines = [fmt(head), "  ".join("-" * w for w in widths)] + [fmt(r) for r in rows]
    for key, (means, where) in notes.items():
        lines.append(f"* {key} at its ceiling ({means}) in trials of: {', '.join(where)}")
    return "\n".join(lines)
