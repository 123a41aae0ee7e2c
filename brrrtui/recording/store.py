"""The recording file: one SQLite database, appended one transaction per batch, readable after a crash.

Why SQLite: it is in the standard library, any tool (`sqlite3 run.brrr`) opens it, and a transaction either
lands whole or not at all, so `kill -9` of either process leaves every batch committed before it readable.
The rollback journal (not WAL) keeps a recording one file.

Tables (times are Unix-epoch nanoseconds; -1 means unknown; names are ids into `strings`):

    meta(key, value)        JSON values: argv, cwd, started_at_ns, ended_at_ns, exit_code, status, versions,
                            device, peaks, notes
    strings(id, s)          interned kernel/op names and shape strings
    lines(id, file, line, function)
    windows, steps, gpu, runtime, ops, spans, telemetry, capture_costs, line_samples, stream: the columns of
                            brrrtui.contract.schema's *_SCHEMA (a table's rowid is its append order)
"""

from __future__ import annotations

import json
import os
import sqlite3
import time
from typing import Any

import numpy as np

from analyzers.errors import InputError
from analyzers.model import SourceLine, Table, Trace, empty_table
from brrrtui.contract.messages import DeviceFacts, MeasuredPeaks
from brrrtui.contract.schema import (
    CAPTURE_COST_SCHEMA,
    GPU_SCHEMA,
    LINE_SAMPLE_SCHEMA,
    OP_SCHEMA,
    RUNTIME_SCHEMA,
    SPAN_SCHEMA,
    STEP_SCHEMA,
    STREAM_SCHEMA,
    TELEMETRY_SCHEMA,
    WINDOW_SCHEMA,
)
from brrrtui.recording.checks import (
    RecordingError,
    check_column,
    check_format,
    check_ids,
    column_matrix,
    device_from_meta,
    parse_meta,
    peaks_from_meta,
)
from brrrtui.recording.lock import is_locked
from brrrtui.recording.notes import explain_no_window, mark_incomplete
from brrrtui.recording.safe import safe_strings, safe_text, safe_value

__all__ = ["RecordingError", "RecordingWriter", "load_recording", "StreamReader"]

FORMAT = "brrrtui-recording"
FORMAT_VERSION = 1

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
}
STREAM_TAIL = 400_000
"""Rows of the continuous kernel stream a load keeps in memory, the newest (~35 MB); the file keeps them all."""


def _sql_type(dtype: Any) -> str:
    return "REAL" if np.dtype(dtype).kind == "f" else "INTEGER"


def schema_sql() -> str:
    stmts = [
        "CREATE TABLE IF NOT EXISTS meta(key TEXT PRIMARY KEY, value TEXT)",
        "CREATE TABLE IF NOT EXISTS strings(id INTEGER PRIMARY KEY, s TEXT NOT NULL)",
        "CREATE TABLE IF NOT EXISTS lines(id INTEGER PRIMARY KEY, file TEXT, line INTEGER, function TEXT)",
    ]
    for table, schema in TABLES.items():
        cols = ", ".join(f"{c} {_sql_type(t)}" for c, t in schema.items())
        stmts.append(f"CREATE TABLE IF NOT EXISTS {table}({cols})")
    return ";\n".join(stmts) + ";"


class RecordingWriter:
    """Appends batches to a recording. One writer per file; every `append` is one transaction."""

    def __init__(self, path: str):
        self.path = path
        # isolation_level=None: we issue BEGIN/COMMIT ourselves, one per batch
        self.db = sqlite3.connect(path, isolation_level=None, check_same_thread=False)
        self.db.execute("PRAGMA journal_mode=DELETE")
        self.db.execute("PRAGMA synchronous=NORMAL")
        self.db.executescript(schema_sql())
        self.set_meta(format=FORMAT, format_version=FORMAT_VERSION)

    def set_meta(self, **items: Any) -> None:
        with self.db:
            self.db.execute("BEGIN")
            self.db.executemany(
                "INSERT OR REPLACE INTO meta(key, value) VALUES (?, ?)",
                [(k, json.dumps(v)) for k, v in items.items()],
            )

    def append(self, batch: dict[str, Any]) -> None:
        """batch: optional keys `strings` [(id, s)], `lines` [(id, file, line, function)], and any table of
        TABLES as a list of row tuples in schema order."""
        with self.db:
            self.db.execute("BEGIN")
            if batch.get("strings"):
                self.db.executemany("INSERT OR REPLACE INTO strings(id, s) VALUES (?, ?)", batch["strings"])
            if batch.get("lines"):
                self.db.executemany("INSERT OR REPLACE INTO lines VALUES (?, ?, ?, ?)", batch["lines"])
            for table, schema in TABLES.items():
                rows = batch.get(table)
                if rows:
                    marks = ", ".join("?" * len(schema))
                    self.db.executemany(f"INSERT INTO {table} VALUES ({marks})", rows)
            # when the last batch landed: what a reader reports for a recording whose writer was killed
            self.db.execute(
                "INSERT OR REPLACE INTO meta(key, value) VALUES ('last_batch_ns', ?)", (str(time.time_ns()),)
            )

    def close(self) -> None:
        self.db.close()


def open_readonly(path: str) -> sqlite3.Connection:
    if not os.path.exists(path):
        raise RecordingError(f"{path}: no such file")
    if os.path.isdir(path):
        raise RecordingError(f"{path} is a directory, not a recording")
    # Read-write when we may, so SQLite can roll back a transaction a killed writer left half done.
    mode = (
        "rw"
        if os.access(path, os.W_OK) and os.access(os.path.dirname(os.path.abspath(path)), os.W_OK)
        else "ro"
    )
    uri = "file:" + os.path.abspath(path).replace("?", "%3f").replace("#", "%23") + f"?mode={mode}"
    return sqlite3.connect(uri, uri=True, check_same_thread=False)


def is_recording(path: str) -> bool:
    with open(path, "rb") as f:
        return f.read(16) == b"SQLite format 3\x00"


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


def _read_table(
    db: sqlite3.Connection, table: str, schema: dict[str, Any], where: str = "", path: str = "recording"
) -> Table:
    """One query per column kind: numpy builds an int64 (or float64) matrix from the row tuples in C, 1.5x
    faster than splitting tuples in Python (1 M kernels + 3 M ops: 12.2 s -> 8.3 s here). A cell that is no
    number in its column's range (a damaged file) ends in one RecordingError line."""
    groups = (
        [k for k, t in schema.items() if np.dtype(t).kind != "f"],
        [k for k, t in schema.items() if np.dtype(t).kind == "f"],
    )
    columns: dict[str, np.ndarray] = {}
    # a column added in a later version (spans.module, spans.lib_line) reads as unknown from older files
    present = {r[1] for r in db.execute(f"PRAGMA table_info({table})")}
    for names, dtype in zip(groups, (np.int64, np.float64), strict=True):
        if not names:
            continue
        exprs = [n if n in present else ("-1" if dtype is np.int64 else "NULL") for n in names]
        rows = db.execute(f"SELECT {', '.join(exprs)} FROM {table} {where}").fetchall()
        matrix = column_matrix(path, table, names, rows, dtype)
        for j, name in enumerate(names):
            check_column(path, table, name, matrix[:, j], schema[name])
            columns[name] = matrix[:, j].astype(schema[name])
    return Table({k: columns[k] for k in schema})


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
    """The string and line tables, every text made safe to print (brrrtui.recording.safe)."""
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


def _read_tables(
    db: sqlite3.Connection, path: str, names: set[str], stream_tail: int
) -> tuple[dict[str, Table], int]:
    # tables added in later versions of the format may be missing from older recordings
    tables = {
        t: _read_table(db, t, s, path=path) if t in names else empty_table(s)
        for t, s in TABLES.items()
        if t != "stream"
    }
    stream_total = _max_rowid(db, "stream") if "stream" in names else 0
    tables["stream"] = (
        _read_table(db, "stream", STREAM_SCHEMA, f"WHERE rowid > {stream_total - stream_tail}", path=path)
        if stream_total
        else empty_table(STREAM_SCHEMA)
    )
    return tables, stream_total


def load_recording(path: str, stream_tail: int = STREAM_TAIL, source: str | None = None) -> Trace:
    """Read a whole recording (also one still being written, or one whose writer was killed); of the kernel
    stream, only the newest `stream_tail` rows. `source`: the file the user named, when `path` is a copy of
    it (an unpacked .gz). A damaged file ends in one RecordingError line (brrrtui.recording.checks)."""
    shown = path if source is None else source
    try:
        db = open_readonly(path)
        try:
            names = {r[0] for r in db.execute("SELECT name FROM sqlite_master WHERE type='table'")}
            if "meta" not in names:
                raise RecordingError(f"{shown} is an SQLite file but not a brrrtui recording (no meta table)")
            meta = read_meta(db, shown)
            check_format(shown, meta, FORMAT, FORMAT_VERSION)
            strings, lines = _read_names(db, shown)
            tables, stream_total = _read_tables(db, shown, names, stream_tail)
        finally:
            db.close()
    except sqlite3.DatabaseError as e:
        raise RecordingError(f"{shown} is damaged or not a recording ({e})") from None
    check_ids(shown, tables, len(strings), len(lines))
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


def _max_rowid(db: sqlite3.Connection, table: str) -> int:
    return int(db.execute(f"SELECT coalesce(max(rowid), 0) FROM {table}").fetchone()[0])


class StreamReader:
    """Reads what a live recording's kernel stream gained since the last poll (rows and the strings they
    name), so a live view follows it without re-reading the whole file."""

    def __init__(self, path: str, after_rowid: int = 0, after_string: int = -1):
        self.path = path
        self.rowid = after_rowid
        self.string_id = after_string

    def poll(self, limit: int = STREAM_TAIL) -> tuple[Table, list[tuple[int, str]]]:
        """(new stream rows, at most the newest `limit`; new (id, string) pairs)."""
        try:
            db = open_readonly(self.path)
            try:
                names = {r[0] for r in db.execute("SELECT name FROM sqlite_master WHERE type='table'")}
                if "stream" not in names:
                    return empty_table(STREAM_SCHEMA), []
                last = _max_rowid(db, "stream")
                lo = max(self.rowid, last - limit)
                rows = _read_table(db, "stream", STREAM_SCHEMA, f"WHERE rowid > {lo} AND rowid <= {last}")
                strings = db.execute(
                    "SELECT id, s FROM strings WHERE id > ? ORDER BY id", (self.string_id,)
                ).fetchall()
            finally:
                db.close()
        except sqlite3.DatabaseError as e:
            raise RecordingError(f"{self.path} is damaged or not a recording ({e})") from None
        self.rowid = last
        if strings:
            self.string_id = strings[-1][0]
        return rows, [(i, safe_text(s)) for i, s in strings]
