"""Which line of the after-run's source is which line of the before-run's (`brrrtui diff`).

Files are paired by path, else by file name when each side has one file of that name (a checkout in another
directory). Within a pair, lines are matched by their text: difflib's longest matching blocks over the
stripped lines, so lines inserted or deleted elsewhere shift a line without losing it, while a line whose text
changed (the fix itself) has no match and shows up on each side alone. Without both texts, lines are matched
by number.
"""

from __future__ import annotations

import difflib
import os
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from enum import Enum


class LineMatch(str, Enum):
    TEXT = "text"  # the same source text, found by aligning the two files
    LINE = "line"  # the same line number (no text to align)


@dataclass(frozen=True)
class FilePair:
    after: str
    how: LineMatch
    lines: dict[int, int] | None  # before line -> after line (TEXT); None: the same number (LINE)

    def after_line(self, line: int) -> int | None:
        return line if self.lines is None else self.lines.get(line)


@dataclass(frozen=True)
class LineMap:
    files: dict[str, FilePair]  # before file -> its pair

    def find(self, file: str, line: int) -> tuple[str, int, LineMatch] | None:
        pair = self.files.get(file)
        if pair is None:
            return None
        after = pair.after_line(line)
        return None if after is None else (pair.after, after, pair.how)


def pair_files(before: Iterable[str], after: Iterable[str]) -> dict[str, str]:
    """before path -> after path: the same path, else the same file name when it is unique on both sides."""
    b, a = sorted(set(before)), sorted(set(after))
    out = {f: f for f in b if f in set(a)}
    by_name_b: dict[str, list[str]] = {}
    by_name_a: dict[str, list[str]] = {}
    for f in b:
        by_name_b.setdefault(os.path.basename(f), []).append(f)
    for f in a:
        by_name_a.setdefault(os.path.basename(f), []).append(f)
    for name, files in by_name_b.items():
        other = by_name_a.get(name, [])
        if len(files) == 1 and len(other) == 1 and files[0] not in out and other[0] not in out.values():
            out[files[0]] = other[0]
    return out


def align(before: Sequence[str], after: Sequence[str]) -> dict[int, int]:
    """1-based before line -> after line for the lines whose stripped text lies in a common block."""
    sm = difflib.SequenceMatcher(
        None, [s.strip() for s in before], [s.strip() for s in after], autojunk=False
    )
    out: dict[int, int] = {}
    for block in sm.get_matching_blocks():
        for k in range(block.size):
            out[block.a + k + 1] = block.b + k + 1
    return out


def match_lines(
    before_files: Iterable[str],
    after_files: Iterable[str],
    text_before: Mapping[str, Sequence[str]],
    text_after: Mapping[str, Sequence[str]],
) -> LineMap:
    """Pair the files and, where both texts are given (keyed by the recorded path), align their lines."""
    files: dict[str, FilePair] = {}
    for fb, fa in pair_files(before_files, after_files).items():
        tb, ta = text_before.get(fb), text_after.get(fa)
        if tb is not None and ta is not None:
            files[fb] = FilePair(fa, LineMatch.TEXT, align(tb, ta))
        else:
            files[fb] = FilePair(fa, LineMatch.LINE, None)
    return LineMap(files)
