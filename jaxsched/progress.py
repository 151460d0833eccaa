"""A progress bar on a terminal, silence elsewhere (CI, pipes, files)."""

from __future__ import annotations

import os
import sys
import time


def enabled(stream=None) -> bool:
    """True when progress should be drawn: stderr is a TTY and CI is not set."""
    stream = stream or sys.stderr
    return bool(getattr(stream, "isatty", lambda: False)()) and not os.environ.get("CI")


class Progress:
    """Callable progress(done, total) that redraws one stderr line, at most 10 times a second."""

    def __init__(self, label: str, stream=None):
        self.label = label
        self.stream = stream or sys.stderr
        self.start = time.perf_counter()
        self.last = 0.0

    def __call__(self, done: int, total: int) -> None:
        now = time.perf_counter()
        if done < total and now - self.last < 0.1:
            return
        self.last = now
        frac = done / total if total else 1.0
        bar = "#" * int(30 * frac)
        self.stream.write(f"\r{self.label} [{bar:<30}] {done}/{total} {now - self.start:6.1f}s")
        if done >= total:
            self.stream.write("\n")
        self.stream.flush()


def maybe(label: str):
    """A Progress for `label` if progress is enabled, else None."""
    return Progress(label) if enabled() else None


class Ticker:
    """Callable ticker(count) for work of unknown length: redraws '<label> <count> <elapsed>s' on stderr."""

    def __init__(self, label: str, unit: str, stream=None):
        self.label, self.unit = label, unit
        self.stream = stream or sys.stderr
        self.start = time.perf_counter()

    def __call__(self, count: int) -> None:
        self.stream.write(f"\r{self.label}: {self.unit} {count} {time.perf_counter() - self.start:6.1f}s")
        self.stream.flush()

    def close(self) -> None:
        self.stream.write("\n")
        self.stream.flush()
