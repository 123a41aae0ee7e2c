"""What a loader checks before it hands a Trace on: a damaged but parseable file ends in one RecordingError
line, never in a traceback deep inside an analysis pass.

Meta values are JSON of known types (keys a newer writer added are ignored, so an older reader keeps
working); table cells are numbers in their column's range; names and source lines are ids into the tables
that hold them; codes (`kind`, `mode`) are codes that exist.
"""

from __future__ import annotations

import functools
import json
import math
import os
from collections.abc import Mapping
from typing import Any

import numpy as np

from analyzers.errors import InputError
from analyzers.model import Device, Peaks, Table
from brrrtui.contract.schema import GpuKind, WindowMode

TIME_LIMIT = 2**62
"""Largest time or duration in ns a column may hold (year 2116): sums of two never overflow int64."""
STRING_COLUMNS = ("name", "grid", "block", "shapes", "dtypes", "module")
LINE_COLUMNS = {"spans": ("line", "lib_line"), "line_samples": ("line",)}
CODES = {"kind": {int(k) for k in GpuKind}, "mode": {int(m) for m in WindowMode}}
_DEVICE_TYPES: dict[str, type] = {
    "name": str,
    "num_sms": int,
    "compute_capability": str,
    "total_memory_bytes": int,
    "l2_bytes": int,
    "driver": str,
    "cuda": str,
}
_INFO_TYPES: dict[str, tuple[type, ...]] = {  # meta keys the readers use; a damaged one is dropped, not fatal
    "argv": (list,),
    "cwd": (str,),
    "status": (str,),
    "notes": (list,),
    "exit_code": (int,),
    "started_at_ns": (int,),
    "ended_at_ns": (int,),
    "last_batch_ns": (int,),
}


class RecordingError(InputError):
    """A file that is not, or no longer, a readable recording. The message is one line for the user."""


def _is_int(v: object) -> bool:
    return isinstance(v, int) and not isinstance(v, bool)


def _is_number(v: object) -> bool:
    return isinstance(v, int | float) and not isinstance(v, bool) and math.isfinite(v)


_META_DEPTH = 64
"""The deepest a meta value may nest (brrrtui's own nest a few levels): deeper is damage."""


def _shallow(value: Any) -> bool:
    """`value` (parsed JSON) nests at most _META_DEPTH lists or dicts deep; walked without recursion."""
    level: list[Any] = [value]
    for _ in range(_META_DEPTH + 1):
        level = [
            v for x in level if isinstance(x, list | dict) for v in (x.values() if isinstance(x, dict) else x)
        ]
        if not level:
            return True
    return False


def parse_meta(path: str, rows: list[tuple[Any, Any]]) -> dict[str, Any]:
    """The meta table's (key, JSON text) rows as a dict; values of known keys with the wrong type dropped."""
    meta: dict[str, Any] = {}
    for key, text in rows:
        if not isinstance(key, str):
            continue
        try:
            meta[key] = json.loads(text)
        except (TypeError, ValueError, RecursionError):
            raise RecordingError(f"{path} is damaged: its meta value {key!r:.40} is not JSON") from None
        if not _shallow(meta[key]):  # the readers walk meta values recursively (recording.safe.safe_value)
            raise RecordingError(
                f"{path} is damaged: its meta value {key!r:.40} nests deeper than {_META_DEPTH}"
            )
    for key, types in _INFO_TYPES.items():
        if key in meta and not (isinstance(meta[key], types) and not isinstance(meta[key], bool)):
            del meta[key]
    return meta


def check_format(path: str, meta: Mapping[str, Any], fmt: str, version: int) -> None:
    if meta.get("format") != fmt:
        raise RecordingError(f"{path} is an SQLite file but not a brrrtui recording")
    found = meta.get("format_version", 0)
    if not _is_int(found):
        raise RecordingError(f"{path} is damaged: unknown format version {found!r:.40}")
    if found > version:
        raise RecordingError(f"{path} was written by a newer brrrtui (format {found})")


def device_from_meta(path: str, value: object) -> Device:
    """The `device` meta value as a Device: unknown keys ignored, a field of the wrong type unknown."""
    if value is None:
        return Device()
    if not isinstance(value, dict):
        raise RecordingError(f"{path} is damaged: its device facts are {type(value).__name__}, not an object")
    fields: dict[str, Any] = {}
    for k, t in _DEVICE_TYPES.items():
        v = value.get(k)
        fields[k] = v if isinstance(v, t) and not isinstance(v, bool) else None
    return Device(**fields)


def peaks_from_meta(path: str, value: object) -> Peaks | None:
    """The `peaks` meta value as Peaks: unknown keys ignored; ceilings must be positive numbers or null."""
    if value is None:
        return None
    if not isinstance(value, dict):
        raise RecordingError(f"{path} is damaged: its peaks are {type(value).__name__}, not an object")
    fields: dict[str, Any] = {}
    for k in ("tensor_flops_per_s", "fp32_flops_per_s", "bytes_per_s", "l2_bytes"):
        v = value.get(k)
        if v is not None and not (_is_number(v) and v > 0):
            raise RecordingError(f"{path} is damaged: peaks {k} is {v!r:.40}")
        fields[k] = int(v) if k == "l2_bytes" and v is not None else v
    source = value.get("source", "measured")
    fields["source"] = source if isinstance(source, str) else "measured"
    return Peaks(**fields)


def column_matrix(path: str, table: str, names: list[str], rows: list[Any], dtype: type) -> np.ndarray:
    """Rows of one column kind (int64 or float64) as a matrix; NULL is -1 (or NaN); any other cell that is no
    number in range ends in one RecordingError line."""
    try:
        return np.array(rows, dtype=dtype).reshape(-1, len(names))
    except (TypeError, ValueError, OverflowError):  # a NULL, or a damaged cell: the slow, exact way
        pass
    out: np.ndarray = np.empty((len(rows), len(names)), dtype=dtype)
    for i, row in enumerate(rows):
        for j, v in enumerate(row):
            if v is None:
                out[i, j] = -1 if dtype is np.int64 else np.nan
            elif _is_number(v) and (dtype is np.float64 or abs(v) < 2**63):
                out[i, j] = v
            else:
                raise RecordingError(f"{path} is damaged: {table}.{names[j]} holds {v!r:.40}")
    return out


def check_column(
    path: str, table: str, name: str, values: np.ndarray, dtype: Any, bounds: tuple[int, int] | None = None
) -> None:
    """A column's values fit its dtype, its codes exist, its times are times. `bounds`: the values' (min, max)
    when the caller knows them already."""
    dt = np.dtype(dtype)
    if dt.kind != "i" or not len(values):
        return
    lo, hi = (int(values.min()), int(values.max())) if bounds is None else bounds
    info = np.iinfo(dt)
    if lo < info.min or hi > info.max:
        raise RecordingError(f"{path} is damaged: {table}.{name} holds {lo if lo < info.min else hi}")
    if name in CODES and not set(np.unique(values).tolist()) <= CODES[name]:
        bad = sorted(set(np.unique(values).tolist()) - CODES[name])[0]
        raise RecordingError(f"{path} is damaged: {table}.{name} holds the unknown code {bad}")
    if name.endswith("_ns") and (lo < -1 or hi > TIME_LIMIT):
        raise RecordingError(f"{path} is damaged: {table}.{name} holds {lo if lo < -1 else hi}")


def check_ids(path: str, tables: Mapping[str, Table], strings: int, lines: int) -> None:
    """Every name is an id into the string table and every line an id into the line table (or -1)."""
    for table_name, table in tables.items():
        if not len(table):
            continue
        for col, limit, what in [(c, strings, "string") for c in STRING_COLUMNS] + [
            (c, lines, "line") for c in LINE_COLUMNS.get(table_name, ())
        ]:
            values = table.columns.get(col)
            if values is None:
                continue
            lo, hi = int(values.min()), int(values.max())
            if lo < -1 or hi >= limit:
                bad = lo if lo < -1 else hi
                raise RecordingError(
                    f"{path} is damaged: {table_name}.{col} names {what} {bad}, but it holds {limit} {what}s"
                )


def check_folds(path: str, tables: Mapping[str, Table]) -> None:
    """Every segment of folded aggregates has its fold: the recorder commits a fold's stream_agg and
    stream_folds rows in one transaction, so aggregates after a window no fold names are damage (the stream
    view takes a segment's time span from its folds)."""
    agg, folds = tables.get("stream_agg"), tables.get("stream_folds")
    if agg is None or not len(agg):
        return
    known = np.unique(folds.after_window) if folds is not None and len(folds) else np.empty(0, np.int64)
    stray = np.setdiff1d(np.unique(agg.after_window), known)
    if len(stray):
        raise RecordingError(
            f"{path} is damaged: stream_agg holds aggregates after window {int(stray[0])}, which no fold names"
        )


WINDOW_LIMIT = 2**23
"""Window ids a recording may hold (8 M windows: a window a second for 97 days): the analysis packs a window id
above a 40-bit correlation id into one int64 key."""
WINDOW_COLUMNS = ("window", "after_window", "template_window")


def check_window_ids(path: str, tables: Mapping[str, Table]) -> None:
    """Every window id is -1 (none) or below WINDOW_LIMIT."""
    for table_name, table in tables.items():
        for col in WINDOW_COLUMNS:
            values = table.columns.get(col)
            if values is None or not len(values):
                continue
            lo, hi = int(values.min()), int(values.max())
            if lo < -1 or hi >= WINDOW_LIMIT:
                raise RecordingError(
                    f"{path} is damaged: {table_name}.{col} holds the window id {lo if lo < -1 else hi}"
                )


@functools.cache
def memory_bytes() -> int | None:
    """This machine's memory, or the container's limit where one is set lower (cgroup v2); None unknown.
    Read once: a live view asks at every table it reads, every poll."""
    try:
        found = os.sysconf("SC_PHYS_PAGES") * os.sysconf("SC_PAGE_SIZE")
    except (ValueError, OSError, AttributeError):
        return None
    try:
        with open("/sys/fs/cgroup/memory.max") as f:
            limit = f.read().strip()
        return min(found, int(limit)) if limit.isdigit() else found
    except OSError:
        return found


def memory_note() -> str:
    """ " (this machine has N GB)" for an out-of-memory error, "" when unknown."""
    have = memory_bytes()
    return f" (this machine has {have / 1e9:,.1f} GB)" if have else ""


def check_fits_in_memory(path: str, table: str, rows: int, row_bytes: int) -> None:
    """`rows` rows of `table` fit this machine's memory as columns, else one RecordingError line, before any
    is allocated: numpy's allocation of more than memory can succeed (the kernel overcommits), and filling
    the columns then gets the process killed instead of ending in an error."""
    need, have = rows * row_bytes, memory_bytes()
    if have is not None and need > have:
        raise RecordingError(
            f"{path} is damaged or too big to open here: its {table} table claims {rows:,} rows "
            f"({need / 1e9:,.1f} GB as columns), more than this machine's {have / 1e9:,.1f} GB of memory"
        )
