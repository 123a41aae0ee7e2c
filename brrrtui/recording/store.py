"""The recording file: one SQLite database, appended one transaction per batch, readable after a crash.

Why SQLite: it is in the standard library, any tool (`sqlite3 run.brrr`) opens it, and a transaction either
lands whole or not at all, so `kill -9` of either process leaves every batch committed before it readable.
The rollback journal (not WAL) keeps a recording one file.

Tables (times are Unix-epoch nanoseconds; -1 means unknown; names are ids into `strings`):

    meta(key, value)        JSON values: format, format_version, columns (each column's dtype), argv, cwd,
                            started_at_ns, ended_at_ns, exit_code, status, versions, device, peaks, notes
    strings(id, s)          interned kernel/op names and shape strings
    lines(id, file, line, function)
    windows, steps, gpu, runtime, ops, spans, telemetry, capture_costs, line_samples, stream, stream_agg,
    stream_folds, stream_busy, stream_templates: the columns of
                            brrrtui.contract.schema's *_SCHEMA, one row per committed batch holding each
                            column as a typed array (format 2: brrrtui.recording.columns). Format 1 files
                            (one SQL row per record) are still read (brrrtui.recording.rows_v1).
"""

from __future__ import annotations

import json
import os
import sqlite3
import stat
import time
from collections.abc import Sequence
from typing import Any

import numpy as np

from brrrtui.contract.errors import InputError
from brrrtui.contract.messages import DeviceFacts, MeasuredPeaks
from brrrtui.contract.model import SourceLine, Table, Trace, empty_table
from brrrtui.contract.safe import safe_strings, safe_text, safe_value
from brrrtui.contract.schema import (
    CAPTURE_COST_SCHEMA,
    GPU_SCHEMA,
    LINE_SAMPLE_SCHEMA,
    OP_SCHEMA,
    RUNTIME_SCHEMA,
    SPAN_SCHEMA,
    STEP_SCHEMA,
    STREAM_AGG_SCHEMA,
    STREAM_BUSY_SCHEMA,
    STREAM_FOLD_SCHEMA,
    STREAM_SCHEMA,
    STREAM_TEMPLATE_SCHEMA,
    TELEMETRY_SCHEMA,
    WINDOW_SCHEMA,
)
from brrrtui.recording import columns, rows_v1
from brrrtui.recording.checks import (
    SCHEMA_TABLES,
    RecordingError,
    check_format,
    check_ids,
    connect_untrusted,
    database_error,
    device_from_meta,
    parse_meta,
    peaks_from_meta,
)
from brrrtui.recording.fold_reads import FOLDED_TABLES, fold_count, read_whole_folds
from brrrtui.recording.lock import is_locked
from brrrtui.recording.notes import explain_no_window, mark_incomplete
from brrrtui.recording.outputs import kind_of, lstat_or_none
from brrrtui.runtime.parallel import concurrently

__all__ = ["RecordingError", "RecordingWriter", "load_recording"]

FORMAT = "brrrtui-recording"
FORMAT_VERSION = 2

TABLES: dict[str, dict[str, Any]] = {
    "windows": WINDOW_SCHEMA,
    "steps": STEP_SCHEMA,
    "gpu": GPU_SCHEMA,
    "runtime": RUNTIME_SCHEMA,
    "ops": OP_SCHEMA,
    "spans": SPAN_SCHEMA,
    "telemetry": TELEMETRY_SCHEMA,
    "capture_costs": CAPTURE_COST_SCHEMA,
    "line_samples": LINE_SAMPLE_SCHEMA,
    "stream": STREAM_SCHEMA,
    "stream_agg": STREAM_AGG_SCHEMA,
    "stream_folds": STREAM_FOLD_SCHEMA,
    "stream_busy": STREAM_BUSY_SCHEMA,
    "stream_templates": STREAM_TEMPLATE_SCHEMA,
}
STREAM_TAIL = 400_000
"""Rows of the continuous kernel stream a load keeps in memory, the newest (~35 MB); the file keeps them all
unless the recorder folded the older ones into aggregates (brrrtui.record.fold), which a load reads whole."""


def schema_sql() -> str:
    stmts = [
        "CREATE TABLE IF NOT EXISTS meta(key TEXT PRIMARY KEY, value TEXT)",
        "CREATE TABLE IF NOT EXISTS strings(id INTEGER PRIMARY KEY, s TEXT NOT NULL)",
        "CREATE TABLE IF NOT EXISTS lines(id INTEGER PRIMARY KEY, file TEXT, line INTEGER, function TEXT)",
    ]
    stmts += [columns.create_sql(table, schema) for table, schema in TABLES.items()]
    return ";\n".join(stmts) + ";"


class RecordingWriter:
    """Appends batches to a recording. One writer per file; every `append` is one transaction. It writes a
    regular file (or makes one); which file a command may write is brrrtui.recording.outputs' to say."""

    def __init__(self, path: str):
        self.path = path
        existing = lstat_or_none(path)
        if existing is not None and (kind := kind_of(existing.st_mode)) is not None:
            raise InputError(
                f"cannot write {path}: it is {kind}; a recording is written only to a regular file"
            )
        # isolation_level=None: we issue BEGIN/COMMIT ourselves, one per batch
        self.db = sqlite3.connect(path, isolation_level=None, check_same_thread=False)
        self.db.execute("PRAGMA journal_mode=DELETE")
        self.db.execute("PRAGMA synchronous=NORMAL")
        self._upgrade()
        self.db.executescript(schema_sql())
        self.set_meta(format=FORMAT, format_version=FORMAT_VERSION, columns=columns.layout(TABLES))

    def _upgrade(self) -> None:
        """An older brrrtui recording that this writer appends to is first rewritten in today's layout."""
        names = {r[0] for r in self.db.execute("SELECT name FROM sqlite_master WHERE type='table'")}
        if "meta" not in names:
            return
        meta = read_meta(self.db, self.path)
        version = meta.get("format_version", 0)
        if meta.get("format") == FORMAT and isinstance(version, int) and version < 2:
            rows_v1.upgrade(self.db, self.path, TABLES)

    def set_meta(self, **items: Any) -> None:
        with self.db:
            self.db.execute("BEGIN")
            self.db.executemany(
                "INSERT OR REPLACE INTO meta(key, value) VALUES (?, ?)",
                [(k, json.dumps(v)) for k, v in items.items()],
            )

    def append(self, batch: dict[str, Any]) -> None:
        """batch: optional keys `strings` [(id, s)], `lines` [(id, file, line, function)], and any table of
        TABLES as a list of row tuples in schema order, a 2-D array of them, or a Table."""
        with self.db:
            self.db.execute("BEGIN")
            if batch.get("strings"):
                self.db.executemany("INSERT OR REPLACE INTO strings(id, s) VALUES (?, ?)", batch["strings"])
            if batch.get("lines"):
                self.db.executemany("INSERT OR REPLACE INTO lines VALUES (?, ?, ?, ?)", batch["lines"])
            for table, schema in TABLES.items():
                rows = batch.get(table)
                if rows is not None and len(rows):
                    columns.insert(self.db, table, schema, rows)
            # when the last batch landed: what a reader reports for a recording whose writer was killed
            self.db.execute(
                "INSERT OR REPLACE INTO meta(key, value) VALUES ('last_batch_ns', ?)", (str(time.time_ns()),)
            )

    def close(self) -> None:
        self.db.close()


def write_trace(trace: Trace, path: str, batch_rows: int = 500_000) -> None:
    """Write a whole Trace as a new recording: its meta (not the loader's notes), names, and every table in
    batches of at most `batch_rows` rows (a converter, and how tests and benchmarks make big files)."""
    w = RecordingWriter(path)
    try:
        skip = {"format", "format_version", "columns", "load_notes"}
        w.set_meta(**{k: v for k, v in trace.meta.items() if k not in skip})
        w.append(
            {
                "strings": list(enumerate(trace.strings)),
                "lines": [(i, ln.file, ln.line, ln.function) for i, ln in enumerate(trace.lines)],
            }
        )
        for name in TABLES:
            table: Table = getattr(trace, name)
            for lo in range(0, len(table), batch_rows):
                w.append({name: table.take(np.arange(lo, min(lo + batch_rows, len(table))))})
    finally:
        w.close()


READ_TABLES = frozenset({"meta", "strings", "lines", *TABLES}) | SCHEMA_TABLES
"""The only tables a reader's connection may read: a table a newer writer added is never read."""


def open_readonly(path: str, shown: str | None = None) -> sqlite3.Connection:
    """A connection that reads `path` as untrusted input and only its expected tables (READ_TABLES), as
    brrrtui.recording.checks.connect_untrusted makes it. `shown`: the file as the user named it."""
    return connect_untrusted(path, shown, READ_TABLES)


def is_recording(path: str) -> bool:
    """Whether `path` is a regular file that starts as an SQLite database does (a FIFO is never waited on)."""
    fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_NOCTTY | os.O_CLOEXEC)
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            return False
        return os.read(fd, 16) == b"SQLite format 3\x00"
    finally:
        os.close(fd)


def is_brrrtui_recording(path: str) -> bool:
    """Whether `path` is a readable brrrtui recording (what `record -o` may replace)."""
    try:
        if not is_recording(path):
            return False
        db = open_readonly(path)
        try:
            row = db.execute("SELECT value FROM meta WHERE key = 'format'").fetchone()
        finally:
            db.close()
        return row is not None and row[0] == json.dumps(FORMAT)
    except (OSError, sqlite3.Error, InputError):
        return False


def read_meta(db: sqlite3.Connection, path: str = "recording") -> dict[str, Any]:
    return parse_meta(path, db.execute("SELECT key, value FROM meta").fetchall())


class Tables:
    """The tables of one open recording, read the way its format version stores them."""

    def __init__(self, db: sqlite3.Connection, path: str, meta: dict[str, Any]):
        self.db, self.path, self.meta = db, path, meta
        self.columnar = meta.get("format_version", 0) >= 2
        self.names = {r[0] for r in db.execute("SELECT name FROM sqlite_master WHERE type='table'")}

    def total(self, table: str) -> int:
        """How many rows `table` holds (0 for a table the file does not have)."""
        if table not in self.names:
            return 0
        if self.columnar:
            return columns.total_rows(self.db, self.path, table)
        return rows_v1.total_rows(self.db, table)

    def read(self, table: str, lo: int = 0, hi: int | None = None, narrow: Sequence[str] = ()) -> Table:
        """Rows [lo, hi) of `table` in append order, the integer columns `narrow` held narrow (the types
        columns.narrowed gives; a columnar table decodes them so); a table added in a later version reads
        empty."""
        schema = TABLES[table]
        if table not in self.names:
            return empty_table(schema)
        if self.columnar:
            return columns.read_table(self.db, self.path, table, schema, lo, hi, narrow=narrow)
        return columns.narrowed(rows_v1.read_table(self.db, self.path, table, schema, lo, hi), narrow)


def _dense(path: str, what: str, rows: list[Any]) -> int:
    """The length of a table of ids (strings, lines) from its (id, ...) rows; ids are small ints."""
    if not rows:
        return 0
    ids = [r[0] for r in rows]
    if not all(isinstance(i, int) and 0 <= i < 4 * len(rows) + 1024 for i in ids):
        bad = next(i for i in ids if not (isinstance(i, int) and 0 <= i < 4 * len(rows) + 1024))
        raise RecordingError(f"{path} is damaged: its {what} table holds the id {bad!r:.40}")
    return int(max(ids)) + 1


def _read_names(db: sqlite3.Connection, path: str) -> tuple[list[str], list[SourceLine]]:
    """The string and line tables, every text made safe to print (brrrtui.contract.safe)."""
    strings_rows = db.execute("SELECT id, s FROM strings ORDER BY id").fetchall()
    raw: list[Any] = [""] * _dense(path, "strings", strings_rows)
    for i, s in strings_rows:
        raw[i] = s
    strings = safe_strings(raw)
    line_rows = db.execute("SELECT id, file, line, function FROM lines ORDER BY id").fetchall()
    lines = [SourceLine("?", 0, "?")] * _dense(path, "lines", line_rows)
    for i, f, n, fn in line_rows:
        number = n if isinstance(n, int) and 0 <= n < 2**31 else 0
        lines[i] = SourceLine(safe_text(f), number, safe_text(fn))
    return strings, lines


def folded_stream_rows(tables: Tables) -> int:
    """The stream's first rows that the recorder folded into stream_agg: their batches keep their row count
    (so row numbers stay put for readers that follow the file) and lose their values (NULL columns)."""
    if not tables.columnar or "stream" not in tables.names:
        return 0
    row = tables.db.execute('SELECT sum(batch_rows) FROM stream WHERE "after_window" IS NULL').fetchone()
    return int(row[0] or 0)


def _read_tables(tables: Tables, stream_tail: int, path: str) -> tuple[dict[str, Table], int]:
    """Every table, the ops (the biggest: ~3 ops a kernel) on a thread beside the others, through a connection
    of its own (SQLite lets one thread at a time into a connection): the time goes to decoding into fresh
    columns, which numpy and SQLite do without the GIL. A damaged row count cannot make either fill more
    than its blobs hold (brrrtui.recording.columns checks the counts before it allocates). `path`: the file
    itself (tables.path names it as the user did)."""

    def read(t: str, source: Tables) -> Table:
        return source.read(t, narrow=columns.KEY_COLUMNS.get(t, ()))

    def read_ops() -> Table:
        db = open_readonly(path, tables.path)
        try:
            return read("ops", Tables(db, tables.path, tables.meta))
        finally:
            db.close()

    folds = fold_count(tables)  # before any of the reads below
    ops, out = concurrently(
        read_ops, lambda: {t: read(t, tables) for t in TABLES if t not in ("stream", "ops")}
    )
    out["ops"] = ops

    def read_stream(again: bool) -> tuple[int, Table]:
        if again:  # a fold came between: the aggregates again, with the raw rows
            out.update({t: tables.read(t) for t in FOLDED_TABLES})
        return _stream_tail(tables, stream_tail)

    stream_total, out["stream"] = read_whole_folds(tables, read_stream, folds)
    return out, stream_total


def _stream_tail(tables: Tables, stream_tail: int) -> tuple[int, Table]:
    """The stream's row count and its newest `stream_tail` rows, none the recorder folded."""
    stream_total = tables.total("stream")
    lo = max(folded_stream_rows(tables), stream_total - stream_tail)
    return stream_total, tables.read("stream", min(lo, stream_total), stream_total)


def load_recording(path: str, stream_tail: int = STREAM_TAIL, source: str | None = None) -> Trace:
    """Read a whole recording (also one still being written, or one whose writer was killed); of the kernel
    stream, only the newest `stream_tail` rows. `source`: the file the user named, when `path` is a copy of
    it (an unpacked .gz). A damaged file ends in one RecordingError line (brrrtui.recording.checks)."""
    shown = path if source is None else source
    db: sqlite3.Connection | None = None
    try:
        db = open_readonly(path, shown)
        try:
            if (
                db.execute("SELECT 1 FROM sqlite_master WHERE type='table' AND name='meta'").fetchone()
                is None
            ):
                raise RecordingError(f"{shown} is an SQLite file but not a brrrtui recording (no meta table)")
            meta = read_meta(db, shown)
            check_format(shown, meta, FORMAT, FORMAT_VERSION)
            tables, stream_total = _read_tables(Tables(db, shown, meta), stream_tail, path)
            # names after the rows: a batch committed in between adds names its rows need, never removes
            strings, lines = _read_names(db, shown)
        finally:
            db.close()
    except sqlite3.DatabaseError as e:
        raise database_error(shown, db, e) from None
    check_ids(shown, tables, len(strings), len(lines))
    return make_trace(path, shown, meta, strings, lines, tables, stream_total)


def make_trace(
    path: str,
    shown: str,
    meta: dict[str, Any],
    strings: list[str],
    lines: list[SourceLine],
    tables: dict[str, Table],
    stream_total: int,
) -> Trace:
    """A recording's parts, checked, as a Trace, with what a reader should be told (load_notes)."""
    meta = safe_value(meta)
    if meta.get("status") == "running" and not is_locked(path):
        meta = mark_incomplete(meta, tables)
    meta = explain_no_window(meta, tables)
    return Trace(
        strings=strings,
        lines=lines,
        device=device_from_meta(shown, meta.get("device")),
        peaks=peaks_from_meta(shown, meta.get("peaks")),
        meta=meta,
        source=shown,
        stream_total=stream_total,
        **tables,  # type: ignore[arg-type]  # one Table per table name: mypy cannot match ** to fields
    )


def device_meta(facts: DeviceFacts) -> dict[str, Any]:
    """The recording's `device` meta value (load_recording reads it back into a Device)."""
    return {
        "name": facts.name,
        "num_sms": facts.num_sms,
        "compute_capability": facts.compute_capability,
        "total_memory_bytes": facts.total_memory_bytes,
        "l2_bytes": facts.l2_bytes,
        "cuda": facts.cuda_version,
    }


def peaks_meta(peaks: MeasuredPeaks) -> dict[str, Any]:
    """The recording's `peaks` meta value (load_recording reads it back into a Peaks)."""
    return {
        "tensor_flops_per_s": peaks.tensor_flops_per_s,
        "fp32_flops_per_s": peaks.fp32_flops_per_s,
        "bytes_per_s": peaks.bytes_per_s,
        "source": "measured",
        "l2_bytes": peaks.l2_bytes,
    }
