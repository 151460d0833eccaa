"""How many CPU devices JAX splits a batch over: one per core by default.

XLA runs the small per-step kernels of a packing scan on one thread, so on a CPU the
trials go faster split over several devices, one thread each (`packing.shard_devices`).
The count must be set before JAX starts a backend; results do not depend on it.
"""

from __future__ import annotations

import os

from .errors import InputError

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
