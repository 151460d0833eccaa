"""What the benchmarks share: the machine and library versions each reports, the CPU device
count, and the time spent inside jaxsched's packing blocks."""

from __future__ import annotations

import os
import platform
import time


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


def add_cpu_devices_arg(ap) -> None:
    """--cpu-devices N|auto (default auto: one CPU device per core, as the CLI does)."""
    ap.add_argument("--cpu-devices", default="auto", metavar="N|auto",
                    help="CPU devices the trials are split over (default auto: one per core, as `jaxsched`)")


def apply_cpu_devices(value) -> None:
    """Set the CPU device count before JAX starts (see jaxsched.devices)."""
    from jaxsched.devices import set_cpu_devices

    set_cpu_devices(value)


def block_time(fn) -> float:
    """Seconds that fn() spends inside jaxsched's packing blocks (the full-scan blocks and the
    sampled picker's chunks) on its busiest device, each block waited for: the packing's own work,
    without the per-call host work around it."""
    import collections
    import threading

    import jax

    from jaxsched import packing, speculative

    spent, lock = collections.defaultdict(float), threading.Lock()
    saved = dict(block=packing._run_block, chunk=speculative._chunk, sharded=speculative._sharded_chunk)

    def timed(run):
        def timed_block(*args, **kwargs):
            t = time.perf_counter()
            out = jax.block_until_ready(run(*args, **kwargs))
            with lock:
                spent[threading.get_ident()] += time.perf_counter() - t
            return out
        return timed_block

    def timed_sharded(*args, **kwargs):
        run, mesh = saved["sharded"](*args, **kwargs)
        return timed(run), mesh

    packing._run_block, speculative._chunk = timed(saved["block"]), timed(saved["chunk"])
    speculative._sharded_chunk = timed_sharded
    try:
        fn()
    finally:
        packing._run_block, speculative._chunk = saved["block"], saved["chunk"]
        speculative._sharded_chunk = saved["sharded"]
    return max(spent.values(), default=0.0)
