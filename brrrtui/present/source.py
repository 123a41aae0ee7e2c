"""Source files as highlighted lines: pygments tokens mapped to roles (the theme gives them colours).

The files are those a recording or a trace names, so any file at all: one is read only when it is shown
(lazily), only when it is a regular file (never a FIFO, socket or device, which could block the reader or
act when opened), of at most MAX_SOURCE_BYTES (a recording naming a 6 GB file must not load it), and text
(no NUL byte, and no terminal control: no control character but tab, newline, carriage return and form
feed, no DEL or C1 character, no bidirectional override, so nothing in a shown line can act on the terminal or
reorder what it shows). The open does not block either (O_NONBLOCK: a special file that looks regular, such
as /proc/kmsg, answers at once).
"""

from __future__ import annotations

import errno
import os
import re
import stat
from functools import lru_cache

from pygments.lexers import PythonLexer, get_lexer_for_filename
from pygments.token import Comment, Keyword, Name, Number, Operator, String, Token
from pygments.util import ClassNotFound

Span = tuple[str, str]
Lines = tuple[tuple[Span, ...], ...]
MAX_SOURCE_BYTES = 8 << 20
"""The largest source file shown (the biggest Python modules are a few hundred KB)."""
NOT_HERE = "is not on this machine"
_CONTROL = re.compile("[\x00-\x08\x0b\x0e-\x1f\x7f-\x9f\u2028\u2029\u202a-\u202e\u2066-\u2069]")
"""What makes a file no source to show: what a terminal would act on (escape sequences start with ESC or a C1
character), NUL (binary), and the line separators and bidirectional overrides that reorder what is shown."""

_ROLES = [
    (Comment, "syn-comment"),
    (String, "syn-string"),
    (Number, "syn-number"),
    (Keyword, "syn-keyword"),
    (Name.Builtin, "syn-builtin"),
    (Name.Function, "syn-function"),
    (Name.Class, "syn-function"),
    (Name.Decorator, "syn-builtin"),
    (Operator, "syn-operator"),
]


def _role(tok: object) -> str:
    for t, role in _ROLES:
        if tok in t:
            return role
    return "code"


def highlight(text: str, filename: str = "x.py") -> list[list[Span]]:
    """One list of (text, role) spans per line of `text` (tabs expanded, no newlines)."""
    try:
        lexer = get_lexer_for_filename(filename, stripnl=False, ensurenl=False)
    except ClassNotFound:
        lexer = PythonLexer(stripnl=False, ensurenl=False)
    lines: list[list[Span]] = [[]]
    for tok, value in lexer.get_tokens(text.expandtabs(4)):
        role = _role(tok) if tok is not Token.Text else "code"
        parts = value.split("\n")
        for k, part in enumerate(parts):
            if k:
                lines.append([])
            if part:
                lines[-1].append((part, role))
    if text.endswith("\n") and not lines[-1]:
        lines.pop()
    return lines


class Unreadable(Exception):
    """Why a source file is not shown: the rest of a sentence that starts with its name."""


def _size(n: int) -> str:
    return f"{n / 1e9:,.1f} GB" if n >= 1e9 else f"{n / 1e6:,.1f} MB"


def read_text(path: str, limit: int = MAX_SOURCE_BYTES) -> str:
    """The text of the regular file `path` (at most `limit` bytes, no terminal control), newlines as `\\n`
    and form feeds as spaces (a line is drawn as segments, which a form feed would reach the terminal in);
    else Unreadable, saying why."""
    try:
        if not stat.S_ISREG(os.stat(path).st_mode):  # before any open: opening a device can act
            raise Unreadable("is not a regular file (a FIFO, socket or device): not read")
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_NOCTTY | os.O_CLOEXEC)
    except FileNotFoundError:
        raise Unreadable(NOT_HERE) from None
    except OSError as e:
        raise Unreadable(f"cannot be read ({e.strerror})") from None
    try:
        st = os.fstat(fd)  # the file opened, which a rename since the stat above may have changed
        if not stat.S_ISREG(st.st_mode):
            raise Unreadable("is not a regular file (a FIFO, socket or device): not read")
        if st.st_size > limit:
            raise Unreadable(f"is too big to show ({_size(st.st_size)}; at most {_size(limit)})")
        chunks: list[bytes] = []
        got = 0
        while got <= limit:  # a file that grows while read (or a /proc file of size 0) stops at the limit
            chunk = os.read(fd, min(1 << 20, limit + 1 - got))
            if not chunk:
                break
            chunks.append(chunk)
            got += len(chunk)
    except BlockingIOError:
        raise Unreadable("cannot be read without waiting: not read") from None
    except OSError as e:
        if e.errno == errno.EISDIR:
            raise Unreadable("is a directory") from None
        raise Unreadable(f"cannot be read ({e.strerror})") from None
    finally:
        os.close(fd)
    if got > limit:
        raise Unreadable(f"is too big to show (over {_size(limit)})")
    text = b"".join(chunks).decode("utf-8", "replace")
    bad = _CONTROL.search(text)
    if bad is not None:
        c = ord(bad.group())
        what = "NUL bytes" if c == 0 else f"the control character U+{c:04X}"
        raise Unreadable(f"is not text to show (it holds {what}): not shown")
    return text.replace("\r\n", "\n").replace("\r", "\n").replace("\f", " ")


@lru_cache(maxsize=32)
def load_source(path: str, mtime_ns: int, size: int) -> Lines | str:
    """A file's highlighted lines, or why it is not shown; cached by modification time and size."""
    del mtime_ns, size  # part of the cache key only
    try:
        text = read_text(path)
    except Unreadable as e:
        return str(e)
    return tuple(tuple(line) for line in highlight(text, os.path.basename(path)))


def read_source(path: str) -> Lines | str:
    """The highlighted lines of the source file `path`, read when first asked for; or why it is not shown
    (the rest of a sentence that starts with the file's name)."""
    try:
        st = os.stat(path)
    except FileNotFoundError:
        return NOT_HERE
    except OSError as e:
        return f"cannot be read ({e.strerror})"
    return load_source(path, st.st_mtime_ns, st.st_size)


def read_highlighted(path: str) -> Lines | None:
    """The highlighted lines of `path`, or None where it is not shown (read_source says why)."""
    lines = read_source(path)
    return None if isinstance(lines, str) else lines


def plain(spans: tuple[Span, ...] | list[Span]) -> str:
    return "".join(t for t, _ in spans)
