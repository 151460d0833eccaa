"""A Parquet cache of parsed traces, keyed by the source files, written atomically.

Tables are stored uncompressed, without statistics, dictionary-encoding only the columns
whose values repeat (Google 2011: about 33 bytes a task): the fastest form both to
write and to read back.

An entry is a directory of Parquet tables plus `meta.json`. Its name holds a digest
of every source file's path, size and modification time and of the parser version,
so a changed, added or removed part file gives a new key and a stale entry is never
read. An entry is built in a temporary directory and renamed into place, so a failed
or interrupted load leaves no half-written entry; older entries of the same trace
directory are removed when a new one lands.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import tempfile
from typing import Sequence

import pyarrow as pa
import pyarrow.parquet as pq

from ..errors import InputError
from ..user_cache import user_cache_dir

ENV_CACHE_DIR = "JAXSCHED_CACHE_DIR"


def default_cache_dir() -> str:
    """$JAXSCHED_CACHE_DIR, else the user's cache directory's `traces` folder
    (`$XDG_CACHE_HOME/jaxsched/traces`, else `~/.cache/jaxsched/traces`): never the
    trace's own directory, which may be someone else's shared data."""
    return os.environ.get(ENV_CACHE_DIR) or user_cache_dir("traces")


def cache_key(kind: str, version: int, trace_dir: str, files: Sequence[str]) -> tuple[str, str]:
    """(prefix shared by every entry of this trace directory, full entry name)."""
    trace_dir = os.path.abspath(trace_dir)
    prefix = f"{kind}-{hashlib.sha256(trace_dir.encode()).hexdigest()[:10]}"
    h = hashlib.sha256(f"{kind}:{version}".encode())
    for path in files:
        st = os.stat(path)
        h.update(f"\0{os.path.relpath(path, trace_dir)}\0{st.st_size}\0{st.st_mtime_ns}".encode())
    return prefix, f"{prefix}-{h.hexdigest()[:20]}"


def read_entry(cache_dir: str, name: str) -> tuple[dict[str, pa.Table], dict] | None:
    """The tables and metadata of entry `name`, or None if there is none."""
    path = os.path.join(cache_dir, name)
    meta_path = os.path.join(path, "meta.json")
    if not os.path.isfile(meta_path):
        return None
    with open(meta_path) as f:
        meta = json.load(f)
    # ParquetFile, not pq.read_table: the latter imports pyarrow.dataset (and pandas, when
    # installed), which costs more than reading the tables.
    tables = {t: pq.ParquetFile(os.path.join(path, f"{t}.parquet"), memory_map=True).read() for t in meta["tables"]}
    return tables, meta


def write_entry(cache_dir: str, prefix: str, name: str, tables: dict[str, pa.Table], meta: dict,
                dictionary: dict[str, Sequence[str]] | None = None) -> None:
    """Write entry `name` atomically and drop older entries that share `prefix`.

    dictionary: per table, the columns to dictionary-encode (default: all of them);
    the others are stored plain, which is faster to write and read.
    """
    try:
        os.makedirs(cache_dir, exist_ok=True)
        tmp = tempfile.mkdtemp(prefix=f".tmp-{name}-", dir=cache_dir)
    except OSError as e:
        raise InputError(f"cache directory {cache_dir}: {e.strerror or e}") from None
    try:
        for t, table in tables.items():
            columns = (dictionary or {}).get(t)
            pq.write_table(table, os.path.join(tmp, f"{t}.parquet"), compression="none", write_statistics=False,
                           use_dictionary=True if columns is None else list(columns))
        with open(os.path.join(tmp, "meta.json"), "w") as f:
            json.dump(dict(meta, tables=list(tables)), f, indent=1)
        target = os.path.join(cache_dir, name)
        try:
            os.rename(tmp, target)
        except OSError:  # another process wrote the same entry first: keep theirs
            shutil.rmtree(tmp, ignore_errors=True)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    for other in os.listdir(cache_dir):
        if other.startswith(prefix + "-") and other != name:
            shutil.rmtree(os.path.join(cache_dir, other), ignore_errors=True)
