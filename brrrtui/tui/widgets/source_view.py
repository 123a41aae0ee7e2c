"""The user's source with a regime gutter on every line (Line API: only visible lines are drawn)."""

from __future__ import annotations

from dataclasses import dataclass

from rich.segment import Segment
from textual import events
from textual.content import Content
from textual.geometry import Size
from textual.message import Message
from textual.scroll_view import ScrollView
from textual.strip import Strip
from textual.style import Style as TextualStyle

from analyzers.results import LineStat
from brrrtui.contract.model import SourceLine
from brrrtui.contract.safe import safe_text
from brrrtui.present.details import display_path
from brrrtui.present.gutter import gutter_spans
from brrrtui.present.selection import Kind, Node
from brrrtui.present.snapshot import Snapshot
from brrrtui.present.source import NOT_HERE, read_source
from brrrtui.tui.keymap import bindings
from brrrtui.tui.widgets._roles import ROLE_CLASSES, RoleStyles
from brrrtui.tui.widgets.drill import Drill
from brrrtui.tui.widgets.links import link_target

Span = tuple[str, str]
COMPACT_BELOW = 90  # columns: drop the share bar from the gutter


@dataclass(frozen=True)
class Row:
    lineno: int  # 1-based line of the file; 0 for a message row
    spans: tuple[Span, ...]


class SourceView(RoleStyles, ScrollView, can_focus=True):
    COMPONENT_CLASSES = ROLE_CLASSES

    BINDINGS = bindings("source")

    class LineChosen(Message):
        """The cursor moved to another line (stat is None on lines without GPU work)."""

        def __init__(self, line: SourceLine | None, stat: LineStat | None) -> None:
            super().__init__()
            self.line = line
            self.stat = stat

    def __init__(self, *, id: str | None = None) -> None:
        super().__init__(id=id)
        self.snapshot: Snapshot | None = None
        self.file: str | None = None  # as recorded
        self.path: str | None = None  # resolved on this machine
        self.rows: list[Row] = []
        self.cursor = 0  # row index
        self._stats: dict[int, LineStat] = {}
        self._code_width = 0

    # ------------------------------------------------------------------ data

    def set_snapshot(self, snap: Snapshot) -> None:
        self.snapshot = snap
        if self.file is None and snap.hot_lines:
            self.show_line(snap.hot_lines[0].line, notify=False)
        else:
            keep = self.current_lineno()
            self._load(self.file)
            self._move_to_lineno(keep)

    def forget_file(self) -> None:
        """The next snapshot opens on its hottest line (it holds other windows: another phase)."""
        self.file = None

    def show_line(self, line: SourceLine, notify: bool = True) -> None:
        """Open line.file (if not open) and put the cursor on line.line."""
        if line.file != self.file:
            self._load(line.file)
        self._move_to_lineno(line.line)
        if notify:
            self._post_chosen()

    def current_lineno(self) -> int:
        return self.rows[self.cursor].lineno if self.rows else 0

    def current_line(self) -> SourceLine | None:
        if self.file is None or not self.rows:
            return None
        n = self.current_lineno()
        stat = self._stats.get(n)
        if stat is not None:
            return stat.line
        return SourceLine(self.file, n, "") if n > 0 else None

    def current_stat(self) -> LineStat | None:
        return self._stats.get(self.current_lineno())

    def _load(self, file: str | None) -> None:
        snap = self.snapshot
        self.file = file
        self.rows = []
        self._stats = {}
        if snap is None or file is None:
            self._refresh_all()
            return
        a = snap.analysis  # a library file (opened from the module tree) has the GPU time of its lines too
        self._stats = {s.line.line: s for s in [*a.lines, *a.library_lines] if s.line.file == file}
        self.path = snap.resolve(file)
        lines = read_source(self.path) if self.path else NOT_HERE  # read now, when shown (present.source)
        if not isinstance(lines, str):
            self.rows = [Row(k + 1, spans) for k, spans in enumerate(lines)]
        else:
            where = "(looked next to the recording, in the run's folder and here);"
            self.rows = [
                Row(0, ((safe_text(f"{file} {lines}"), "failed"),)),
                *([Row(0, ((where, "muted"),))] if lines == NOT_HERE else []),
                Row(0, (("its lines with GPU time:", "muted"),)),
            ]
            self.rows += [Row(n, (("…", "muted"),)) for n in sorted(self._stats)]
        self._code_width = max((sum(len(t) for t, _ in r.spans) for r in self.rows), default=0)
        self.cursor = min(self.cursor, max(len(self.rows) - 1, 0))
        self._refresh_all()

    def _move_to_lineno(self, lineno: int) -> None:
        for k, r in enumerate(self.rows):
            if r.lineno >= lineno:
                self.cursor = k
                break
        self._refresh_all()
        self._ensure_cursor_visible()

    # ------------------------------------------------------------------ actions

    def action_cursor(self, step: int) -> None:
        self._set_cursor(self.cursor + step)

    def action_page(self, step: int) -> None:
        self._set_cursor(self.cursor + step * max(self.size.height - 1, 1))

    def action_edge(self, end: int) -> None:
        self._set_cursor(len(self.rows) - 1 if end else 0)

    def action_hot(self, direction: int) -> None:
        ks = [k for k, r in enumerate(self.rows) if r.lineno in self._stats]
        nxt = [k for k in ks if (k > self.cursor if direction > 0 else k < self.cursor)]
        if nxt:
            self._set_cursor(nxt[0] if direction > 0 else nxt[-1])

    def action_hscroll(self, cols: int) -> None:
        self.scroll_to(x=max(0, self.scroll_x + cols), animate=False, immediate=True)

    def action_drill(self) -> None:
        stat = self.current_stat()
        if stat is not None:
            self.post_message(Drill(Node(Kind.LINE, (stat.line_id,))))

    def _set_cursor(self, k: int) -> None:
        k = min(max(k, 0), max(len(self.rows) - 1, 0))
        if k != self.cursor:
            self.cursor = k
            self._scroll_cursor_into_view()
            self.refresh()
            self._post_chosen()

    def _post_chosen(self) -> None:
        self.post_message(self.LineChosen(self.current_line(), self.current_stat()))

    def _cursor_in_view(self) -> bool:
        return self.scroll_y <= self.cursor < self.scroll_y + max(self.size.height, 1)

    def _scroll_cursor_into_view(self, center: bool = False) -> None:
        h = max(self.size.height, 1)
        if center and not self._cursor_in_view():
            self._centre()
        elif self.cursor < self.scroll_y:
            self.scroll_to(y=self.cursor, animate=False, immediate=True)
        elif self.cursor >= self.scroll_y + h:
            self.scroll_to(y=self.cursor - h + 1, animate=False, immediate=True)

    def _centre(self) -> None:
        self.scroll_to(y=max(self.cursor - max(self.size.height, 1) // 2, 0), animate=False, immediate=True)

    # ------------------------------------------------------------------ drawing

    @property
    def compact(self) -> bool:
        return self.size.width < COMPACT_BELOW

    def _refresh_all(self) -> None:
        snap = self.snapshot
        digits = len(str(max((r.lineno for r in self.rows), default=1)))
        gw = sum(len(t) for t, _ in gutter_spans(None, 1, False, False, self.compact, digits, 1))
        self.virtual_size = Size(gw + self._code_width + 1, len(self.rows))
        if snap is None or self.file is None:
            self.border_title = "source"
        else:
            where = display_path(snap, SourceLine(self.file, self.current_lineno(), ""))
            where = where.fit(self.outer_size.width - len("╭─ source · ") - len(" ─╮"))
            uri = link_target(where)
            self.border_title = Content.assemble("source · ", (where, TextualStyle(link=uri) if uri else ""))
        per = "step" if snap is not None and snap.per_step else "window"
        self.border_subtitle = f"GPU/{per} · share · C/M/O regime · F fusion"
        self.refresh()

    def on_resize(self, event: events.Resize) -> None:
        self._refresh_all()
        self._ensure_cursor_visible()

    def _ensure_cursor_visible(self) -> None:
        """Centre the cursor line if it is out of view: now, and again once the pending layout has settled the
        view's size (a centre taken from the size before it is off by the rows the layout moved)."""
        hidden = not self._cursor_in_view()
        self._scroll_cursor_into_view(center=True)
        self.call_after_refresh(self._recentre, hidden)

    def _recentre(self, was_hidden: bool, tries: int = 20) -> None:
        if not was_hidden and self._cursor_in_view():
            return
        if not self.allow_vertical_scroll and self.virtual_size.height > self.size.height and tries:
            # Textual turns scrolling on at the layout pass that shows the scrollbar for the rows just loaded;
            # on a loaded machine that pass can come after this refresh (scrolling now would do nothing)
            self.call_after_refresh(self._recentre, was_hidden, tries - 1)
            return
        self._centre()

    def render_line(self, y: int) -> Strip:
        row_i = y + int(self.scroll_y)
        width = self.size.width
        base = self.rich_style
        snap = self.snapshot
        if snap is None or not self.rows:
            msg = "no source line has GPU time yet" if snap is not None and y == 0 else ""
            return Strip([Segment(msg, base + self.role_style("muted"))]).crop_extend(0, width, base)
        if row_i >= len(self.rows):
            return Strip.blank(width, base)
        row = self.rows[row_i]
        current = row_i == self.cursor
        line_bg = base + self.role_style("current-line") if current else base
        digits = len(str(max(self.rows[-1].lineno, 1)))
        segs: list[Segment] = []
        if row.lineno > 0:
            stat = self._stats.get(row.lineno)
            fused = stat is not None and stat.line in snap.fused_lines
            gspans = gutter_spans(
                stat, snap.total_gpu_ns, snap.per_step, fused, self.compact, digits, row.lineno
            )
            for text, role in gspans:
                segs.append(
                    Segment(
                        text, line_bg + self.role_style("lineno" if current and role == "lineno" else role)
                    )
                )
            if current:
                segs[-1] = Segment("▶", line_bg + self.role_style("gutter-time"))
        gutter_len = sum(len(s.text) for s in segs)
        code = Strip([Segment(t, line_bg + self.role_style(r)) for t, r in row.spans])
        sx = int(self.scroll_x)
        code = code.crop(sx, sx + max(width - gutter_len, 0))
        return Strip(segs + list(code), None).crop_extend(0, width, line_bg)

    def on_click(self, event: events.Click) -> None:
        offset = event.get_content_offset(self)
        if offset is not None:
            self._set_cursor(offset.y + int(self.scroll_y))
