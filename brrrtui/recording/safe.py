"""Every name read from a recording or a trace is data, never terminal control.

A crafted trace could name a kernel `\\x1b]0;owned\\x07` (set the window title), `\\x1b[2J` (clear the screen)
or worse; `brrrtui report` prints names as they are. So every string a loader hands on goes through
`safe_text`: control characters (C0 including tab and newline, DEL, C1) and the Unicode bidirectional
overrides (which reorder what the terminal shows) are written as visible escapes (`\\x1b`, `\\u202e`), and
the printable text around them is kept. Markup such as `[link=...]` is plain text here; widgets that
interpret markup escape it themselves.
"""

from __future__ import annotations

import re
from typing import Any

_UNSAFE = re.compile("[\x00-\x1f\x7f-\x9f\u202a-\u202e\u2066-\u2069]")


def _escape(m: re.Match[str]) -> str:
    c = ord(m.group())
    return f"\\x{c:02x}" if c < 0x100 else f"\\u{c:04x}"


def safe_text(value: object) -> str:
    """`value` as a string that is safe to print: control characters escaped, printable text kept."""
    if not isinstance(value, str):
        if isinstance(value, bytes):
            value = value.decode("utf-8", "replace")
        else:
            value = str(value)
    if _UNSAFE.search(value) is None:  # the common case: one scan, no copy
        return value
    return _UNSAFE.sub(_escape, value)


def safe_strings(values: list[Any]) -> list[str]:
    """A string table with every entry made safe (entries that are no strings, in a damaged file, too)."""
    return [v if type(v) is str and _UNSAFE.search(v) is None else safe_text(v) for v in values]


def safe_value(value: Any) -> Any:
    """A JSON value (meta) with every string in it made safe, keys included."""
    if isinstance(value, str):
        return safe_text(value)
    if isinstance(value, list):
        return [safe_value(v) for v in value]
    if isinstance(value, dict):
        return {safe_text(k): safe_value(v) for k, v in value.items()}
    return value
