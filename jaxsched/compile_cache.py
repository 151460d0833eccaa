"""JAX's persistent compilation cache, in the user's cache directory.

The command line turns it on for every run (`jaxsched --no-compile-cache` or the environment
variable JAXSCHED_COMPILE_CACHE=0 turn it off), so that a second run of the same command loads
its compiled programs instead of compiling them again; a library user calls `enable()`. A cache
directory the user already gave JAX (JAX_COMPILATION_CACHE_DIR or jax.config) is kept.
"""

from __future__ import annotations

import os

from .user_cache import user_cache_dir

ENV_SWITCH = "JAXSCHED_COMPILE_CACHE"


def default_dir() -> str:
    """$XDG_CACHE_HOME/jaxsched/xla, else ~/.cache/jaxsched/xla."""
    return user_cache_dir("xla")


def wanted() -> bool:
    """False where JAXSCHED_COMPILE_CACHE is 0, false, no or off."""
    return os.environ.get(ENV_SWITCH, "1").strip().lower() not in ("0", "false", "no", "off")


def enable(directory: str | None = None) -> str | None:
    """Turn JAX's persistent compilation cache on: the directory it uses, or None where it is
    switched off by JAXSCHED_COMPILE_CACHE or the directory cannot be created.

    Every program is cached, however fast it compiled (a run's start-up compiles many small
    ones). The first process to compile a program writes it; the others read it.
    """
    if not wanted():
        return None
    import jax

    current = jax.config.jax_compilation_cache_dir
    directory = current or directory or default_dir()
    try:
        os.makedirs(directory, exist_ok=True)
    except OSError:
        return None
    if not current:
        jax.config.update("jax_compilation_cache_dir", directory)
    if "JAX_PERSISTENT_CACHE_MIN_COMPILE_TIME_SECS" not in os.environ:
        jax.config.update("jax_persistent_cache_min_compile_time_secs", 0.0)
    if "JAX_PERSISTENT_CACHE_MIN_ENTRY_SIZE_BYTES" not in os.environ:
        jax.config.update("jax_persistent_cache_min_entry_size_bytes", 0)
    return directory
