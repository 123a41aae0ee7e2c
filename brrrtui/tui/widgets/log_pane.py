"""The script's stdout and stderr (and brrrtui's own notes), live.

A script can print far faster than anyone reads or a terminal draws, so the pane takes lines in batches
(`take`, as the app drains the feed; `flush` at most once per feed poll) and draws at most the newest `BATCH`
lines of what it took since the last flush; the lines before them are counted and said in one muted line, never drawn.
brrrtui's own lines are always drawn. The pane keeps the last `MAX_LINES` lines; the recording keeps the
script's last lines apart (meta output_tail)."""

from __future__ import annotations

import time
from collections.abc import Sequence

from rich.text import Text
from textual.widgets import RichLog

from brrrtui.record.feed import LogLine
from brrrtui.tui.widgets._roles import ROLE_CLASSES, RoleStyles

MAX_LINES = 5000
BATCH = 200  # lines drawn per flush at most: a tall log pane shows a fifth of them


class LogPane(RoleStyles, RichLog):
    COMPONENT_CLASSES = ROLE_CLASSES

    def __init__(self, *, id: str | None = None) -> None:
        super().__init__(
            id=id, max_lines=MAX_LINES, wrap=False, markup=False, highlight=False, auto_scroll=True
        )
        self.lines_written = 0  # every line taken, drawn or not
        self.lines_skipped = 0  # taken but not drawn
        self._own: list[LogLine] = []  # brrrtui's lines older than the newest BATCH, since the last flush
        self._newest: list[LogLine] = []
        self._skipped = 0  # since the last flush
        self._flushed_at = 0.0
        self.border_title = "log"

    def add(self, stream: str, text: str) -> None:
        self.take([LogLine(stream, text)])
        self.flush()

    def take(self, lines: Sequence[LogLine]) -> None:
        """Lines in the order printed, to draw at the next flush. Cheap per line that will not be drawn."""
        self.lines_written += len(lines)
        newest = self._newest + list(lines[-BATCH:])
        older = newest[:-BATCH] + list(lines[:-BATCH])  # in order: what drops out of the newest BATCH
        own = [ln for ln in older if ln.stream == "brrrtui"]
        self._own += own
        self._skipped += len(older) - len(own)
        self._newest = newest[-BATCH:]

    def flush(self, every_s: float = 0.0) -> None:
        """Draw what was taken since the last flush, in one write; not sooner than `every_s` after the last
        (a flood would otherwise redraw the pane after every chunk of the feed)."""
        now = time.monotonic()
        if (not self._newest and not self._own) or now - self._flushed_at < every_s:
            return
        self._flushed_at = now
        out = Text(no_wrap=True)
        rows = [(ln.stream, ln.text) for ln in self._own]
        if self._skipped:
            rows.append(
                ("brrrtui", f"… {self._skipped:,} lines not shown: printed faster than they can be drawn")
            )
        rows += [(ln.stream, ln.text) for ln in self._newest]
        for k, (stream, text) in enumerate(rows):
            if k:
                out.append("\n")
            role = stream if stream in ("stdout", "stderr", "brrrtui") else "stdout"
            if stream == "brrrtui":
                out.append("brrrtui: ", self.role_style("muted"))
            out.append(text.replace("\t", "    "), self.role_style(role))
        self.write(out)
        self.lines_skipped += self._skipped
        self._own, self._newest, self._skipped = [], [], 0
        shown = f", {self.lines_skipped:,} not shown" if self.lines_skipped else ""
        self.border_title = f"log ({self.lines_written:,} lines{shown})"
