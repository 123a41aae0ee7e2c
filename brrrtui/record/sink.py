"""Where the recorder's writes go: the recording, locked for one writer, and a sibling file when it fails.

A recording that becomes unwritable mid-run (deleted, its folder removed, a disk error) must not cost the
script its run or brrrtui its exit code. The first failure moves the recording to the next free sibling
(`run.brrr.1`, `.2`, ...): what the old file holds is copied over (SQLite's backup reads an unlinked file
through its open descriptor), or, when it cannot be read, the meta, names and lines written so far; then the
write that failed is retried there. If that fails too, further writes are dropped. Either way it is said
once, through `on_failure`.
"""

from __future__ import annotations

import os
import sqlite3
import threading
from collections.abc import Callable
from typing import Any

from analyzers.errors import InputError
from brrrtui.recording.lock import RecordingLock, is_locked
from brrrtui.recording.store import RecordingWriter

WRITE_ERRORS = (sqlite3.Error, OSError)


class Sink:
    def __init__(self, path: str, on_failure: Callable[[str], None]):
        self.path = path
        self.first_path = path
        self.on_failure = on_failure
        self.lock = threading.RLock()
        self.writer: RecordingWriter | None = None
        self.file_lock: RecordingLock | None = None
        self.meta: dict[str, Any] = {}
        self.strings: dict[int, str] = {}
        self.lines: dict[int, tuple[Any, ...]] = {}
        self.dead = False

    def open(self) -> None:
        """Lock the path (a second writer is refused with one line), then start a fresh recording there."""
        lock = RecordingLock(self.path)
        lock.acquire()
        try:
            for suffix in ("", "-journal"):
                if os.path.exists(self.path + suffix):
                    os.remove(self.path + suffix)
            self.writer = RecordingWriter(self.path)
        except WRITE_ERRORS as e:
            lock.release()
            raise InputError(f"cannot write {self.path}: {e}; choose another path with -o") from None
        self.file_lock = lock

    def set_meta(self, **items: Any) -> None:
        with self.lock:
            self.meta.update(items)
            self._write(lambda w: w.set_meta(**items))

    def append(self, batch: dict[str, Any]) -> None:
        with self.lock:
            self.strings.update(batch.get("strings") or ())
            self.lines.update((r[0], r) for r in batch.get("lines") or ())
            self._write(lambda w: w.append(batch))

    def transact(self, op: Callable[[RecordingWriter], None]) -> None:
        """Run `op` on the writer (its own transactions), with the same fallback as every other write."""
        with self.lock:
            self._write(op)

    def _write(self, op: Callable[[RecordingWriter], None]) -> None:
        if self.dead or self.writer is None:
            return
        try:
            op(self.writer)
            return
        except WRITE_ERRORS as e:
            first_error = e
        old = self.path
        try:
            self._move_on()
            op(self.writer)  # type: ignore[arg-type]  # _move_on set a writer
        except (*WRITE_ERRORS, InputError) as e:
            self.dead = True
            self.on_failure(
                f"cannot write the recording any more ({first_error}; {self.path}: {e}): the script runs on, "
                f"what was committed before stays in {self.path}"
            )
            return
        self.on_failure(
            f"cannot write {old} any more ({first_error}): the recording continues in {self.path}"
        )

    def _move_on(self) -> None:
        """Continue in the next free sibling file, with everything the failed one held."""
        base, n = self.first_path, 1
        while os.path.exists(f"{base}.{n}") or is_locked(f"{base}.{n}"):
            n += 1
        new = f"{base}.{n}"
        lock = RecordingLock(new)
        lock.acquire()
        old_writer = self.writer
        assert old_writer is not None
        copied = False
        try:
            dest = sqlite3.connect(new)
            try:
                old_writer.db.backup(dest)
                copied = True
            finally:
                dest.close()
        except WRITE_ERRORS:
            if os.path.exists(new):
                os.remove(new)
        with_contents = RecordingWriter(new)
        if not copied:
            with_contents.set_meta(**self.meta)
            with_contents.append({"strings": list(self.strings.items()), "lines": list(self.lines.values())})
        try:
            old_writer.close()
        except sqlite3.Error:
            pass
        if self.file_lock is not None:
            self.file_lock.release()
        self.writer, self.file_lock, self.path = with_contents, lock, new

    def close(self) -> None:
        with self.lock:
            if self.writer is not None:
                try:
                    self.writer.close()
                except sqlite3.Error:
                    pass
                self.writer = None
            if self.file_lock is not None:
                self.file_lock.release()
                self.file_lock = None
