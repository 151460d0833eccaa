"""Ctrl-C within about a second: work runs as short compiled calls, and between two calls a
worker thread looks whether the call that started it was interrupted.

The main thread gets KeyboardInterrupt from Python itself as soon as a compiled call returns.
Shares of the work that run in threads of their own (`devices.on_devices`) cannot be sent
it; `on_devices` sets the threading.Event they are bound to instead, and `checkpoint`
between two of their calls ends them, so that the process exits without waiting for the
rest of the work. Shares started from a worker thread are bound to that thread's event, so
that calling off the worker calls them off too.
"""

from __future__ import annotations

import threading
import time

TARGET_CALL_S = 0.25  # a paced loop's aim for one compiled call


class Stopped(Exception):
    """Raised in a worker thread at a checkpoint after its work was called off."""


_local = threading.local()


def bind(stop: threading.Event | None) -> None:
    """Make `stop` the event this thread's checkpoints look at (None: none)."""
    _local.stop = stop


def bound() -> threading.Event | None:
    """The event this thread's checkpoints look at (None in the main thread)."""
    return getattr(_local, "stop", None)


def checkpoint() -> None:
    """Raise Stopped if the work this thread does was called off (a no-op elsewhere)."""
    stop = getattr(_local, "stop", None)
    if stop is not None and stop.is_set():
        raise Stopped("called off")


def queue_one_ahead(queued: list) -> None:
    """After dispatching the latest of `queued` (results of compiled blocks, in order): wait
    for the one before it, then `checkpoint`. At most one block waits behind the running one,
    so an interrupt waits for one block, not for all that were dispatched ahead."""
    if len(queued) > 1:
        import jax

        jax.block_until_ready(queued[-2])
    checkpoint()


class Pacer:
    """Sizes of a loop's compiled calls, for loops whose result does not depend on them: each
    call is sized from the last one's time so that a call takes about TARGET_CALL_S."""

    def __init__(self, first: int, least: int = 16, most: int = 1 << 16):
        self.size, self.least, self.most = first, least, most
        self.started = None

    def start(self) -> int:
        """The size of the next call; its time runs from now to `done`."""
        self.started = time.perf_counter()
        return self.size

    def done(self) -> None:
        """The call ended (its result is on the host): size the next one."""
        took = max(time.perf_counter() - self.started, 1e-4)
        grown = self.size * min(TARGET_CALL_S / took, 4.0)
        self.size = int(min(max(grown, self.least), self.most))
