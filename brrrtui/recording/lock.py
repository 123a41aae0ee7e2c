"""One writer per recording: an exclusive `flock` on `PATH.lock` while a recorder writes PATH.

The kernel drops the lock when the recorder dies (even by `kill -9`), so a lock file left behind means
nothing; only a held lock does. The descriptor is not inherited, so the user's script (which may outlive a
killed recorder) never holds it. A reader asks `is_locked` to tell a recording still being written from
one whose writer stopped without finishing it.

The lock file is created exclusively and without following a link. A file already at that name is taken
over only when it is a lock file brrrtui left (a regular file holding nothing but a process id, or nothing);
anything else there (`Pipfile.lock` beside `-o Pipfile`, a link, a FIFO) is neither written, truncated nor
removed: the recording is refused with one line. Releasing removes the lock file only while it is still the
one this lock holds.
"""

from __future__ import annotations

import fcntl
import os
import stat

from brrrtui.contract.errors import InputError
from brrrtui.recording.outputs import kind_of, peek

OPEN_EXISTING = os.O_RDWR | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC
CREATE = os.O_RDWR | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC
LOCK_BYTES = 32  # a lock file brrrtui wrote holds a process id: a few digits


class RecordingBusy(InputError):
    """Another brrrtui is writing this recording now."""


def lock_path(path: str) -> str:
    return path + ".lock"


def is_lock_file_content(data: bytes) -> bool:
    """What a lock file brrrtui wrote holds: a process id, or nothing (one being created)."""
    return len(data) < LOCK_BYTES and (data == b"" or data.strip().isdigit())


class RecordingLock:
    def __init__(self, path: str):
        self.path = path
        self.fd: int | None = None
        self.ino: tuple[int, int] | None = None

    def acquire(self) -> None:
        """Take the lock or raise RecordingBusy (one line); a file at the lock's name that is not a brrrtui
        lock file is refused (InputError). Retries if the lock file was replaced between opening and locking
        it (a finishing writer unlinks it)."""
        name = lock_path(self.path)
        for _ in range(10):
            fd = self._open(name)
            if fd is None:
                continue
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                holder = os.pread(fd, LOCK_BYTES, 0).decode("ascii", "replace").strip()
                os.close(fd)
                who = f" (pid {holder})" if holder.isdigit() else ""
                raise RecordingBusy(
                    f"{self.path} is being recorded by another brrrtui{who}; choose another path with -o"
                ) from None
            mine = os.fstat(fd)
            try:
                now = os.lstat(name)
                same = (now.st_dev, now.st_ino) == (mine.st_dev, mine.st_ino)
            except OSError:
                same = False
            if same:
                os.ftruncate(fd, 0)
                os.pwrite(fd, str(os.getpid()).encode(), 0)
                self.fd, self.ino = fd, (mine.st_dev, mine.st_ino)
                return
            os.close(fd)
        raise RecordingBusy(f"{self.path}: could not lock {name}; choose another path with -o")

    def _unusable(self, name: str, e: OSError) -> InputError:
        return InputError(f"cannot write {self.path}: {name}: {e.strerror}; choose another path with -o")

    def _open(self, name: str) -> int | None:
        """A descriptor of the lock file: a new one, or one brrrtui left; None when it vanished meanwhile."""
        try:
            return os.open(name, CREATE, 0o644)
        except FileExistsError:
            pass
        except (OSError, ValueError) as e:
            text = (e.strerror or str(e)) if isinstance(e, OSError) else str(e)
            raise InputError(
                f"cannot write {self.path}: cannot create its lock file {name} ({text}); "
                "choose another path with -o"
            ) from None
        try:
            st = os.lstat(name)
        except FileNotFoundError:
            return None
        except OSError as e:
            raise self._unusable(name, e) from None
        kind = kind_of(st.st_mode)
        data = peek(name, LOCK_BYTES) if kind is None else None
        if data is None or not is_lock_file_content(data):
            what = kind or "not a brrrtui lock file"
            raise InputError(
                f"{name} exists and is {what}; brrrtui locks {self.path} with that name and neither writes nor "
                "removes a file it did not make: move it away or choose another path with -o"
            )
        try:
            fd = os.open(name, OPEN_EXISTING)
        except FileNotFoundError:
            return None
        except OSError as e:
            raise self._unusable(name, e) from None
        if not stat.S_ISREG(os.fstat(fd).st_mode) or os.fstat(fd).st_ino != st.st_ino:
            os.close(fd)
            return None  # replaced between the look and the open: look again
        return fd

    def release(self) -> None:
        if self.fd is None:
            return
        name = lock_path(self.path)
        try:
            now = os.lstat(name)
            if (now.st_dev, now.st_ino) == self.ino:
                os.unlink(name)
        except OSError:
            pass
        os.close(self.fd)
        self.fd = None


def is_locked(path: str) -> bool:
    """Whether a live recorder holds the lock of `path` (so the recording is still being written). Only a
    regular lock file is opened: a link or a FIFO at that name is no lock (and would block a reader)."""
    try:
        if not stat.S_ISREG(os.lstat(lock_path(path)).st_mode):
            return False
        fd = os.open(lock_path(path), os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC)
    except (OSError, ValueError):
        return False
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            return False
        fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
    except BlockingIOError:
        return True
    except OSError:
        return False
    finally:
        os.close(fd)  # closing drops a shared lock we took
    return False
