"""The one sanitiser for text brrrtui puts on a terminal: names and paths from a recording or a trace, the
script's own output in the live UI's log pane, and what the CLI prints (`brrrtui: error:` lines echo paths).

A crafted trace could name a kernel `\\x1b]0;owned\\x07` (set the window title), `\\x1b[2J` (clear the screen),
`\\x1b]52;c;...\\x07` (write the clipboard) or worse, and a script prints whatever it likes. Three forms:

- `safe_text`: a name or a path. Control characters (C0 including tab and newline, DEL, C1), the Unicode line
  and paragraph separators and the bidirectional overrides (which reorder what the terminal shows) are written
  as visible escapes (`\\x1b`, `\\u202e`), and the printable text around them is kept: a name is shown whole,
  never silently shortened. Its output holds no such character, so applying it again changes nothing.
- `terminal_line`: one line a program wrote for a terminal. Its complete escape sequences (ECMA-48: CSI, OSC,
  DCS, SOS, PM, APC, in their 7-bit `ESC x` and 8-bit C1 forms, and two-character `ESC x` sequences) are
  dropped: they are colours, titles and clipboard writes meant for a terminal, not text. Of a line rewritten
  with carriage returns (a progress bar) the last rewrite is kept, as a terminal would show it; tabs become
  four spaces; whatever control is left goes through `safe_text`.
- `escape_markup`: text for a place that parses Textual markup (`[@click=app.quit]x[/]`, `[link=...]`,
  `[$accent]`): every `[` escaped, so the text is shown as written (Textual reads `\\[` as a bracket and any
  other backslash as itself). Widgets that take `Text` or `Content` objects never parse markup and need no
  escaping; this is for strings handed to Textual's markup parser.

Every pattern here is matched in one pass without nested repetition: linear time on any input.
"""

from __future__ import annotations

import re
from typing import Any

_UNSAFE = re.compile("[\x00-\x1f\x7f-\x9f\u2028\u2029\u202a-\u202e\u2066-\u2069]")
_SEQUENCE = re.compile(
    # CSI: ESC [ or 0x9b, parameter bytes, intermediate bytes, one final byte
    "(?:\x1b\\[|\x9b)[0-?]*[ -/]*[@-~]"
    # OSC, DCS, SOS, PM, APC: up to their terminator (ST as ESC \ or 0x9c; BEL ends an OSC), or the line's end
    "|(?:\x1b[\\]PX^_]|[\x90\x98\x9d\x9e\x9f])[^\x07\x1b\x9c]*(?:\x07|\x1b\\\\|\x9c)?"
    # any other escape sequence: ESC, intermediate bytes, one final byte
    "|\x1b[ -/]*[0-~]"
)


def _escape(m: re.Match[str]) -> str:
    c = ord(m.group())
    return f"\\x{c:02x}" if c < 0x100 else f"\\u{c:04x}"


def _as_str(value: object) -> str:
    if isinstance(value, str):
        return value
    if isinstance(value, bytes):
        return value.decode("utf-8", "replace")
    return str(value)


def safe_text(value: object) -> str:
    """`value` as a string that is safe to print: control characters escaped, printable text kept."""
    value = _as_str(value)
    if _UNSAFE.search(value) is None:  # the common case: one scan, no copy
        return value
    return _UNSAFE.sub(_escape, value)


def terminal_line(value: object) -> str:
    """One line of a program's terminal output as plain text: escape sequences dropped, the last carriage
    return's rewrite kept, tabs as four spaces, any other control character escaped (`safe_text`)."""
    text = _as_str(value)
    if _UNSAFE.search(text) is None:
        return text
    text = _SEQUENCE.sub("", text)
    if "\r" in text:
        text = text.rstrip("\r").rpartition("\r")[2]
    return safe_text(text.replace("\t", "    "))


def escape_markup(value: object) -> str:
    """`value` made safe (`safe_text`) and escaped for Textual's markup parser: shown as written."""
    return safe_text(value).replace("[", "\\[")


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
