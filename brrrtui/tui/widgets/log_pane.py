"""The script's stdout and stderr (and brrrtui's own notes), live.

A script can print far faster than anyone reads or a terminal draws, so the pane takes lines in batches
(`take`, as the app drains the feed; the recorder hands the script's output over a block of lines at a time)
and draws (`flush`: at most once per feed poll, and every `FLOOD_EVERY_S` while lines are left out) at most
the newest `BATCH` lines of what it took since the last flush; the lines before them are counted and said in
one muted line, never drawn. brrrtui's own lines are always drawn. A line is drawn up to `MAX_CHARS`
characters. The pane keeps the last `MAX_LINES` lines; the recording keeps the script's last lines apart (meta
output_tail).

What the script prints is meant for a terminal, and this pane is not one: a line is drawn as
`brrrtui.contract.safe.terminal_line` makes it (escape sequences such as colours, a window title or a
clipboard write dropped, any other control character shown escaped), so nothing the script prints reaches
the user's terminal as control. brrrtui's own lines, which may quote paths, go through `safe_text`. Lines are
drawn as `Text`, never parsed as markup."""

from __future__ import annotations

import time
from collections.abc import Sequence
from itertools import repeat

from rich.text import Text
from textual.widgets import RichLog

from brrrtui.contract.safe import safe_text, terminal_line
from brrrtui.record.feed import LogLine
from brrrtui.tui.widgets._roles import ROLE_CLASSES, RoleStyles

MAX_LINES = 5000
BATCH = 100  # lines drawn per flush at most: more than a tall log pane shows
FLOOD_EVERY_S = 0.5  # while lines are left out (a flood), the pane is drawn at most this often
MAX_CHARS = 1000  # of a line drawn (the recording keeps the script's last lines whole, meta output_tail)


class LogPane(RoleStyles, RichLog):
    COMPONENT_CLASSES = ROLE_CLASSES

    def __init__(self, *, id: str | None = None) -> None:
        super().__init__(
            id=id, max_lines=MAX_LINES, wrap=False, markup=False, highlight=False, auto_scroll=True
        )
        self.lines_written = 0  # every line taken, drawn or not
        self.lines_skipped = 0  # taken but not drawn
        self._own: list[tuple[str, str]] = []  # (stream, text) of brrrtui's lines older than the newest BATCH
        self._newest: list[tuple[str, str]] = []  # the newest BATCH rows since the last flush
        self._skipped = 0  # since the last flush
        self._flushed_at = 0.0
        self.border_title = "log"

    def add(self, stream: str, text: str) -> None:
        self.take([LogLine(stream, text)])
        self.flush()

    def take(self, events: Sequence[LogLine]) -> None:
        """Lines in the order printed, to draw at the next flush. Walked newest first: once the newest BATCH
        rows are in hand, an older line costs a count (a block of the script's lines: one count), and only
        brrrtui's own lines are kept."""
        fresh: list[tuple[str, str]] = []  # the newest rows of this take, newest first
        own: list[tuple[str, str]] = []  # brrrtui's lines older than those, newest first
        skipped = written = 0
        for ev in reversed(events):
            if ev.lines is None:
                written += 1
                if len(fresh) < BATCH:
                    fresh.append((ev.stream, ev.text))
                elif ev.stream == "brrrtui":
                    own.append((ev.stream, ev.text))
                else:
                    skipped += 1
                continue
            room = max(BATCH - len(fresh), 0)  # a block is the script's output: none of it is brrrtui's own
            shown = ev.lines[len(ev.lines) - room :] if room else []
            fresh += zip(repeat(ev.stream), reversed(shown))
            written += ev.dropped + len(ev.lines)
            skipped += ev.dropped + len(ev.lines) - len(shown)
        keep = BATCH - len(fresh)  # rows taken before that stay among the newest
        older = self._newest[: max(len(self._newest) - keep, 0)]
        self._newest = self._newest[len(older) :] + fresh[::-1]
        mine = [row for row in older if row[0] == "brrrtui"]
        self._own += mine + own[::-1]
        self._skipped += skipped + len(older) - len(mine)
        self.lines_written += written

    def flush(self, every_s: float = 0.0) -> None:
        """Draw what was taken since the last flush, in one write; not sooner than `every_s` after the last
        (a flood would otherwise redraw the pane after every chunk of the feed), nor, while lines are being
        left out, than FLOOD_EVERY_S: drawing is the UI thread's work that grows with a flood."""
        now = time.monotonic()
        every_s = max(every_s, FLOOD_EVERY_S) if self._skipped else every_s
        if (not self._newest and not self._own) or now - self._flushed_at < every_s:
            return
        self._flushed_at = now
        out = Text(no_wrap=True)
        rows = list(self._own)
        if self._skipped:
            rows.append(
                ("brrrtui", f"… {self._skipped:,} lines not shown: printed faster than they can be drawn")
            )
        rows += self._newest
        for k, (stream, text) in enumerate(rows):
            if k:
                out.append("\n")
            role = stream if stream in ("stdout", "stderr", "brrrtui") else "stdout"
            if stream == "brrrtui":
                out.append("brrrtui: ", self.role_style("muted"))
                text = safe_text(text.replace("\t", "    "))
            else:
                text = terminal_line(text)
            text = text if len(text) <= MAX_CHARS else text[:MAX_CHARS] + f"… ({len(text):,} characters)"
            out.append(text, self.role_style(role))
        self.write(out)
        self.lines_skipped += self._skipped
        self._own, self._newest, self._skipped = [], [], 0
        shown = f", {self.lines_skipped:,} not shown" if self.lines_skipped else ""
        self.border_title = f"log ({self.lines_written:,} lines{shown})"
