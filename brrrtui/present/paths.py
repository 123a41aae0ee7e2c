"""Paths people can read: `validation/workloads/hf_gpt2.py:32` and `transformers/activations.py:66`, not the
absolute paths the recording holds (`/home/u/runs/2026-12-01/validation/workloads/hf_gpt2.py`).

A file below the current directory is written relative to it (a terminal, VS Code's included, then opens
`path:line` with a click); else a file below the folder the script ran in, relative to that; a file of an
installed library, from its package (`transformers/…`); anything else as recorded. The JSON keeps the
recorded path beside this one (`display`).

In the UI a location is a `Location`: the text shown, plus the file on this machine it opens (the UI makes it a
terminal hyperlink, `file://HOST/ABS/PATH`). A row too narrow for it cuts the middle of its folders first
(`validation/…/hf_gpt2.py:32`), then the folders (`…/hf_gpt2.py:32`), then the start of the file name
(`…gpt2.py:32`); the line number is never cut.
"""

from __future__ import annotations

import os
import re
from collections.abc import Callable, Sequence
from urllib.parse import quote

from brrrtui.contract.userfiles import package_path

_PY_PATH = re.compile(r"(?<![\w./-])(/[^\s:,;()'\"`]+\.py)\b")
_PY_LOCATION = re.compile(r"(?<![\w./-])(/[^\s:,;()'\"`]+\.py)\b(?::(\d+))?")
ELLIPSIS = "…"


def readable_path(path: str, run_cwd: str | None = None) -> str:
    if not os.path.isabs(path):
        return path
    library = package_path(path)
    if library is not None:
        return library
    for base in (os.getcwd(), run_cwd):
        if base and path.startswith(base.rstrip(os.sep) + os.sep):
            return os.path.relpath(path, base)
    return path


def readable_text(text: str, run_cwd: str | None = None) -> str:
    """Every absolute `.py` path in `text` (a finding's message, a report) made readable."""
    return _PY_PATH.sub(lambda m: readable_path(m.group(1), run_cwd), text)


def fit_location(path: str, line: int | None, width: int) -> str:
    """`path:line` in at most `width` columns (see the module doc); never shorter than `…:line`."""
    tail = f":{line}" if line is not None else ""
    full = path + tail
    if len(full) <= width:
        return full
    folder, _, name = path.rpartition("/")
    if folder or path.startswith("/"):
        short = _elide_folders(folder.split("/"), width - len(name) - len(tail) - 1)
        if short is not None:
            return f"{short}/{name}{tail}"
    if len(name) + len(tail) <= width:
        return name + tail
    keep = max(width - len(tail) - 1, 0)
    return ELLIPSIS + (name[len(name) - keep :] if keep else "") + tail


def _elide_folders(parts: list[str], room: int) -> str | None:
    """The folders in `room` columns with their middle cut: whole folders from both ends around `…`, the
    nearest folder first; `…` alone when no folder fits; None when not even that does."""
    if room < 1:
        return None
    head: list[str] = []
    tail: list[str] = []
    lo, hi = 0, len(parts) - 1
    can_head = can_tail = turn_tail = True
    while lo <= hi and (can_head or can_tail):
        use_tail = can_tail and (turn_tail or not can_head)
        h, t = (head, [parts[hi], *tail]) if use_tail else ([*head, parts[lo]], tail)
        if len("/".join([*h, ELLIPSIS, *t])) <= room:
            head, tail = h, t
            hi, lo = (hi - 1, lo) if use_tail else (hi, lo + 1)
        elif use_tail:
            can_tail = False
        else:
            can_head = False
        turn_tail = not use_tail
    if lo > hi:
        return "/".join(parts)  # everything fits after all (a path that was only just too long)
    return "/".join([*head, ELLIPSIS, *tail])


def file_uri(path: str, host: str) -> str:
    """The `file://` URI of an absolute path, with the host it is on (the hyperlink spec asks for one, so a
    terminal on another machine does not open a file of its own by the same name)."""
    return f"file://{quote(host, safe='')}{quote(os.path.abspath(path), safe='/')}"


class Location(str):
    """A location as shown (`examples/train_gpt.py:43`; a plain str to everything else) that remembers its
    parts: `path` (readable), `line` (None for a file alone) and `target`, the file on this machine (None
    when it is not here: then nothing opens)."""

    path: str
    line: int | None
    target: str | None

    def __new__(cls, path: str, line: int | None, target: str | None, shown: str | None = None) -> Location:
        self = super().__new__(
            cls, shown if shown is not None else path + (f":{line}" if line is not None else "")
        )
        self.path, self.line, self.target = path, line, target
        return self

    def fit(self, width: int) -> Location:
        return Location(self.path, self.line, self.target, fit_location(self.path, self.line, width))

    @property
    def least(self) -> int:
        """Columns it needs to keep its file name and line whole."""
        return len(self.path.rpartition("/")[2]) + (len(f":{self.line}") if self.line is not None else 0)


class Phrase(str):
    """Text made of parts, some of them Locations: a plain str to everything else; the UI draws its parts."""

    parts: tuple[str, ...]

    def __new__(cls, *parts: str) -> Phrase:
        self = super().__new__(cls, "".join(parts))
        self.parts = parts
        return self


def location(file: str, line: int | None, found: str | None, run_cwd: str | None = None) -> Location:
    """The Location of a recorded `file`; `found` is that file on this machine, or None."""
    return Location(readable_path(found or file, run_cwd), line, found)


def locations_in(text: str, locate: Callable[[str, int | None], Location]) -> list[str]:
    """`text` cut into plain parts and a Location for every absolute `.py` path in it (`/a/b.py:12`)."""
    out: list[str] = []
    at = 0
    for m in _PY_LOCATION.finditer(text):
        out.append(text[at : m.start()])
        out.append(locate(m.group(1), int(m.group(2)) if m.group(2) else None))
        at = m.end()
    out.append(text[at:])
    return [p for p in out if p]


def fit_parts(parts: Sequence[str], width: int) -> list[str]:
    """Parts of one row in `width` columns: its first Location is cut to the room left after the parts
    before it (never below `…:line`); what follows it is the caller's to crop."""
    out = list(parts)
    before = 0
    for k, p in enumerate(out):
        if isinstance(p, Location):
            if before + len(p) > width:
                out[k] = p.fit(width - before)
            break
        before += len(p)
    return out
