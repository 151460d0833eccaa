"""Progress on stderr: a bar redrawn in place on a terminal; elsewhere (CI, pipes, files) a
plain line every LINE_INTERVAL_S seconds of long work. Both give an estimate of the time
left, up front: from ESTIMATE_AFTER_S seconds of work on (the first line comes then, where
the work will take longer than a line's interval). The estimate follows the recent pace (the
last third of the time so far, at least RECENT_MIN_S), so that work whose pace changes as it
goes, such as a replay whose queue grows, is not judged by its early pace."""

from __future__ import annotations

import collections
import os
import sys
import time

from . import interrupt

LINE_INTERVAL_S = 10.0  # off a terminal: seconds between progress lines (none for shorter work)
ESTIMATE_AFTER_S = 3.0  # the first estimate of the time left, after this much work
RECENT_MIN_S, RECENT_SHARE = 30.0, 1 / 3  # the pace of the estimate: over the last max(30 s, a third)


def enabled(stream=None) -> bool:
    """True when a bar should be drawn: stderr is a TTY and CI is not set."""
    stream = stream or sys.stderr
    return bool(getattr(stream, "isatty", lambda: False)()) and not os.environ.get("CI")


class Progress:
    """Callable progress(done, total): on a terminal, one stderr line redrawn at most 10 times a
    second; with `lines`, a new line every LINE_INTERVAL_S seconds (the first after as long)."""

    def __init__(self, label: str, stream=None, lines: bool = False):
        self.label = label
        self.stream = stream or sys.stderr
        self.lines = lines
        self.start = time.perf_counter()
        self.last = None if lines else 0.0  # lines: the time of the last line, None before the first
        self.seen = collections.deque([(self.start, 0)])  # (time, done): the window of the recent pace

    def _left(self, now: float, done: int, total: int) -> float | None:
        """Seconds left at the pace since the window's start (the whole run's while it is shorter)."""
        since = now - max(RECENT_MIN_S, RECENT_SHARE * (now - self.start))
        while len(self.seen) > 1 and self.seen[1][0] <= since:
            self.seen.popleft()  # the window's start only moves forward
        t0, d0 = self.seen[0]
        self.seen.append((now, done))
        if done <= d0 or now <= t0:
            return None if done <= 0 else (now - self.start) * (total - done) / done
        return (now - t0) * (total - done) / (done - d0)

    def __call__(self, done: int, total: int) -> None:
        interrupt.checkpoint()  # a called-off share stops here instead of writing after the interrupt
        now = time.perf_counter()
        frac = done / total if total else 1.0
        elapsed = now - self.start
        left = self._left(now, done, total) if total else 0.0
        if self.lines:
            if done >= total or left is None:
                return
            if self.last is None:  # the first line: once the estimate is worth a line
                if elapsed < ESTIMATE_AFTER_S or left < LINE_INTERVAL_S:
                    return
            elif now - self.last < LINE_INTERVAL_S:
                return
            self.last = now
            self.stream.write(f"{self.label}: {done}/{total} ({100 * frac:.1f}%) after {elapsed:.0f} s, "
                              f"about {left:.0f} s left\n")
            self.stream.flush()
            return
        if done < total and now - self.last < 0.1:
            return
        self.last = now
        bar = "#" * int(30 * frac)
        eta = f", about {left:.0f} s left" if left is not None and done < total and elapsed >= ESTIMATE_AFTER_S else ""
        self.stream.write(f"\r{self.label} [{bar:<30}] {done}/{total} {elapsed:6.1f}s{eta}\x1b[K")
        if done >= total:
            self.stream.write("\n")
        self.stream.flush()


def maybe(label: str) -> Progress:
    """A Progress for `label`: a bar on a terminal, progress lines elsewhere."""
    return Progress(label) if enabled() else Progress(label, lines=True)


class Ticker:
    """Callable ticker(count) for work of unknown length: '<label>: <unit> <count> <elapsed>s' on
    stderr, redrawn on a terminal, else a line every LINE_INTERVAL_S seconds."""

    def __init__(self, label: str, unit: str, stream=None):
        self.label, self.unit = label, unit
        self.stream = stream or sys.stderr
        self.lines = not enabled(self.stream)
        self.start = self.last = time.perf_counter()
        self.drawn = False

    def __call__(self, count: int) -> None:
        interrupt.checkpoint()
        now = time.perf_counter()
        if self.lines:
            if now - self.last < LINE_INTERVAL_S:
                return
            self.last = now
            self.stream.write(f"{self.label}: {self.unit} {count} after {now - self.start:.0f} s\n")
        else:
            self.stream.write(f"\r{self.label}: {self.unit} {count} {now - self.start:6.1f}s")
            self.drawn = True
        self.stream.flush()

    def close(self) -> None:
        if self.drawn:
            self.stream.write("\n")
            self.stream.flush()
