"""Locations on screen: terminal hyperlinks, and rows that keep a location's file name and line at any width.

A `Location` (brrrtui.present.paths) whose file is on this machine is drawn with a Rich link style; Textual
writes such text as an OSC 8 hyperlink to `file://HOST/ABS/PATH`, which VS Code's terminal, iTerm2, WezTerm,
kitty and GNOME Terminal open (under tmux ≥ 3.4 only with `terminal-features` `hyperlinks`; terminals without
them show the text alone). `BRRRTUI_LINKS=0` turns the links off, for a terminal that shows them wrongly.

`FitRow` is one row of spans drawn at whatever width its pane gives it: its first location is cut to the room
left (`present.paths.fit_location`: the folders' middle first, the line number never), and a row may offer
narrower variants (fewer columns) for when even the location's file name would not fit.
"""

from __future__ import annotations

import os
import socket
from collections.abc import Iterable, Sequence
from functools import lru_cache

from rich.console import Console, ConsoleOptions, RenderResult
from rich.measure import Measurement
from rich.style import Style
from rich.text import Text

from brrrtui.present.paths import Location, file_uri, fit_parts

LINKS_ENV = "BRRRTUI_LINKS"
_OFF = ("0", "off", "no", "false")

StyledSpan = tuple[str, Style]


def links_on() -> bool:
    return os.environ.get(LINKS_ENV, "1").strip().lower() not in _OFF


@lru_cache(maxsize=1)
def _host() -> str:
    return socket.gethostname()


def link_target(text: str) -> str | None:
    """The URI `text` opens: a Location of a file on this machine, links on; else None."""
    if isinstance(text, Location) and text.target and links_on():
        return file_uri(text.target, _host())
    return None


def with_link(text: str, style: Style) -> Style:
    uri = link_target(text)
    return style + Style(link=uri) if uri else style


def linked_text(spans: Iterable[StyledSpan], **kw: object) -> Text:
    out = Text(**kw)  # type: ignore[arg-type]
    for chunk, style in spans:
        out.append(chunk, with_link(chunk, style))
    return out


class FitRow:
    """One row of spans that fits the width it is drawn at (see the module doc). `variants` go from the
    fullest to the narrowest; the first whose location keeps its file name and line whole is drawn (else the
    last; rows of one list give the same `need`, so they pick the same columns), its location cut to fit and
    the rest cropped with `…`."""

    def __init__(self, *variants: Sequence[StyledSpan], need: int | None = None) -> None:
        self.variants = [list(v) for v in variants]
        self.need = need  # columns the location must keep (rows of one list pass their longest file name)
        self._styles = [[with_link(t, s) for t, s in v] for v in self.variants]  # one link id per span

    def _pick(self, width: int) -> int:
        for k, spans in enumerate(self.variants):
            before = 0
            for text, _ in spans:
                if isinstance(text, Location):
                    if before + (self.need if self.need is not None else text.least) <= width:
                        return k
                    break
                before += len(text)
            else:
                if before <= width:
                    return k
        return len(self.variants) - 1

    def text(self, width: int) -> Text:
        k = self._pick(width)
        parts = fit_parts([t for t, _ in self.variants[k]], width)
        out = Text(no_wrap=True, overflow="ellipsis")
        at = next((i for i, p in enumerate(parts) if isinstance(p, Location)), None)
        room = width - sum(len(p) for p in parts[: at + 1]) if at is not None else width
        for i, (part, style) in enumerate(zip(parts, self._styles[k], strict=True)):
            if at is not None and i > at:  # after the location: cropped here, so `…` never lands on it
                if room < 2 or len(part) > room:
                    out.append(part[: room - 1] + "…" if room >= 2 else "", style)
                    break
                room -= len(part)
            out.append(part, style)
        return out

    def __str__(self) -> str:
        return "".join(t for t, _ in self.variants[0])

    def __rich_console__(self, console: Console, options: ConsoleOptions) -> RenderResult:
        yield self.text(options.max_width)

    def __rich_measure__(self, console: Console, options: ConsoleOptions) -> Measurement:
        full = sum(len(t) for t, _ in self.variants[0])
        return Measurement(min(full, 8), full)
