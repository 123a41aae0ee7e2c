"""Following a recording while it is written: each poll reads only what was committed since the last one.

`load_recording` reads the whole file each time; a live view that re-reads it per window pays for every
window so far (a million kernels: ~0.5 s, and growing). A `Follower` keeps the tables it has read in
growable columns and, per poll, reads the rows past the ones it holds (format 2 stores them as whole
batches: only the new batches' blobs are read), the strings and lines with higher ids, and the meta; it
returns the whole recording as the Trace `load_recording` would return, at a cost proportional to what was
added. The stream keeps its newest `stream_tail` rows and none that the recorder has folded into aggregates
(brrrtui.record.fold; the aggregate tables only grow), as a load does. The live TUI reads its recording
through one (brrrtui.tui.live.Source).
"""

from __future__ import annotations

import sqlite3
from typing import Any

import numpy as np

from analyzers.model import SourceLine, Table, Trace
from brrrtui.recording.checks import RecordingError, check_format, check_ids
from brrrtui.recording.safe import safe_text
from brrrtui.recording.store import (
    FORMAT,
    FORMAT_VERSION,
    STREAM_TAIL,
    TABLES,
    Tables,
    folded_stream_rows,
    make_trace,
    open_readonly,
    read_meta,
)


class _Growing:
    """Columns that grow by appending, with room to spare (doubling): appending n rows copies n rows."""

    def __init__(self, schema: dict[str, Any]):
        self.schema = schema
        self.n = 0
        self.columns = {c: np.empty(0, dtype=d) for c, d in schema.items()}

    def append(self, table: Table) -> None:
        m = len(table)
        if not m:
            return
        for c, values in self.columns.items():
            if self.n + m > len(values):
                bigger = np.empty(max(2 * len(values), self.n + m, 1024), dtype=values.dtype)
                bigger[: self.n] = values[: self.n]
                self.columns[c] = values = bigger
            values[self.n : self.n + m] = table[c]
        self.n += m

    def table(self) -> Table:
        """The rows so far (views: rows appended later do not change a table handed out)."""
        return Table({c: v[: self.n] for c, v in self.columns.items()})


class Follower:
    """Reads a recording (also one being written) incrementally; `poll()` is the whole recording now."""

    def __init__(self, path: str, stream_tail: int = STREAM_TAIL):
        self.path = path
        self.stream_tail = stream_tail
        self.tables = {t: _Growing(s) for t, s in TABLES.items() if t != "stream"}
        self.stream = Table({c: np.empty(0, dtype=d) for c, d in TABLES["stream"].items()})
        self.stream_total = 0
        self.strings: list[str | None] = []  # None: an id not committed yet
        self.lines: list[SourceLine | None] = []

    def poll(self) -> Trace:
        """The recording as committed now; raises RecordingError for a file that is not (or no longer) one."""
        try:
            db = open_readonly(self.path)
            try:
                if db.execute("SELECT 1 FROM sqlite_master WHERE name='meta'").fetchone() is None:
                    raise RecordingError(f"{self.path} is an SQLite file but not a brrrtui recording")
                meta = read_meta(db, self.path)
                check_format(self.path, meta, FORMAT, FORMAT_VERSION)
                self._read_names(db)
                new = self._read_tables(Tables(db, self.path, meta))
            finally:
                db.close()
        except sqlite3.DatabaseError as e:
            raise RecordingError(f"{self.path} is damaged or not a recording ({e})") from None
        check_ids(self.path, new, len(self.strings), len(self.lines))  # the rows held were checked before
        tables = {t: g.table() for t, g in self.tables.items()} | {"stream": self.stream}
        strings = [s if s is not None else "" for s in self.strings]
        lines = [ln if ln is not None else SourceLine("?", 0, "?") for ln in self.lines]
        return make_trace(self.path, self.path, meta, strings, lines, tables, self.stream_total)

    def _read_tables(self, source: Tables) -> dict[str, Table]:
        """Append each table's rows past those held; keep the stream's newest rows. Returns the new rows."""
        new: dict[str, Table] = {}
        for name, growing in self.tables.items():
            total = source.total(name)
            if total > growing.n:
                new[name] = source.read(name, growing.n, total)
        stream_total = source.total("stream")
        # the first row a load keeps: the newest stream_tail, none the recorder folded into stream_agg
        first = min(max(folded_stream_rows(source), stream_total - self.stream_tail), stream_total)
        if stream_total > self.stream_total:
            new["stream"] = source.read("stream", max(self.stream_total, first), stream_total)
        for name, rows in new.items():  # only once every read succeeded: a failed poll changes nothing
            if name != "stream":
                self.tables[name].append(rows)
        held = new.get("stream")
        held = self.stream if held is None else Table.concat([self.stream, held], TABLES["stream"])
        total = max(self.stream_total, stream_total)
        drop = max(0, first - (total - len(held)))  # rows held that were folded since, or fell off the tail
        self.stream = held.take(np.arange(drop, len(held))) if drop else held
        self.stream_total = total
        return new

    def _read_names(self, db: sqlite3.Connection) -> None:
        """Strings and lines from the first id not yet read on (ids are never rewritten; a batch may commit
        ids above one still to come, which reads as "" or "?" until it does)."""
        strings = db.execute(
            "SELECT id, s FROM strings WHERE id >= ? ORDER BY id", (self._held(self.strings),)
        )
        self._fill(self.strings, "strings", [(i, safe_text(s)) for i, s in strings.fetchall()])
        lines = db.execute(
            "SELECT id, file, line, function FROM lines WHERE id >= ? ORDER BY id", (self._held(self.lines),)
        )
        self._fill(
            self.lines,
            "lines",
            [
                (
                    i,
                    SourceLine(
                        safe_text(f), n if isinstance(n, int) and 0 <= n < 2**31 else 0, safe_text(fn)
                    ),
                )
                for i, f, n, fn in lines.fetchall()
            ],
        )

    @staticmethod
    def _held(values: list[Any]) -> int:
        """How many leading ids are read (the first hole, or the end)."""
        return next((i for i, v in enumerate(values) if v is None), len(values))

    def _fill(self, values: list[Any], what: str, rows: list[tuple[Any, Any]]) -> None:
        limit = 4 * (len(values) + len(rows)) + 1024  # ids are small ints: as load_recording checks them
        for i, _ in rows:
            if not (isinstance(i, int) and 0 <= i < limit):
                raise RecordingError(f"{self.path} is damaged: its {what} table holds the id {i!r:.40}")
        for i, v in rows:
            if i >= len(values):
                values.extend([None] * (i + 1 - len(values)))
            values[i] = v
