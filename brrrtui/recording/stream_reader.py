"""Following a live recording's kernel stream: the rows and strings it gained since the last poll."""

from __future__ import annotations

import sqlite3

from analyzers.model import STREAM_SCHEMA, Table, empty_table
from brrrtui.recording.checks import RecordingError
from brrrtui.recording.safe import safe_text
from brrrtui.recording.store import STREAM_TAIL, Tables, open_readonly, read_meta


class StreamReader:
    """Reads what a live recording's kernel stream gained since the last poll (rows and the strings they
    name), so a live view follows it without re-reading the whole file."""

    def __init__(self, path: str, after_rowid: int = 0, after_string: int = -1):
        self.path = path
        self.rowid = after_rowid  # stream rows already read (rows are numbered 1.. in append order)
        self.string_id = after_string

    def poll(self, limit: int = STREAM_TAIL) -> tuple[Table, list[tuple[int, str]]]:
        """(new stream rows, at most the newest `limit`; new (id, string) pairs)."""
        try:
            db = open_readonly(self.path)
            try:
                tables = Tables(db, self.path, read_meta(db, self.path))
                if "stream" not in tables.names:
                    return empty_table(STREAM_SCHEMA), []
                last = tables.total("stream")
                rows = tables.read("stream", max(self.rowid, last - limit), last)
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
