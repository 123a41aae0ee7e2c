"""One writer per recording: an exclusive `flock` on `PATH.lock` while a recorder writes PATH.

The kernel drops the lock when the recorder dies (even by `kill -9`), so a lock file left behind means
nothing; only a held lock does. The descriptor is not inherited, so the user's script (which may outlive a
killed recorder) never holds it. A reader asks `is_locked` to tell a recording still being written from
one whose writer stopped without finishing it.
"""

from __future__ import annotations

import fcntl
import os

from analyzers.errors import InputError


class RecordingBusy(InputError):
    """Another brrrtui is writing this recording now."""


def lock_path(path: str) -> str:
    return path + ".lock"


class RecordingLock:
    def __init__(self, path: str):
        self.path = path
        self.fd: int | None = None

    def acquire(self) -> None:
        """Take the lock or raise RecordingBusy (one line). Retries if the lock file was replaced between
        opening and locking it (a finishing writer unlinks it)."""
        name = lock_path(self.path)
        for _ in range(10):
            fd = os.open(name, os.O_RDWR | os.O_CREAT, 0o644)
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                holder = os.pread(fd, 32, 0).decode("ascii", "replace").strip()
                os.close(fd)
                who = f" (pid {holder})" if holder.isdigit() else ""
                raise RecordingBusy(
                    f"{self.path} is being recorded by another brrrtui{who}; choose another path with -o"
                ) from None
            try:
                same = os.fstat(fd).st_ino == os.stat(name).st_ino
            except FileNotFoundError:
                same = False
            if same:
                os.ftruncate(fd, 0)
                os.pwrite(fd, str(os.getpid()).encode(), 0)
                self.fd = fd
                return
            os.close(fd)
        raise RecordingBusy(f"{self.path}: could not lock {name}; choose another path with -o")

    def release(self) -> None:
        if self.fd is None:
            return
        try:
            os.unlink(lock_path(self.path))
        except OSError:
            pass
        os.close(self.fd)
        self.fd = None


def is_locked(path: str) -> bool:
    """Whether a live recorder holds the lock of `path` (so the recording is still being written)."""
    try:
        fd = os.open(lock_path(path), os.O_RDONLY)
    except OSError:
        return False
    try:
        fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
    except BlockingIOError:
        return True
    except OSError:
        return False
    finally:
        os.close(fd)  # closing drops a shared lock we took
    return False
