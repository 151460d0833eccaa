"""The user's cache directory for jaxsched: `$XDG_CACHE_HOME/jaxsched`, else `~/.cache/jaxsched`.

Parsed traces (`traces/cache.py`) and compiled programs (`compile_cache.py`) live in
subfolders of it, never next to the user's data.
"""

from __future__ import annotations

import os


def user_cache_dir(*parts: str) -> str:
    """$XDG_CACHE_HOME/jaxsched/PARTS, else ~/.cache/jaxsched/PARTS."""
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return os.path.join(base, "jaxsched", *parts)
