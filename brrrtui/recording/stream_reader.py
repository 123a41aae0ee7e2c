"""Following a live recording's kernel stream: the rows and strings it gained since the last poll, read
whole while the recorder folds (brrrtui.recording.fold_reads)."""

from __future__ import annotations

import sqlite3

from brrrtui.contract.model import STREAM_SCHEMA, Table, empty_table
from brrrtui.contract.safe import safe_text
from brrrtui.recording.checks import RecordingError
from brrrtui.recording.fold_reads import FOLDED_TABLES, read_whole_folds
from brrrtui.recording.store import STREAM_TAIL, Tables, folded_stream_rows, open_readonly, read_meta


class StreamReader:
    """Reads what a live recording's kernel stream gained since the last poll (rows and the strings they
    name), so a live view follows it without re-reading the whole file."""

    def __init__(self, path: str, after_rowid: int = 0, after_string: int = -1):
        self.path = path
        self.rowid = after_rowid  # stream rows already read (rows are numbered 1.. in append order)
        self.string_id = after_string
        # Set by a poll that found rows past `rowid` folded: they are in neither the rows read nor the
        # aggregates the page holds, so the page must take these folded tables (FOLDED_TABLES, read with the
        # rows) in place of its own and drop its raw rows (all older, so folded too). None: nothing to reload.
        self.reload: dict[str, Table] | None = None

    def poll(self, limit: int = STREAM_TAIL) -> tuple[Table, list[tuple[int, str]]]:
        """(new stream rows, at most the newest `limit` and none folded; new (id, string) pairs); sets
        `reload`."""
        try:
            db = open_readonly(self.path)
            try:
                tables = Tables(db, self.path, read_meta(db, self.path))
                if "stream" not in tables.names:
                    return empty_table(STREAM_SCHEMA), []
                last, rows, reload = read_whole_folds(tables, lambda _: self._read(tables, limit))
                strings = db.execute(
                    "SELECT id, s FROM strings WHERE id > ? ORDER BY id", (self.string_id,)
                ).fetchall()
            finally:
                db.close()
        except sqlite3.DatabaseError as e:
            raise RecordingError(f"{self.path} is damaged or not a recording ({e})") from None
        self.rowid, self.reload = last, reload
        if strings:
            self.string_id = strings[-1][0]
        return rows, [(i, safe_text(s)) for i, s in strings]

    def _read(self, tables: Tables, limit: int) -> tuple[int, Table, dict[str, Table] | None]:
        last = tables.total("stream")
        folded = min(folded_stream_rows(tables), last)
        rows = tables.read("stream", max(self.rowid, last - limit, folded), last)
        reload = {t: tables.read(t) for t in FOLDED_TABLES} if folded > self.rowid else None
        return last, rows, reload
