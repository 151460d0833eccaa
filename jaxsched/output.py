"""Writing results: JSON written atomically, and the readable stdout table."""

from __future__ import annotations

import json
import os
import tempfile

from .errors import InputError


def check_writable(path: str) -> None:
    """Raise InputError now, before a long run, if `path` cannot be written later: a temporary
    file is really created (and removed) in its directory, so that nothing the permission bits
    do not tell (a read-only file system, /proc, a full disk's quota) is found only at the end."""
    parent = os.path.dirname(os.path.abspath(path))
    if not os.path.isdir(parent):
        raise InputError(f"cannot write {path}: directory {parent} does not exist")
    if os.path.isdir(path):
        raise InputError(f"cannot write {path}: it is a directory")
    try:
        fd, tmp = tempfile.mkstemp(prefix=".tmp-", dir=parent)
        os.close(fd)
        os.unlink(tmp)
    except OSError as e:
        raise InputError(f"cannot write {path}: {e.strerror or e}") from None


PRIMARY = True  # False on processes > 0 of a jax.distributed run: only process 0 writes files


def _umask() -> int:
    mask = os.umask(0o022)
    os.umask(mask)
    return mask


def _write_file(path: str, suffix: str, write) -> None:
    """write(file) on a temporary file beside `path`, renamed into place with the mode a plain
    open() would give it (0666 less the umask; mkstemp's own is 0600)."""
    parent = os.path.dirname(os.path.abspath(path))
    fd, tmp = tempfile.mkstemp(prefix=".tmp-", suffix=suffix, dir=parent)
    try:
        with os.fdopen(fd, "w") as f:
            write(f)
            f.flush()
            os.fsync(f.fileno())
        os.chmod(tmp, 0o666 & ~_umask())
        os.replace(tmp, path)
    except BaseException:
        if os.path.exists(tmp):
            os.unlink(tmp)
        raise


def _write_atomic(path: str, suffix: str, write) -> None:
    """Write `path` atomically (process 0 only). Where that fails, the content goes to a fallback
    file in the temporary directory, and an InputError names both paths."""
    if not PRIMARY:
        return
    try:
        _write_file(path, suffix, write)
    except OSError as e:
        reason = e.strerror or str(e)
        fallback = os.path.join(tempfile.gettempdir(), f"jaxsched-{os.getpid()}-{os.path.basename(path) or 'out'}")
        try:
            _write_file(fallback, suffix, write)
        except OSError:
            raise InputError(f"cannot write {path}: {reason}") from None
        raise InputError(f"cannot write {path}: {reason}; the results were saved to {fallback}") from None


def write_json_atomic(path: str, obj) -> None:
    """Write obj as JSON to a temporary file beside `path`, then rename it into place."""
    def write(f):
        json.dump(obj, f, indent=1, sort_keys=False)
        f.write("\n")

    _write_atomic(path, ".json", write)


def write_text_atomic(path: str, text: str) -> None:
    """Write a text file through a temporary file beside `path`, then rename it into place."""
    _write_atomic(path, os.path.splitext(path)[1] or ".txt", lambda f: f.write(text))


def _cell(v) -> str:
    """A CSV cell: numbers in 6 significant digits, text as it is (quoted where it holds a comma)."""
    if isinstance(v, str):
        return f'"{v}"' if "," in v else v
    return f"{v:.6g}"


def write_csv_atomic(path: str, header: list[str], rows) -> None:
    """Write a table (numbers and text) as CSV to a temporary file beside `path`, then rename it into place."""
    def write(f):
        f.write(",".join(header) + "\n")
        for row in rows:
            f.write(",".join(_cell(v) for v in row) + "\n")

    _write_atomic(path, ".csv", write)


def format_event_table(summary: dict, resources, by_band: bool) -> str:
    """The event-mode table: one row per policy, means over trials."""
    cols = [(f"utilization_{r}", f"util_{r}%", 100.0, 2) for r in resources]
    cols += [("latency_p50_s", "p50_s", 1.0, 1), ("latency_p90_s", "p90_s", 1.0, 1),
             ("latency_p99_s", "p99_s", 1.0, 1), ("latency_max_s", "max_s", 1.0, 0),
             ("latency_never_placed", "never", 1.0, 0), ("pending_mean", "pend_mean", 1.0, 1),
             ("pending_max", "pend_max", 1.0, 0)]
    if by_band:
        cols += [("latency_production_p99_s", "prod_p99_s", 1.0, 1), ("latency_middle_p99_s", "mid_p99_s", 1.0, 1),
                 ("latency_free_p99_s", "free_p99_s", 1.0, 1), ("evictions", "evictions", 1.0, 0)]
    head = ["policy"] + [c[1] for c in cols]
    rows = []
    for name, fig in summary.items():
        mean = fig["mean"]
        rows.append([name] + [f"{mean[k] * scale:.{d}f}" if k in mean else "-" for k, _, scale, d in cols])
    widths = [max(len(r[i]) for r in [head] + rows) for i in range(len(head))]
    fmt = lambda r: "  ".join(c.ljust(w) if i == 0 else c.rjust(w) for i, (c, w) in enumerate(zip(r, widths)))
    return "\n".join([fmt(head), "  ".join("-" * w for w in widths)] + [fmt(r) for r in rows])


def overload_note(summary: dict) -> str | None:
    """Where no policy places every task (an overloaded snapshot), the sentence that says why
    compaction and stranding then sit at their ceilings, and what still separates the
    policies; None otherwise."""
    placed = [m["placed_fraction"]["mean"] for m in summary.values() if "mean" in m.get("placed_fraction", {})]
    if not placed or max(placed) >= 1.0:
        return None
    return ("No policy places every task: the snapshot is overloaded. Compaction then sits at its ceiling "
            "(no share of the machines packs every task, so 1.0), and stranding near 100% (a packed machine "
            "keeps less than one slot free, so nearly all free capacity is on slot-less machines): metric "
            "ceilings of an overloaded snapshot. placed%, placed_w%, utilization and holes separate the policies; "
            "inflation and --max-task-dim or a quieter --at instant show more.")


def format_table(summary: dict, columns: list[tuple]) -> str:
    """A fixed-width table: one row per policy, `mean±std` per (metric, header, scale[, digits]) column.

    A cell gets a `*` where some trial of that metric sits at its search ceiling, and a
    line under the table says how many and what the ceiling means.
    """
    head = ["policy"] + [c[1] for c in columns]
    rows, notes, undefined = [], {}, {}
    for name, metrics in summary.items():
        cells = [name]
        for key, header, scale, *digits in columns:
            m = metrics[key]
            if "mean" not in m:  # not computed for this policy, or undefined (0/0)
                cells.append("-")
                if "undefined" in m:
                    undefined.setdefault(header, m["undefined"])
                continue
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
    lines += [f"- {header}: undefined, {why}" for header, why in undefined.items()]
    return "\n".join(lines)
