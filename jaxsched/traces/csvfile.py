"""Typed CSV files (plain or gzipped) read with pyarrow, with errors that name the file and line.

pyarrow's own parse errors say what went wrong but not where; when a read fails, a
second, plain-Python pass over the file finds the first faulty line so the message
can name it. That pass runs only on the error path.
"""

from __future__ import annotations

import csv
import gzip
import io
import os
import zlib
from typing import Sequence

import numpy as np
import pyarrow as pa
import pyarrow.csv as pv

from ..errors import InputError

try:  # ISA-L's inflate, faster than zlib's; a part's parse then runs on the inflated bytes
    from isal.igzip import decompress as _gunzip
    from isal.isal_zlib import error as _GzipError
except ImportError:  # pragma: no cover - isal is a dependency; plain zlib still reads the same files
    from gzip import decompress as _gunzip

    _GzipError = zlib.error

_NUMERIC = {"int": int, "float": float}


class Column:
    """One CSV column: name, kind ('int', 'float' or 'str'), human label for messages."""

    __slots__ = ("name", "kind", "label")

    def __init__(self, name: str, kind: str, label: str):
        self.name, self.kind, self.label = name, kind, label

    @property
    def arrow_type(self) -> pa.DataType:
        return {"int": pa.int64(), "float": pa.float64(), "str": pa.string()}[self.kind]


def _open_text(path: str):
    raw = gzip.open(path, "rb") if path.endswith(".gz") else open(path, "rb")
    return io.TextIOWrapper(raw, encoding="utf-8", errors="replace", newline="")


def _first_fault(path: str, columns: Sequence[Column], header: bool) -> str | None:
    """A message naming the first line of `path` that a typed read would reject, if any."""
    line = 0
    names = [c.name for c in columns]
    try:
        with _open_text(path) as f:
            rows = csv.reader(f)
            if header:
                line += 1
                head = next(rows, None)
                if head is None:
                    return f"{path}: empty file (a header row was expected)"
                names = head
            by_name = {c.name: c for c in columns}
            for row in rows:
                line += 1
                if len(row) != len(names):
                    return f"{path}, line {line}: expected {len(names)} columns, got {len(row)}"
                for i, (name, value) in enumerate(zip(names, row)):
                    col = by_name.get(name)
                    if col is None or col.kind == "str" or value == "":
                        continue
                    try:
                        _NUMERIC[col.kind](value)
                    except ValueError:
                        return (f"{path}, line {line}, column {i + 1} ({col.label}): "
                                f"expected {'an integer' if col.kind == 'int' else 'a number'}, got {value!r}")
    except (OSError, EOFError, zlib.error) as e:
        return f"{path}: truncated or corrupt gzip after line {line} ({e})"
    return None


def line_of(row: int, header: bool) -> int:
    """The 1-based file line of table row `row`."""
    return row + 1 + int(header)


def read_csv(path: str, columns: Sequence[Column], include: Sequence[str] | None = None,
             header: bool = False) -> pa.Table:
    """Read `path` with the given column types; `include` picks the columns kept.

    Without a header the file must have exactly `columns`; with one, the named
    columns must be among the header's. Raises InputError naming the file and line.
    """
    if not os.path.isfile(path):
        raise InputError(f"{path}: no such file")
    types = {c.name: c.arrow_type for c in columns}
    read = pv.ReadOptions(column_names=None if header else [c.name for c in columns])
    parse = pv.ParseOptions(ignore_empty_lines=False)  # keeps table row i on line i + 1
    convert = pv.ConvertOptions(column_types=types, include_columns=list(include) if include else None,
                                null_values=[""], strings_can_be_null=True, quoted_strings_can_be_null=True)
    try:
        # Inflated here rather than by pyarrow, whose gzip stream feeds the parser more slowly.
        with open(path, "rb") as f:
            data = f.read()
        if path.endswith(".gz"):
            data = _gunzip(data)
        table = pv.read_csv(pa.BufferReader(data), read_options=read, parse_options=parse,
                            convert_options=convert)
    except (pa.ArrowInvalid, OSError, EOFError, zlib.error, _GzipError) as e:
        fault = _first_fault(path, columns, header)
        raise InputError(fault or f"{path}: {e}") from None
    if header:
        missing = [n for n in (include or types) if n not in table.column_names]
        if missing:
            raise InputError(f"{path}: missing column(s) {', '.join(missing)}")
    return table


# Arrow's fixed-width numeric types as numpy's (not DataType.to_pandas_dtype: it imports pandas).
_NUMPY_TYPES = {pa.from_numpy_dtype(t): np.dtype(t) for t in (np.int8, np.int16, np.int32, np.int64, np.uint8,
                                                              np.uint16, np.uint32, np.uint64, np.float32,
                                                              np.float64)}


def _chunk_numpy(chunk: pa.Array) -> np.ndarray:
    """A null-free chunk as numpy: a view of its data buffer when the type is fixed-width."""
    dtype = _NUMPY_TYPES.get(chunk.type)
    if dtype is not None:
        # Not chunk.to_numpy(): it imports pandas when pandas is installed, a slow import.
        return np.frombuffer(chunk.buffers()[1], dtype, count=len(chunk), offset=chunk.offset * dtype.itemsize)
    return chunk.to_numpy(zero_copy_only=False)


def numpy_column(table: pa.Table, name: str, fill=None) -> np.ndarray:
    """A column as numpy; nulls become `fill` (NaN when fill is None: ints then become floats)."""
    col = table.column(name)
    if fill is None and col.null_count and not pa.types.is_floating(col.type):
        col = col.cast(pa.float64())
    if col.null_count:
        col = col.fill_null(float("nan") if fill is None else fill)
    is_bool = pa.types.is_boolean(col.type)
    if is_bool:
        col = col.cast(pa.uint8())
    chunks = [_chunk_numpy(c) for c in col.chunks]
    out = chunks[0] if len(chunks) == 1 else np.concatenate(chunks) if chunks else np.zeros(0, _NUMPY_TYPES.get(col.type, object))
    return out.astype(bool) if is_bool else out


def require_present(table: pa.Table, columns: Sequence[Column], path: str, header: bool) -> None:
    """Raise InputError naming the first row where a mandatory column is empty."""
    for col in columns:
        nulls = table.column(col.name).null_count
        if nulls:
            row = int(np.argmax(table.column(col.name).is_null().to_numpy(zero_copy_only=False)))
            raise InputError(f"{path}, line {line_of(row, header)}: {col.label} is empty (it is mandatory)")


def require_range(values: np.ndarray, lo, hi, col: Column, path: str, header: bool) -> None:
    """Raise InputError naming the first row where `values` is outside [lo, hi] (NaN passes)."""
    if values.size == 0 or (np.fmin.reduce(values) >= lo and np.fmax.reduce(values) <= hi) \
            or np.isnan(values).all():  # fmin and fmax skip NaN: the pass without a mask, taken by a good file
        return
    bad = (values < lo) | (values > hi)
    if np.any(bad):
        row = int(np.argmax(bad))
        raise InputError(f"{path}, line {line_of(row, header)}: {col.label} {values[row]} is outside [{lo}, {hi}]")
