"""The recording's columnar layout (format 2): each table of TABLES is an SQLite table with one row per
committed batch, holding the batch's row count and one BLOB per column: the column's values as a typed
little-endian array behind a one-byte code (brrrtui.recording.codec: the narrowest integer type that holds
the batch's range, above a base). A load decodes each batch's blobs straight into preallocated numpy
columns, without a Python object per cell; 1 M kernels (3 M ops) read in under a second.

    gpu(batch_rows INTEGER, "window" BLOB, kind BLOB, name BLOB, start_ns BLOB, ...)

The columns decode to the schema's dtypes (brrrtui.contract.schema), which the meta key `columns` also
names ({table: {column: numpy dtype string}}), so `sqlite3`, numpy and codec.py's table read a recording
without brrrtui. A column that a batch does not have (NULL, or absent from the table: a column the schema
gained later) reads as unknown (-1, or NaN). A blob that does not decode to its batch's rows, or holds a
value its column cannot, ends in one RecordingError line.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from brrrtui.contract.model import Table
from brrrtui.recording import codec
from brrrtui.recording.checks import RecordingError, check_column, check_fits_in_memory

SMALL_BATCH = 4096
"""Batches of at most this many rows are decoded a column at a time (codec.decode_many), not one by one."""
VALUELESS_ROWS = 1024
"""The most rows a batch whose every column is one value may hold: rows that differ in nothing are rare, and a
larger count there is damage no blob's length contradicts."""
COUNT = "batch_rows"
"""The column holding a batch's row count (no schema column has this name)."""
_MAX_ROWS = 2**40
FOLDED_TABLE = "stream"
"""The one table whose batches the recorder empties (brrrtui.record.fold): NULL columns, the count kept."""


def quoted(name: str) -> str:
    return '"' + name.replace('"', '""') + '"'


def create_sql(table: str, schema: Mapping[str, Any]) -> str:
    cols = ", ".join(f"{quoted(c)} BLOB" for c in schema)
    return f"CREATE TABLE IF NOT EXISTS {quoted(table)}({COUNT} INTEGER NOT NULL, {cols})"


def layout(tables: Mapping[str, Mapping[str, Any]]) -> dict[str, dict[str, str]]:
    """The meta value `columns`: every column's dtype as numpy spells it, little-endian."""
    return {t: {c: np.dtype(d).newbyteorder("<").str for c, d in s.items()} for t, s in tables.items()}


def _unknown(dtype: Any) -> float:
    return np.nan if np.dtype(dtype).kind == "f" else -1


def _fit(values: np.ndarray, dtype: Any) -> np.ndarray:
    """`values` as `dtype`; a value the dtype cannot hold is stored as unknown (-1, NaN), never wrapped."""
    dt = np.dtype(dtype)
    if dt.kind == "f" or values.dtype == dt:
        return values.astype(dt.newbyteorder("<"), copy=False)
    if values.dtype.kind == "f":
        ok = np.isfinite(values)
        values = np.where(ok, values, -1).astype(np.int64)
    info = np.iinfo(dt)
    if len(values) and (values.min() < info.min or values.max() > info.max):
        values = np.where((values < info.min) | (values > info.max), -1, values)
    return values.astype(dt.newbyteorder("<"))


def _column_from_cells(cells: tuple[Any, ...], dtype: Any) -> np.ndarray:
    """One column of row tuples; None, or a cell that is no number, is unknown."""
    big = np.float64 if np.dtype(dtype).kind == "f" else np.int64
    try:
        return _fit(np.asarray(cells, dtype=big), dtype)
    except (TypeError, ValueError, OverflowError):
        pass
    out = np.empty(len(cells), dtype=big)
    for i, v in enumerate(cells):
        ok = isinstance(v, int | float | np.number) and not isinstance(v, bool)
        ok = ok and (big is np.float64 or (np.isfinite(v) and abs(v) < 2**63))
        out[i] = v if ok else _unknown(dtype)
    return _fit(out, dtype)


def columns_of(rows: Any, schema: Mapping[str, Any]) -> dict[str, np.ndarray]:
    """A batch's rows as typed columns. `rows`: row tuples in schema order, a 2-D array (one column per
    schema column), a Table, or a dict of columns. Columns missing at the end (a producer that predates a
    column added to the schema) are unknown."""
    if isinstance(rows, Table):
        rows = rows.columns
    n = len(next(iter(rows.values()))) if isinstance(rows, Mapping) else len(rows)
    if isinstance(rows, Mapping):
        given = {c: np.asarray(rows[c]) for c in schema if c in rows}
    elif isinstance(rows, np.ndarray):
        matrix = rows.reshape(n, -1)
        given = {c: matrix[:, j] for j, c in enumerate(list(schema)[: matrix.shape[1]])}
    else:
        cells = list(zip(*rows, strict=True))
        given = {
            c: _column_from_cells(cells[j], d) for j, (c, d) in enumerate(list(schema.items())[: len(cells)])
        }
    return {
        c: _fit(given[c], d) if c in given else np.full(n, _unknown(d), dtype=d) for c, d in schema.items()
    }


def insert(db: sqlite3.Connection, table: str, schema: Mapping[str, Any], rows: Any) -> None:
    """Append one batch of `table` (inside the caller's transaction)."""
    cols = columns_of(rows, schema)
    n = len(next(iter(cols.values())))
    if not n:
        return
    names = ", ".join([COUNT, *map(quoted, schema)])
    marks = ", ".join("?" * (len(schema) + 1))
    blobs = [codec.encode(values) for values in cols.values()]
    counts = [n]
    # rows that differ in nothing go in batches the reader takes (it reads a bigger one as a damaged count)
    if n > VALUELESS_ROWS and all(len(b) <= codec.HEAD for b in blobs):
        counts = [VALUELESS_ROWS] * (n // VALUELESS_ROWS) + [n % VALUELESS_ROWS] * bool(n % VALUELESS_ROWS)
    db.executemany(f"INSERT INTO {quoted(table)}({names}) VALUES ({marks})", [(k, *blobs) for k in counts])


def batch_sizes(db: sqlite3.Connection, path: str, table: str, after_rowid: int = 0) -> list[tuple[int, int]]:
    """(rowid, row count) of every batch of `table` (past `after_rowid`), in append order."""
    query = f"SELECT rowid, {COUNT} FROM {quoted(table)} WHERE rowid > ? ORDER BY rowid"
    out = db.execute(query, (after_rowid,)).fetchall()
    for _, n in out:
        if not (isinstance(n, int) and 0 <= n < _MAX_ROWS):
            raise RecordingError(f"{path} is damaged: a batch of {table} holds {n!r:.40} rows")
    return out


KEY_COLUMNS = {
    "gpu": ("window", "name"),
    "runtime": ("window", "name", "tid"),
    "ops": ("window", "name", "tid", "seq", "fwd_tid", "shapes", "dtypes", "concrete"),
    "spans": ("window", "line", "tid", "module", "lib_line"),
}
"""Columns the analysis only compares, sorts, matches and indexes with, never adds to or multiplies (ids of
windows, strings, lines, threads; sequence numbers): a whole load holds each in the narrowest signed integer
type its values fit, where the schema has int32 or int64. A few hundred windows, names and lines and a few
threads fit int8 or int16: a real model's 1 M kernels (5 M ops) then load into 244 MB of rows instead of 400,
and every pass over them reads less. They are decoded so from the first batch on (_Reader), never held at the
schema's width: the load of a real 96 MB recording peaks at 181 MiB of arrays, not the 283 of decoding wide
and narrowing after."""

_NARROW = (np.dtype(np.int8), np.dtype(np.int16), np.dtype(np.int32))


def narrowed(
    table: Table, names: Sequence[str], bounds: Mapping[str, tuple[int, int] | None] | None = None
) -> Table:
    """`table` with its integer columns `names` in the narrowest of int8/16/32 that holds their values (the
    others as they are); the same values, and a column that is one value repeated stays without memory.
    `bounds`: each column's (min, max) where the caller has them (a load: _Reader's), else worked out."""
    cols = dict(table.columns)
    for c in names:
        v = cols[c]
        if not len(v) or v.dtype.kind != "i" or v.dtype.itemsize <= 1:
            continue
        one_value = v.strides[0] == 0
        known = bounds.get(c) if bounds is not None else None
        lo, hi = known or ((int(v[0]), int(v[0])) if one_value else (int(v.min()), int(v.max())))
        fits = next((d for d in _NARROW if np.iinfo(d).min <= lo and hi <= np.iinfo(d).max), None)
        if fits is None or fits.itemsize >= v.dtype.itemsize:
            continue
        cols[c] = np.broadcast_to(v[:1].astype(fits), len(v)) if one_value else v.astype(fits)
    return Table(cols)


def total_rows(db: sqlite3.Connection, path: str, table: str) -> int:
    return sum(n for _, n in batch_sizes(db, path, table))


class _Reader:
    """Fills preallocated columns (the schema's dtypes; the `narrow` ones narrower) from the batches' blobs.

    A batch that stores a column as one value is not written out at once: a column that is one value in every
    batch (a device id, a kernel's unknown byte count) becomes one read-only value repeated without memory
    (np.broadcast_to), and its preallocated pages are never touched. On H200 recordings that is 15-20 % of the
    loaded bytes, each page of which a load would otherwise fault in and zero."""

    def __init__(
        self,
        path: str,
        table: str,
        schema: Mapping[str, Any],
        present: list[str],
        n: int,
        narrow: Sequence[str] = (),
    ):
        """`present`: the schema's columns the table has, in schema order (the blobs' order in a batch's row).
        `narrow`: integer columns held from the start in the narrowest type the values so far fit (widened
        as batches need, up to the schema's), so a load never holds them at the schema's width."""
        self.path, self.table, self.n = path, table, n
        self.dtypes = {c: np.dtype(d) for c, d in schema.items()}
        self.present = present
        self.narrow = {c for c in narrow if self.dtypes[c].kind == "i" and self.dtypes[c].itemsize > 1}
        start = {c: _NARROW[0] if c in self.narrow else d for c, d in self.dtypes.items()}
        self.out = {c: np.empty(n, dtype=d) for c, d in start.items()}
        self.written = dict.fromkeys(self.narrow, 0)  # per narrow column: its rows decoded so far end before
        # each integer column's (min, max) so far, from the batches' offsets: the checks need no pass of their own
        self.bounds: dict[str, tuple[int, int] | None] = {c: None for c in schema}
        self.pending: dict[str, list[tuple[Any, int, int]]] = {c: [] for c in self.present}  # (blob, at, n)
        # whole small batches, (the batch's blobs, at, n): finish hands their columns to pending
        self.small: list[tuple[Sequence[Any], int, int]] = []
        # per column, the stretches (at, take, value) of batches that hold one value, written out in finish
        self.same: dict[str, list[tuple[int, int, int | float]]] = {c: [] for c in schema}
        for c, d in self.dtypes.items():
            if c not in present:
                self._one_value(c, 0, n, _unknown(d))

    def _widen(self, c: str, more: tuple[int, int] | None) -> None:
        self.bounds[c] = codec.union_bounds(self.bounds[c], more)

    def _one_value(self, c: str, at: int, take: int, value: int | float) -> None:
        self.same[c].append((at, take, value))
        if take and self.dtypes[c].kind != "f":
            self._widen(c, (int(value), int(value)))

    def fill(self, blobs: Sequence[Any], at: int, n: int, skip: int, take: int) -> None:
        """One batch of `n` rows; its rows [skip, skip + take) go to out[at:at + take]. A small whole batch
        waits for `finish`, which decodes a column's small batches together."""
        small = skip == 0 and take == n <= SMALL_BATCH
        if small and None not in blobs:  # its columns go to pending in finish, not one by one per batch
            self.small.append((blobs, at, n))
            return
        for c, blob in zip(self.present, blobs, strict=True):
            dt = self.dtypes[c]
            if blob is None:
                self._one_value(c, at, take, _unknown(dt))
            elif small:
                self.pending[c].append((blob, at, n))
            elif (value := codec.constant(blob, n, dt.kind == "f", self._where(c), dt)) is not None:
                self._one_value(c, at, take, value)
            elif c in self.narrow:
                more = codec.int_bounds(blob, n, skip, take, self._where(c))
                self._hold(c, more)
                codec.decode_into(self.out[c][at : at + take], blob, n, skip, False, self._where(c), more)
                self._widen(c, more)
                self.written[c] = at + take
            else:
                more = codec.decode_into(
                    self.out[c][at : at + take], blob, n, skip, dt.kind == "f", self._where(c)
                )
                self._widen(c, more)

    def _hold(self, c: str, more: tuple[int, int] | None) -> None:
        """Narrow column `c` widened, where it must be, to a type that holds `more` as well as its values so far
        (the rows decoded so far copied over; the schema's type at most: decoding checks against that). Any
        other column is left as it is."""
        if more is None or c not in self.narrow:
            return
        lo, hi = codec.union_bounds(self.bounds[c], more) or more
        have = self.out[c]
        if np.iinfo(have.dtype).min <= lo and hi <= np.iinfo(have.dtype).max:
            return
        fits = next((d for d in _NARROW if np.iinfo(d).min <= lo and hi <= np.iinfo(d).max), None)
        wider = self.dtypes[c] if fits is None or fits.itemsize >= self.dtypes[c].itemsize else fits
        self.out[c] = np.empty(self.n, dtype=wider)
        self.out[c][: self.written[c]] = have[: self.written[c]]

    def finish(self) -> None:
        for j, c in enumerate(self.present):
            self.pending[c] += [(blobs[j], at, n) for blobs, at, n in self.small]
        self.small.clear()
        for c, parts in self.pending.items():
            if not parts:
                continue
            floats = self.dtypes[c].kind == "f"
            value = codec.constant_many(parts, floats, self._where(c), self.dtypes[c])
            if value is not None:
                for _, at, n in parts:
                    self._one_value(c, at, n, value)
            else:
                if c in self.narrow:  # the heads' range may be wider than the values': narrowed() mends that
                    self._hold(c, codec.head_bounds(parts))
                    self.written[c] = self.n
                self._widen(c, codec.decode_many(self.out[c], parts, floats, self._where(c)))
            parts.clear()
        for c, stretches in self.same.items():
            self._write_one_values(c, stretches)

    def _write_one_values(self, c: str, stretches: list[tuple[int, int, int | float]]) -> None:
        """One value repeated when these stretches cover every row (no batch of the column was decoded) with one
        value, else each written into the column."""
        self._hold(c, self.bounds[c])
        dt = self.out[c].dtype
        every_row = self.n > 0 and sum(take for _, take, _ in stretches) == self.n
        if every_row and len({np.array(v, dtype=dt).tobytes() for _, _, v in stretches}) == 1:
            self.out[c] = np.broadcast_to(np.array(stretches[0][2], dtype=dt), self.n)
        else:
            for at, take, value in stretches:
                self.out[c][at : at + take] = value
        stretches.clear()

    def _where(self, c: str) -> str:
        return f"{self.path} is damaged: {self.table}.{c}"


def _check_counts(
    db: sqlite3.Connection, path: str, table: str, kept: list[str], first: int, last: int
) -> None:
    """No batch among rowids first..last claims more than VALUELESS_ROWS rows with no column whose blob holds
    them: a constant column stores one value whatever the count, so only such a batch could make a load fill
    gigabytes from a damaged count (every other count must match its blobs' lengths). A stream batch whose
    every column is NULL is one the recorder folded: a load reads past those (store.folded_stream_rows)."""
    if not kept:
        return
    lengths = ", ".join(f"length({quoted(c)})" for c in kept)
    query = f"SELECT {COUNT}, {lengths} FROM {quoted(table)} WHERE rowid BETWEEN ? AND ? AND {COUNT} > ?"
    for n, *sizes in db.execute(query, (first, last, VALUELESS_ROWS)):
        folded = table == FOLDED_TABLE and all(size is None for size in sizes)
        if all(size is None or size <= codec.HEAD for size in sizes) and not folded:
            raise RecordingError(
                f"{path} is damaged: a batch of {table} claims {n:,} rows but holds none of them"
            )


def read_table(
    db: sqlite3.Connection,
    path: str,
    table: str,
    schema: Mapping[str, Any],
    lo: int = 0,
    hi: int | None = None,
    sizes: list[tuple[int, int]] | None = None,
    narrow: Sequence[str] = (),
) -> Table:
    """Rows [lo, hi) of `table` in append order (all by default), as the schema's dtypes, checked, but the
    integer columns `narrow` as narrow as their values allow (`narrowed`, from the bounds the checks used).
    `sizes`: the batches to count rows over, as batch_sizes gives them (default: every batch of the table)."""
    present = {r[1] for r in db.execute(f"PRAGMA table_info({quoted(table)})")}
    sizes = batch_sizes(db, path, table) if sizes is None else sizes
    total = sum(n for _, n in sizes)
    hi = total if hi is None else min(hi, total)
    lo = max(0, min(lo, hi))
    start, wanted = 0, []
    for rowid, n in sizes:
        if start < hi and start + n > lo:
            wanted.append((rowid, n, start))
        start += n
    kept = [c for c in schema if c in present]
    if wanted:
        _check_counts(db, path, table, kept, wanted[0][0], wanted[-1][0])
    check_fits_in_memory(path, table, hi - lo, sum(np.dtype(d).itemsize for d in schema.values()))
    reader = _Reader(path, table, schema, kept, hi - lo, narrow)
    cols = ", ".join([COUNT, *map(quoted, kept)])
    if wanted:  # one scan over the wanted batches (consecutive rowids), one batch in memory at a time
        query = f"SELECT {cols} FROM {quoted(table)} WHERE rowid BETWEEN ? AND ? ORDER BY rowid"
        done = 0
        for row in db.execute(query, (wanted[0][0], wanted[-1][0])):
            if done == len(wanted) or row[0] != wanted[done][1]:
                break
            _, n, first = wanted[done]
            skip = max(lo - first, 0)
            take = min(first + n, hi) - first - skip
            reader.fill(row[1:], first + skip - lo, n, skip, take)
            done += 1
        if done != len(wanted):
            raise RecordingError(f"{path} is damaged: the batches of {table} changed while they were read")
    reader.finish()
    for c, d in schema.items():
        check_column(path, table, c, reader.out[c], d, reader.bounds[c])
    return narrowed(Table(reader.out), narrow, reader.bounds)
