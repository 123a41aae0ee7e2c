"""Following a recording while it is written: each poll reads only what was committed since the last one.

`load_recording` reads the whole file each time; a live view that re-reads it per window pays for every
window so far (a million kernels: ~0.5 s, and growing). A `Follower` keeps the tables it has read in
growable columns and, per poll, reads the rows past the ones it holds (format 2 stores them as whole
batches: only the new batches' blobs are read), the strings and lines with higher ids, and the meta; it
returns the whole recording as the Trace `load_recording` would return, at a cost proportional to what was
added. The stream keeps its newest `stream_tail` rows and none that the recorder has folded into aggregates
(brrrtui.record.fold; the aggregate tables only grow), as a load does, and a poll that a fold came in the middle
of reads again (brrrtui.recording.fold_reads). The live TUI reads its recording
through one (brrrtui.session.Source).
"""

from __future__ import annotations

import sqlite3
from collections.abc import Callable
from typing import Any

import numpy as np

from brrrtui.contract.model import SourceLine, Table, Trace
from brrrtui.contract.safe import safe_text
from brrrtui.recording import columns
from brrrtui.recording.checks import RecordingError, check_format, check_ids
from brrrtui.recording.fold_reads import read_whole_folds
from brrrtui.recording.store import (
    FORMAT,
    FORMAT_VERSION,
    STREAM_TAIL,
    TABLES,
    Tables,
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
        self.rows = dict.fromkeys(TABLES, 0)  # per table: rows in the batches read (held or not)
        self.rowids = dict.fromkeys(TABLES, 0)  # per table: the last batch read (format 2)
        self.folded = (0, 0)  # the last stream batch seen folded (rowid), and the rows up to it
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
                source = Tables(db, self.path, meta)
                # a fold committed between the reads below would be seen half (rows in neither the stream
                # nor the aggregates read, or an emptied batch read as damaged): read them again then
                new, keep = read_whole_folds(source, lambda _: self._read_tables(source))
                # names after the rows: a batch committed in between adds names its rows need, never removes
                self._read_names(db)
            finally:
                db.close()
        except sqlite3.DatabaseError as e:
            raise RecordingError(f"{self.path} is damaged or not a recording ({e})") from None
        check_ids(self.path, new, len(self.strings), len(self.lines))  # the rows held were checked before
        keep()  # only now: a failed poll changes nothing
        tables = {t: g.table() for t, g in self.tables.items()} | {"stream": self.stream}
        strings = [s if s is not None else "" for s in self.strings]
        lines = [ln if ln is not None else SourceLine("?", 0, "?") for ln in self.lines]
        return make_trace(self.path, self.path, meta, strings, lines, tables, self.stream_total)

    def _read_tables(self, source: Tables) -> tuple[dict[str, Table], Callable[[], None]]:
        """Each table's rows past those held, and what appends them (and keeps the stream's newest rows) once
        they are checked. Only the batches past the last one read are counted, so a poll costs what was added,
        not the file's length in batches (an hour of steps, telemetry and stream is ~15 k batches)."""
        extents = {t: self._extent(source, t) for t in TABLES}
        new: dict[str, Table] = {}
        for name in self.tables:
            sizes, total = extents[name]
            if total > self.rows[name]:
                new[name] = self._read(source, name, sizes, self.rows[name], total)
        sizes, stream_total = extents["stream"]
        folded = self._folded(source)
        # the first row a load keeps: the newest stream_tail, none the recorder folded into stream_agg
        first = min(max(folded[1], stream_total - self.stream_tail), stream_total)
        if stream_total > self.stream_total:
            new["stream"] = self._read(source, "stream", sizes, max(self.stream_total, first), stream_total)
        return new, lambda: self._keep(new, extents, folded, first, stream_total)

    def _keep(
        self,
        new: dict[str, Table],
        extents: dict[str, tuple[list[tuple[int, int]] | None, int]],
        folded: tuple[int, int],
        first: int,
        stream_total: int,
    ) -> None:
        for name, rows in new.items():
            if name != "stream":
                self.tables[name].append(rows)
        for name, (sizes, total) in extents.items():
            self.rowids[name] = sizes[-1][0] if sizes else self.rowids[name]
            self.rows[name] = max(self.rows[name], total)
        self.folded = folded
        held = new.get("stream")
        held = self.stream if held is None else Table.concat([self.stream, held], TABLES["stream"])
        total = max(self.stream_total, stream_total)
        drop = max(0, first - (total - len(held)))  # rows held that were folded since, or fell off the tail
        self.stream = held.take(np.arange(drop, len(held))) if drop else held
        self.stream_total = total

    def _extent(self, source: Tables, name: str) -> tuple[list[tuple[int, int]] | None, int]:
        """The batches of `name` past the last one read (None: a format 1 file, whose rows are counted
        whole), and the rows of `name` now."""
        if not source.columnar:
            return None, source.total(name)
        if name not in source.names:
            return [], self.rows[name]
        sizes = columns.batch_sizes(source.db, self.path, name, self.rowids[name])
        return sizes, self.rows[name] + sum(n for _, n in sizes)

    def _read(
        self, source: Tables, name: str, sizes: list[tuple[int, int]] | None, lo: int, hi: int
    ) -> Table:
        """Rows [lo, hi) of `name`, lo at or past the rows of the batches read before."""
        if sizes is None:
            return source.read(name, lo, hi)
        base = self.rows[name]
        return columns.read_table(source.db, self.path, name, TABLES[name], lo - base, hi - base, sizes)

    def _folded(self, source: Tables) -> tuple[int, int]:
        """The last stream batch the recorder has folded (its columns NULL; brrrtui.record.fold folds the
        oldest batches, whole, in order) and the stream rows up to it: store.folded_stream_rows, counted from
        the last folded batch seen on (past it: the raw batches, which folding keeps few)."""
        rowid, rows = self.folded
        if not source.columnar or "stream" not in source.names:
            return self.folded
        query = (
            'SELECT rowid FROM stream WHERE rowid > ? AND "after_window" IS NULL ORDER BY rowid DESC LIMIT 1'
        )
        last = source.db.execute(query, (rowid,)).fetchone()
        if last is None:
            return self.folded
        n = source.db.execute(
            "SELECT sum(batch_rows) FROM stream WHERE rowid > ? AND rowid <= ?", (rowid, last[0])
        )
        return last[0], rows + int(n.fetchone()[0] or 0)

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
