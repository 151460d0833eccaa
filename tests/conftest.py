"""Test-wide JAX settings, as equinox does: two CPU devices, strict promotion rules, and a
persistent compilation cache (set in the environment, so that the CLI subprocesses some
tests start use it too): the pytest-xdist workers, the subprocesses and later runs compile
a program once between them. Parsed traces are cached in a test directory of their own."""

import os
import tempfile

os.environ.setdefault("JAX_COMPILATION_CACHE_DIR",
                      os.path.join(tempfile.gettempdir(), "jaxsched-test-compilation-cache"))
os.environ.setdefault("JAX_PERSISTENT_CACHE_MIN_COMPILE_TIME_SECS", "0.2")
# Parsed traces go to a test cache of their own, never into the user's cache or next to the data.
os.environ.setdefault("JAXSCHED_CACHE_DIR", os.path.join(tempfile.gettempdir(), "jaxsched-test-trace-cache"))

import jax  # noqa: E402

jax.config.update("jax_num_cpu_devices", 2)
jax.config.update("jax_numpy_rank_promotion", "raise")
jax.config.update("jax_numpy_dtype_promotion", "strict")
