"""What every benchmark reports beside its figures: the machine and the library versions."""

from __future__ import annotations

import os
import platform


def hardware(with_jax: bool = True) -> dict:
    """CPU model, core count, Python, pyarrow and (with_jax) JAX's version, backend and devices."""
    cpu = platform.processor() or platform.machine()
    try:
        with open("/proc/cpuinfo") as f:
            cpu = next(line.split(":", 1)[1].strip() for line in f if line.startswith("model name"))
    except (OSError, StopIteration):
        pass
    import pyarrow

    out = {"cpu": cpu, "cores": os.cpu_count(), "python": platform.python_version(), "pyarrow": pyarrow.__version__}
    if with_jax:
        import jax

        dev = jax.devices()
        out.update(jax=jax.__version__, backend=dev[0].platform, devices=len(dev), device_kind=dev[0].device_kind)
    return out
