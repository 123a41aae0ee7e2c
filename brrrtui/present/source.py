"""Source files as highlighted lines: pygments tokens mapped to roles (the theme gives them colours)."""

from __future__ import annotations

import os
from functools import lru_cache

from pygments.lexers import PythonLexer, get_lexer_for_filename
from pygments.token import Comment, Keyword, Name, Number, Operator, String, Token
from pygments.util import ClassNotFound

Span = tuple[str, str]

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


@lru_cache(maxsize=32)
def load_source(path: str, mtime_ns: int) -> tuple[tuple[Span, ...], ...] | None:
    """A file's highlighted lines, cached by modification time; None if it cannot be read as text."""
    del mtime_ns  # part of the cache key only
    try:
        with open(path, encoding="utf-8", errors="replace") as f:
            text = f.read()
    except OSError:
        return None
    return tuple(tuple(line) for line in highlight(text, os.path.basename(path)))


def read_highlighted(path: str) -> tuple[tuple[Span, ...], ...] | None:
    try:
        mtime = os.stat(path).st_mtime_ns
    except OSError:
        return None
    return load_source(path, mtime)


def plain(spans: tuple[Span, ...] | list[Span]) -> str:
    return "".join(t for t, _ in spans)
