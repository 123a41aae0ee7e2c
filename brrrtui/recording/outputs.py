"""Where brrrtui writes: one policy for every file a command creates or replaces (a recording, a rank's
recording and the job's run file, a merged run, an exported trace, the demo's unpacked copy).

A writer
- creates a new file exclusively and without following a link (O_CREAT|O_EXCL|O_NOFOLLOW), or replaces a
  regular file that is verifiably of its own kind (`Output.is_ours`: a brrrtui recording by its content; for
  export, a trace brrrtui wrote), an empty one, or, with `--force`, any regular file;
- never writes to, through or over a FIFO, a device, a socket, a directory or a symbolic link, with or without
  `--force`;
- never replaces the script, the module run with `-m`, a file of the package it runs (`Protected`), or the
  command's own input, with or without `--force`;
- replaces a file by writing a new one beside it and renaming that over it at the end (`Replacement`), and
  only if the file there is still the one it checked: a run that fails to start, or a brrrtui that dies,
  leaves the earlier file as it was (what was written so far stays in the new file beside it);
- creates its sidecars (the lock: brrrtui.recording.lock) exclusively and without following links, and
  refuses to start, with one line, when a file already sits at a sidecar's name that is not brrrtui's own:
  such a file is never removed or truncated. SQLite's own sidecars (`-journal`, `-wal`, `-shm`) are checked
  the same way before SQLite opens the file, since SQLite would delete or replay one it finds.

Every refusal and every error of the file system is one InputError line naming the path.
"""

from __future__ import annotations

import errno
import gzip
import os
import sqlite3
import stat
import urllib.parse
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

from brrrtui.contract.errors import InputError

SQLITE_HEADER = b"SQLite format 3\x00"
JOURNAL_MAGIC = bytes.fromhex("d9d505f920a163d7")  # the first bytes of an SQLite rollback journal
SQLITE_SIDECARS = ("-journal", "-wal", "-shm")
RECORDING_FORMAT = '"brrrtui-recording"'  # meta `format` as brrrtui.recording.store writes it (JSON)
CHECK_STEPS = 200_000  # SQLite VM steps a content check may take: a crafted file cannot make it hang
NEW_FLAGS = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC
PEEK_FLAGS = os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC

KINDS = (
    (stat.S_ISLNK, "a symbolic link"),
    (stat.S_ISDIR, "a directory"),
    (stat.S_ISFIFO, "a FIFO (named pipe)"),
    (stat.S_ISCHR, "a character device"),
    (stat.S_ISBLK, "a block device"),
    (stat.S_ISSOCK, "a socket"),
)


def kind_of(mode: int) -> str | None:
    """What a file that is not a regular file is ('a FIFO (named pipe)', ...); None for a regular file."""
    for test, name in KINDS:
        if test(mode):
            return name
    return None if stat.S_ISREG(mode) else "not a regular file"


def why(e: OSError) -> str:
    return e.strerror or str(e)


def lstat_or_none(path: str, flag: str = "-o") -> os.stat_result | None:
    """The file at `path` itself (a link is not followed); None when there is none."""
    try:
        return os.lstat(path)
    except FileNotFoundError:
        return None
    except (OSError, ValueError) as e:  # too long a name, a folder that is a file, a NUL byte
        text = why(e) if isinstance(e, OSError) else str(e)
        raise InputError(f"cannot write {path}: {text}; choose another path with {flag}") from None


def same_file(a: os.stat_result | None, b: os.stat_result | None) -> bool:
    if a is None or b is None:
        return a is b
    return (a.st_dev, a.st_ino) == (b.st_dev, b.st_ino) and stat.S_IFMT(a.st_mode) == stat.S_IFMT(b.st_mode)


def peek(path: str, size: int) -> bytes | None:
    """The first `size` bytes of the regular file at `path` (no link followed, never blocking on a FIFO or a
    device, which are not opened); None for anything else."""
    try:
        if not stat.S_ISREG(os.lstat(path).st_mode):
            return None
        fd = os.open(path, PEEK_FLAGS)
    except OSError:
        return None
    try:
        return os.read(fd, size) if stat.S_ISREG(os.fstat(fd).st_mode) else None
    except OSError:
        return None
    finally:
        os.close(fd)


def is_recording_file(path: str) -> bool:
    """Whether `path` is a brrrtui recording, by its content: an SQLite file whose `meta` table says so. Read
    without SQLite's journal handling (immutable): a journal beside it is neither replayed nor removed."""
    if peek(path, 16) != SQLITE_HEADER:
        return False
    uri = "file:" + urllib.parse.quote(os.path.abspath(path)) + "?mode=ro&immutable=1"
    steps = [0]

    def too_long() -> int:
        steps[0] += 1
        return 1 if steps[0] > CHECK_STEPS // 1000 else 0

    try:
        db = sqlite3.connect(uri, uri=True)
    except sqlite3.Error:
        return False
    try:
        db.set_progress_handler(too_long, 1000)
        kind = db.execute("SELECT type FROM sqlite_master WHERE name = 'meta'").fetchone()
        if kind is None or kind[0] != "table":
            return False
        row = db.execute("SELECT value FROM meta WHERE key = 'format'").fetchone()
        return row is not None and row[0] == RECORDING_FORMAT
    except sqlite3.Error:
        return False
    finally:
        db.close()


def is_exported_trace(path: str, heads: Sequence[str]) -> bool:
    """Whether `path` (plain or gzip) begins with one of `heads`: how a trace brrrtui wrote is told apart."""
    first = peek(path, 2)
    if first is None:
        return False
    if first == b"\x1f\x8b":
        try:
            fd = os.open(path, PEEK_FLAGS)
            with os.fdopen(fd, "rb") as raw, gzip.GzipFile(fileobj=raw) as f:
                text = f.read(256)
        except (OSError, EOFError, ValueError):
            return False
    else:
        text = peek(path, 256) or b""
    return any(text.startswith(h.encode()) for h in heads)


@dataclass
class Protected:
    """Files a writer never replaces, with or without --force: `files` exactly, and every existing file under
    `trees` that is not of the writer's own kind. Each comes with what it is, for the refusal. What a run's
    target protects: brrrtui.record.targets.protected_by."""

    files: list[tuple[str, str]] = field(default_factory=list)
    trees: list[tuple[str, str]] = field(default_factory=list)

    def refusal(self, path: str, st: os.stat_result, ours: bool) -> str | None:
        """Why `path` (an existing file, `st`) must not be replaced; None when it may. `ours`: it is of the
        writer's own kind (a recording inside the script's package may be replaced; its sources never)."""
        for f, what in self.files:
            try:
                if same_file(os.stat(f), st):
                    return what
            except OSError:
                continue
        if ours:
            return None
        real = os.path.realpath(path)
        for tree, what in self.trees:
            if real.startswith(os.path.realpath(tree).rstrip(os.sep) + os.sep):
                return what
        return None


@dataclass
class Output:
    """One file a command is about to write: `check` says whether it replaces one, or refuses."""

    path: str
    what: str  # the writer's own kind, for the refusal: "a brrrtui recording"
    is_ours: Callable[[str], bool] = is_recording_file
    flag: str = "-o"
    force: bool = False
    protected: Protected = field(default_factory=Protected)
    inputs: Sequence[str] = ()
    sidecars: Sequence[str] = ()  # names beside it (suffixes) that must not be there: SQLite's own
    room: Sequence[str] = ()  # suffixes whose names must fit beside it: its sidecars and lock

    def refuse(self, text: str) -> InputError:
        return InputError(f"{text}; choose another path with {self.flag}")

    def check(self) -> os.stat_result | None:
        """The existing file this output replaces (None: it creates a new one). Refuses, one line, whatever
        the policy forbids (module docstring)."""
        path = self.path
        if not path:
            raise self.refuse("the output file name is empty")
        st = lstat_or_none(path, self.flag)
        if st is not None and stat.S_ISDIR(st.st_mode):
            raise self.refuse(f"{path} is a directory; give a file name")
        parent = os.path.dirname(os.path.abspath(path))
        if not os.path.isdir(parent):
            raise self.refuse(f"cannot write {path}: folder {parent} does not exist")
        if not os.access(parent, os.W_OK | os.X_OK):
            raise self.refuse(f"cannot write {path}: permission denied")
        longest = max(self.room, key=len, default="")
        if longest and not name_fits(path, longest):
            raise self.refuse(
                f"cannot write {path}: its name is too long for the files kept beside it "
                f"({os.path.basename(path)}{longest} would pass the file system's limit)"
            )
        if st is not None:
            self._may_replace(st)
        for suffix in self.sidecars:
            if lstat_or_none(path + suffix, self.flag) is not None and not self._own_journal(st, suffix):
                raise self.refuse(
                    f"{path + suffix} exists beside {path} and is not brrrtui's (SQLite would remove or replay "
                    "it); refusing to write there (move it away)"
                )
        return st

    def _may_replace(self, st: os.stat_result) -> None:
        path = self.path
        kind = kind_of(st.st_mode)
        if kind is not None:
            raise self.refuse(
                f"{path} is {kind}; brrrtui replaces only regular files, with or without --force"
            )
        if not os.access(path, os.W_OK):  # read-only: the user keeps it from being written
            raise self.refuse(f"cannot write {path}: permission denied")
        for source in self.inputs:
            try:
                if same_file(os.stat(source), st):
                    raise self.refuse(f"{path} is the input {source}; refusing to overwrite it")
            except OSError:
                continue
        ours = self.is_ours(path)
        reason = self.protected.refusal(path, st, ours)
        if reason is not None:
            raise self.refuse(
                f"{self.flag} {path} is {reason}; refusing to overwrite it, with or without --force"
            )
        if not (ours or st.st_size == 0 or self.force):
            raise InputError(
                f"{path} exists and is not {self.what}; refusing to overwrite it "
                f"(choose another path with {self.flag}, or add --force)"
            )

    def _own_journal(self, st: os.stat_result | None, suffix: str) -> bool:
        """A rollback journal of the recording being replaced (left by a killed writer): brrrtui's own."""
        if st is None or suffix != "-journal" or not self.is_ours(self.path):
            return False
        head = peek(self.path + suffix, 8)
        return head is not None and (head == b"" or head.startswith(JOURNAL_MAGIC))


def name_fits(path: str, longest_suffix: str) -> bool:
    """Whether `path`'s name with `longest_suffix` added stays within the folder's name limit (NAME_MAX)."""
    folder, name = os.path.split(os.path.abspath(path))
    try:
        limit = os.pathconf(folder, "PC_NAME_MAX")
    except (OSError, ValueError):
        limit = 255
    return len(os.fsencode(name + longest_suffix)) <= limit


def create_new(path: str, flag: str = "-o") -> int:
    """Create `path` exclusively, no link followed; its descriptor. A name taken raises FileExistsError."""
    try:
        return os.open(path, NEW_FLAGS, 0o644)
    except FileExistsError:
        raise
    except OSError as e:
        raise InputError(f"cannot write {path}: {why(e)}; choose another path with {flag}") from None


def new_beside(
    path: str, flag: str = "-o", taken: Sequence[str] = (".lock", *SQLITE_SIDECARS)
) -> tuple[str, int]:
    """A new file in `path`'s folder, created exclusively, whose name and sidecar names (`taken`) are free:
    `run.brrr.part<pid>` (`.brrrtui-<pid>.part` where that name would be too long). (name, descriptor)."""
    folder, base = os.path.split(path)
    longest = max(taken, key=len, default="")
    for n in range(100):
        tag = f"part{os.getpid()}" + (f"-{n}" if n else "")
        name = f"{base}.{tag}" if name_fits(f"{path}.{tag}", longest) else f".brrrtui-{tag}"
        temp = os.path.join(folder, name)
        if any(lstat_or_none(temp + s, flag) is not None for s in taken):
            continue
        try:
            return temp, create_new(temp, flag)
        except FileExistsError:
            continue
    raise InputError(
        f"cannot write {path}: no free temporary name beside it; choose another path with {flag}"
    )


class Replacement:
    """A new file beside `target`, then renamed to it: over `expected` (the file `Output.check` found), or
    to a name still free (None). Until `commit`, the target is untouched."""

    def __init__(
        self, target: str, expected: os.stat_result | None, flag: str = "-o", keep_open: bool = False
    ):
        self.target, self.expected, self.flag = target, expected, flag
        self.temp, fd = new_beside(target, flag)
        self.created = os.fstat(fd)
        self.fd: int | None = fd
        if not keep_open:  # written by path (SQLite): a file made a moment ago, exclusively
            os.close(fd)
            self.fd = None

    def take_fd(self) -> int:
        """The new file's descriptor (keep_open), for the caller to write and close."""
        fd, self.fd = self.fd, None
        assert fd is not None
        return fd

    def commit(self) -> None:
        """Rename the new file to the target, if the target is still what was checked (else keep the new file
        where it is and say so)."""
        now = lstat_or_none(self.target, self.flag)
        if not same_file(now, self.expected) or not same_file(
            lstat_or_none(self.temp, self.flag), self.created
        ):
            raise InputError(
                f"{self.target} changed while brrrtui wrote it; what brrrtui wrote is kept in {self.temp}"
            )
        try:
            if self.expected is None:
                _link_new(self.temp, self.target)
            else:
                os.replace(self.temp, self.target)
        except OSError as e:
            raise InputError(
                f"cannot write {self.target}: {why(e)}; what brrrtui wrote is kept in {self.temp}"
            ) from None

    def discard(self) -> None:
        """Remove the new file (only if it is still the one created here), and SQLite's journal of it."""
        if self.fd is not None:
            os.close(self.fd)
            self.fd = None
        remove_own(self.temp, self.created)


def _link_new(temp: str, target: str) -> None:
    """`temp` becomes `target`, a name nothing took meanwhile (a hard link fails if it did); where links are
    not supported, a rename."""
    try:
        os.link(temp, target, follow_symlinks=False)
    except OSError as e:
        if e.errno not in (errno.EPERM, errno.EOPNOTSUPP, errno.ENOTSUP, errno.EMLINK, errno.EXDEV):
            raise
        if lstat_or_none(target) is not None:
            raise FileExistsError(errno.EEXIST, "a file appeared there meanwhile", target) from None
        os.replace(temp, target)
        return
    os.unlink(temp)


def remove_own(path: str, created: os.stat_result | None) -> None:
    """Remove `path` if it is still the file brrrtui created (`created`), and its journal if that is a
    journal; never anything that took its place."""
    try:
        if created is None or not same_file(os.lstat(path), created):
            return
        os.unlink(path)
    except OSError:
        return
    remove_journal(path)


def remove_journal(path: str) -> None:
    """Remove SQLite's rollback journal of `path` (left by a killed writer of the recording being replaced,
    which would otherwise be replayed into the new one): only a regular file that is a journal, or empty."""
    head = peek(path + "-journal", 8)
    if head is not None and (head == b"" or head.startswith(JOURNAL_MAGIC)):
        try:
            os.unlink(path + "-journal")
        except OSError:
            pass
