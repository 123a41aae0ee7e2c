"""Where the recorder's writes go: the recording, locked for one writer, and a sibling file when it fails.

The path is checked against brrrtui's output policy (brrrtui.recording.outputs) before anything is written:
a new file is made there, or an earlier recording is replaced by a new file written beside it
(`run.brrr.part<pid>`) and renamed over it when the recording ends (`commit`).

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

from brrrtui.contract.errors import InputError
from brrrtui.record.targets import recording_output
from brrrtui.recording.lock import RecordingBusy, RecordingLock, is_locked, lock_path
from brrrtui.recording.outputs import (
    SQLITE_SIDECARS,
    Replacement,
    create_new,
    lstat_or_none,
    peek,
    remove_journal,
    remove_own,
)
from brrrtui.recording.store import RecordingWriter

WRITE_ERRORS = (sqlite3.Error, OSError)


class Sink:
    def __init__(self, path: str, on_failure: Callable[[str], None]):
        self.path = path  # where the recording is written now
        self.first_path = path  # the file the user named
        self.on_failure = on_failure
        self.lock = threading.RLock()
        self.writer: RecordingWriter | None = None
        self.locks: list[RecordingLock] = []
        self.replacement: Replacement | None = None  # an earlier file, replaced when the recording ends
        self.created: os.stat_result | None = None  # the new file open() made at `first_path`
        self.defer = False  # close() leaves the rename to commit(): a live UI still reads the file
        self.meta: dict[str, Any] = {}
        self.strings: dict[int, str] = {}
        self.lines: dict[int, tuple[Any, ...]] = {}
        self.dead = False

    @property
    def final_path(self) -> str:
        """Where the recording is once it ends (the file it replaces, while it is written beside it)."""
        return self.first_path if self.replacement is not None else self.path

    def open(self, target: list[str] | None = None, force: bool = False) -> bool:
        """Check the path against the output policy (record/targets.py), lock it (a second writer is refused
        with one line) and start a fresh recording: in a new file made at the path, or, when an earlier file
        is there, in a new file beside it that `commit` renames over it, so a run that never starts (or a
        brrrtui that dies) leaves the earlier file as it was. Returns whether an earlier file is replaced."""
        if is_locked(self.path):  # said before the file is looked at: another recorder is writing it now
            holder = (peek(lock_path(self.path), 32) or b"").decode("ascii", "replace").strip()
            who = f" (pid {holder})" if holder.isdigit() else ""
            raise RecordingBusy(
                f"{self.path} is being recorded by another brrrtui{who}; choose another path with -o"
            )
        output = recording_output(self.path, target, force)
        output.check()  # before the lock: a path that cannot be written is said as such
        lock = RecordingLock(self.path)
        lock.acquire()
        self.locks.append(lock)
        try:
            existing = output.check()  # again, under the lock
            if existing is None:
                os.close(create_new(self.path))
                self.created = os.lstat(self.path)
            else:
                self.replacement = Replacement(self.path, existing)
                self.path = self.replacement.temp
                temp_lock = RecordingLock(self.path)
                temp_lock.acquire()  # a reader of the new file sees it is still being written
                self.locks.append(temp_lock)
            self.writer = RecordingWriter(self.path)
        except FileExistsError:
            self.abort()
            raise InputError(f"{self.first_path} appeared while brrrtui opened it; run again") from None
        except (*WRITE_ERRORS, InputError) as e:
            self.abort()
            if isinstance(e, InputError):
                raise
            raise InputError(f"cannot write {self.first_path}: {e}; choose another path with -o") from None
        return existing is not None and existing.st_size > 0

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
        """Continue in the next free sibling file (`run.brrr.1`, ...; made new, beside no file of its name),
        with everything the failed one held."""
        new, lock, created = self._free_sibling()
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
            remove_own(new, created)
            os.close(create_new(new))
        with_contents = RecordingWriter(new)
        if not copied:
            with_contents.set_meta(**self.meta)
            with_contents.append({"strings": list(self.strings.items()), "lines": list(self.lines.values())})
        try:
            old_writer.close()
        except sqlite3.Error:
            pass
        if copied and self.replacement is not None and self.path == self.replacement.temp:
            self.replacement.discard()  # all of it is in the sibling; the earlier file stays as it was
        self.replacement = None
        self._release()
        self.writer, self.locks, self.path = with_contents, [lock], new

    def _free_sibling(self) -> tuple[str, RecordingLock, os.stat_result]:
        for n in range(1, 1000):
            new = f"{self.first_path}.{n}"
            if any(lstat_or_none(new + s) is not None for s in ("", ".lock", *SQLITE_SIDECARS)):
                continue
            lock = RecordingLock(new)
            lock.acquire()
            try:
                os.close(create_new(new))
            except FileExistsError:
                lock.release()
                continue
            return new, lock, os.lstat(new)
        raise InputError(f"no free file name beside {self.first_path}")

    def _close_writer(self) -> None:
        if self.writer is not None:
            try:
                self.writer.close()
            except sqlite3.Error:
                pass
            self.writer = None

    def _release(self) -> None:
        for lock in self.locks:
            lock.release()
        self.locks = []

    def close(self) -> None:
        """The recording ends: close it and, unless `defer`, commit it."""
        with self.lock:
            self._close_writer()
            if not self.defer:
                self.commit()

    def commit(self) -> None:
        """Rename the new file over the earlier one it replaces (if the earlier one is still what was
        checked; else it stays beside it, said through `on_failure`), then release the locks."""
        with self.lock:
            self._close_writer()
            replacement, self.replacement = self.replacement, None
            if replacement is not None and self.path == replacement.temp:
                try:
                    remove_journal(self.first_path)  # the earlier recording's: it would be replayed
                    replacement.commit()
                    self.path = self.first_path
                except InputError as e:
                    self.on_failure(str(e))
            self._release()

    def abort(self) -> None:
        """A run that never started: remove the file open() made (nothing else) and release the locks."""
        with self.lock:
            self._close_writer()
            if self.replacement is not None:
                self.replacement.discard()
            elif self.created is not None:
                remove_own(self.first_path, self.created)
            self.replacement, self.created, self.path = None, None, self.first_path
            self._release()
