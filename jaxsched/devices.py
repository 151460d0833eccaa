"""How many CPU devices JAX splits a batch over: one per core by default.

XLA runs the small per-step kernels of a packing scan on one thread, so on a CPU the
trials go faster split over several devices, one thread each (`packing.shard_devices`).
The count must be set before JAX starts a backend; results do not depend on it.
`on_devices` runs one program per device from threads, when the shares differ (other
policies) and so cannot be one `shard_map`.
"""

from __future__ import annotations

import os
import sys
import threading
import time
from concurrent.futures import FIRST_EXCEPTION, ThreadPoolExecutor, wait
from typing import Callable, TypeVar

from . import interrupt
from .errors import InputError

T = TypeVar("T")

FORCE_FLAG = "xla_force_host_platform_device_count"


def cores() -> int:
    """The cores this process may run on."""
    return len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (os.cpu_count() or 1)


def set_cpu_devices(value: int | str = "auto") -> None:
    """Ask JAX for `value` CPU devices (auto: one per core, unless XLA_FLAGS already sets a count).

    Raises InputError for a bad value, or for an explicit count JAX can no longer take
    because it already started with another; auto then leaves things as they are.
    """
    text = str(value).strip().lower()
    if text == "auto":
        if FORCE_FLAG in os.environ.get("XLA_FLAGS", ""):
            return
        n = cores()
    else:
        try:
            n = int(text)
        except ValueError:
            n = 0
        if n < 1:
            raise InputError(f"CPU devices must be a positive integer or auto, got {value!r}")
    import jax

    try:
        jax.config.update("jax_num_cpu_devices", n)
    except RuntimeError:  # a backend already started in this process
        if text != "auto" and jax.default_backend() == "cpu" and len(jax.local_devices()) != n:
            raise InputError(f"{n} CPU devices asked, but JAX already started in this process with "
                             f"{len(jax.local_devices())}") from None


def on_devices(fn: Callable[[int, object], T], count: int) -> list[T]:
    """[fn(i, device i) for i < count], each call in its own thread with local device i as
    JAX's default device (one program per device, all running at once). Where one share
    fails, or the main thread is interrupted (or the worker thread that called this is called
    off), the other shares stop at their next `interrupt.checkpoint` and the first error is
    raised."""
    import jax

    devices = jax.local_devices()
    stop = interrupt.bound() or threading.Event()  # from a worker thread: called off with it

    def run(i):
        interrupt.bind(stop)
        try:
            with jax.default_device(devices[i]):
                return fn(i, devices[i])
        except BaseException:
            stop.set()
            raise
        finally:
            interrupt.bind(None)

    pool = ThreadPoolExecutor(count)
    try:
        futures = [pool.submit(run, i) for i in range(count)]
        wait(futures, return_when=FIRST_EXCEPTION)
    except BaseException:  # KeyboardInterrupt while waiting: the shares stop on their own
        stop.set()
        pool.shutdown(wait=False, cancel_futures=True)
        raise
    pool.shutdown(wait=True, cancel_futures=True)
    errors = [f.exception() for f in futures if f.exception() is not None]
    if errors:  # the share that failed first, not one that stopped because of it
        raise next((e for e in errors if not isinstance(e, interrupt.Stopped)), errors[0])
    return [f.result() for f in futures]


class Background:
    """fn() in a thread of its own, started at once: `result()` waits for it (and raises what
    it raised); `cancel()` calls it off, to stop at its next `interrupt.checkpoint`.

    Neither waits for a called-off thread: one inside a long compiled call (a compilation)
    would hold up Ctrl-C for seconds. The CLI's exit does the waiting (`exit_after_threads`)."""

    def __init__(self, fn: Callable[[], T]):
        self.stop = threading.Event()
        self.pool = ThreadPoolExecutor(1)

        def run():
            interrupt.bind(self.stop)
            try:
                return fn()
            finally:
                interrupt.bind(None)

        self.future = self.pool.submit(run)

    def result(self) -> T:
        try:
            out = self.future.result()
        except BaseException:  # its error, or KeyboardInterrupt while waiting
            self.cancel()
            raise
        self.pool.shutdown(wait=True)
        return out

    def cancel(self) -> None:
        self.stop.set()
        self.pool.shutdown(wait=False)


def exit_after_threads(code: int, grace_s: float = 1.0) -> int:
    """`code`, once the other threads have ended; where one still runs after `grace_s`
    (called off inside a compiled call it cannot leave), end the process now with `code`
    instead of waiting for it: every result file is written by the main thread, atomically."""
    deadline = time.monotonic() + grace_s
    for t in threading.enumerate():
        if t is not threading.current_thread() and not t.daemon:
            t.join(max(deadline - time.monotonic(), 0.0))
    if any(t.is_alive() and not t.daemon for t in threading.enumerate() if t is not threading.current_thread()):
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(code)
    return code


class SlowestShare:
    """One progress(done, total) for work split in shares: the slowest share's fraction of
    `total`. `reporter(i)` is share i's own progress(done, share_total)."""

    def __init__(self, progress: Callable[[int, int], None] | None, shares: int, total: int):
        self.progress, self.total = progress, total
        self.fraction = [0.0] * shares
        self.lock = threading.Lock()

    def reporter(self, i: int) -> Callable[[int, int], None] | None:
        if self.progress is None:
            return None

        def report(done: int, share_total: int) -> None:
            with self.lock:
                self.fraction[i] = done / max(share_total, 1)
                self.progress(int(round(min(self.fraction) * self.total)), self.total)
        return report
