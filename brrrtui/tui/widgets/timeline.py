"""The timeline: a lane per GPU stream and CPU thread, drawn with the Line API from brrrtui.present.timeline.

Only the visible window is ever binned (O(width · log n) per lane), so a key press costs the same at ten
thousand and a million kernels. The widget keeps the view state (page, zoom, cursor, lane) and posts
`Selected` when the cursor lands on a different kernel, op, gap or streamed kernel. Its pages are the capture
windows and, between them, the kernels streamed after each (brrrtui.present.lanes.PageKey).
"""

from __future__ import annotations

from dataclasses import dataclass

from rich.markup import escape
from rich.segment import Segment
from rich.style import Style
from textual import events
from textual.binding import Binding
from textual.geometry import Size
from textual.message import Message
from textual.scroll_view import ScrollView
from textual.strip import Strip

from brrrtui.present.details import Node
from brrrtui.present.lanes import GAP_LABELS, GAP_ROLES, ITEM_ROLES, Lane, PageKey, WindowLanes
from brrrtui.present.snapshot import Snapshot
from brrrtui.present.timeline import Cell, View, axis_text, bin_index, lane_cells, neighbour, pick
from brrrtui.present.units import fmt_ns
from brrrtui.tui.widgets._roles import ROLE_CLASSES, RoleStyles
from brrrtui.tui.widgets.drill import Drill

LABEL_W = 9
_ITEM_KIND = {"gpu": "kernel", "cpu": "op", "stream": "streamed"}  # lane kind -> Selection kind of its items


@dataclass(frozen=True)
class Selection:
    kind: str  # "kernel" | "op" | "gap" | "streamed"
    row: int  # gpu, op, gap or stream row (of the snapshot's stream table)
    start: float  # ns relative to the page start
    end: float


class Timeline(RoleStyles, ScrollView, can_focus=True):
    COMPONENT_CLASSES = ROLE_CLASSES

    BINDINGS = [
        Binding("left,h", "move(-1)", "Cursor left (pans at the edge)", show=False),
        Binding("right,l", "move(1)", "Cursor right (pans at the edge)", show=False),
        Binding("shift+left,H", "pan(-0.5)", "Pan left half a view", show=False),
        Binding("shift+right,L", "pan(0.5)", "Pan right half a view", show=False),
        Binding("up,k", "lane(-1)", "Previous lane", show=False),
        Binding("down,j", "lane(1)", "Next lane", show=False),
        Binding("plus,equals_sign", "zoom(2)", "Zoom in", key_display="+"),
        Binding("minus,underscore", "zoom(0.5)", "Zoom out", key_display="-"),
        Binding("0", "fit", "Fit the window", show=False),
        Binding("left_square_bracket", "item(-1)", "Previous kernel or gap", show=False, key_display="["),
        Binding("right_square_bracket", "item(1)", "Next kernel or gap", show=False, key_display="]"),
        Binding(
            "comma,less_than_sign",
            "window(-1)",
            "Previous page (window or stream)",
            show=False,
            key_display=",",
        ),
        Binding(
            "full_stop,greater_than_sign",
            "window(1)",
            "Next page (window or stream)",
            show=False,
            key_display=".",
        ),
        Binding("home", "edge(0)", "Start of the window", show=False),
        Binding("end", "edge(1)", "End of the window", show=False),
        Binding("enter", "drill", "Details", show=False),
    ]

    class Selected(Message):
        def __init__(self, timeline: Timeline, selection: Selection | None) -> None:
            super().__init__()
            self.timeline = timeline
            self.selection = selection

    def __init__(self, *, id: str | None = None) -> None:
        super().__init__(id=id)
        self.snapshot: Snapshot | None = None
        self.page: PageKey | None = None
        self.view = View.fit(1.0, 1)
        self.lane = 0
        self.selection: Selection | None = None
        self._styles: dict[tuple[str, str, bool], Style] = {}
        self._cells_key: tuple | None = None
        self._cells: list[list[Cell]] = []

    # ------------------------------------------------------------------ data

    @property
    def window(self) -> int | None:
        """The capture window shown; None on a stream page (or before the first snapshot)."""
        return self.page.window if self.page is not None and not self.page.stream else None

    @property
    def lanes(self) -> WindowLanes | None:
        if self.snapshot is None:
            return None
        return self.snapshot.page_lanes(self.page)

    @property
    def on_latest_page(self) -> bool:
        return self.snapshot is not None and self.page == self.snapshot.latest_page

    def set_snapshot(self, snap: Snapshot, follow: bool) -> None:
        """Show a new snapshot. `follow`: jump to its newest page; otherwise stay where we are."""
        first = self.snapshot is None
        old = self.lanes
        self.snapshot = snap
        gone = snap.page_lanes(self.page) is None
        if follow or first or gone:
            new = snap.latest_page if follow else snap.default_page if gone else self.page
            if new != self.page or first:
                self._show_page(new)
                self._refresh_all()
                return
        wl = self.lanes
        if wl is not None:
            if old is not None and self.view.span >= self.view.extent:  # fitted: stay fitted as it grows
                self.view = View.fit(wl.extent_ns, self._track_width())
            else:
                self.view = self.view.with_extent(wl.extent_ns)
            if old is not None and old.stream and old is not wl:  # stream rows moved: select afresh
                self.lane = min(self.lane, max(len(wl.lanes) - 1, 0))
                self._select_at_cursor()
        self._refresh_all()

    def _show_page(self, page: PageKey | None) -> None:
        self.page = page
        wl = self.lanes
        self.view = View.fit(wl.extent_ns if wl else 1.0, self._track_width())
        self.lane = min(self.lane, max(len(wl.lanes) - 1, 0)) if wl else 0
        self._select_at_cursor()

    def _track_width(self) -> int:
        return max(self.size.width - LABEL_W, 1)

    def _refresh_all(self) -> None:
        wl = self.lanes
        rows = (len(wl.lanes) if wl else 1) + 1
        self.virtual_size = Size(self.size.width, rows)
        self._update_titles()
        self.refresh()

    # ------------------------------------------------------------------ actions

    def action_move(self, cols: int) -> None:
        self.view = self.view.moved(cols)
        self._after_move()

    def action_pan(self, fraction: float) -> None:
        self.view = self.view.panned(fraction)
        self._after_move()

    def action_zoom(self, factor: float) -> None:
        keep = self.selection
        self.view = self.view.zoomed(factor)
        if keep is not None and factor > 1:  # keep the selected item under the cursor while zooming in
            mid = (keep.start + keep.end) / 2
            self.view = self.view.centred_on(min(max(mid, self.view.t0), self.view.t1 - 1e-9))
        self._after_move()

    def action_fit(self) -> None:
        wl = self.lanes
        self.view = View.fit(wl.extent_ns if wl else 1.0, self._track_width())
        self._after_move()

    def action_edge(self, end: int) -> None:
        self.view = self.view.centred_on(self.view.extent - 1.0 if end else 0.0)
        self._after_move()

    def action_lane(self, step: int) -> None:
        wl = self.lanes
        if wl is None or not wl.lanes:
            return
        self.lane = min(max(self.lane + step, 0), len(wl.lanes) - 1)
        self.scroll_to_region_for_lane()
        self._after_move()

    def scroll_to_region_for_lane(self) -> None:
        if self.lane < self.scroll_y:
            self.scroll_to(y=self.lane, animate=False, immediate=True)
        elif self.lane >= self.scroll_y + self.size.height - 1:
            self.scroll_to(y=self.lane - self.size.height + 2, animate=False, immediate=True)

    def action_window(self, step: int) -> None:
        """`,`/`.`: the previous/next page (a capture window or the kernels streamed between two)."""
        snap = self.snapshot
        if snap is None or not snap.pages or self.page is None:
            return
        k = snap.pages.index(self.page) if self.page in snap.pages else len(snap.pages) - 1
        k = min(max(k + step, 0), len(snap.pages) - 1)
        self._show_page(snap.pages[k])
        self._post_selection()
        self._refresh_all()

    def action_item(self, direction: int) -> None:
        """Jump to the next/previous kernel (or op) or gap on the current lane."""
        lane = self._lane()
        if lane is None:
            return
        t = self.selection.start if self.selection else self.view.cursor_t
        cands = []
        k = neighbour(lane.items, t, direction)
        if k is not None:
            cands.append((float(lane.items.start[k]), _ITEM_KIND[lane.kind], lane.items, k))
        k = neighbour(lane.gaps, t, direction)
        if k is not None:
            cands.append((float(lane.gaps.start[k]), "gap", lane.gaps, k))
        if not cands:
            return
        start, kind, idx, k = (
            min(cands, key=lambda c: c[0]) if direction > 0 else max(cands, key=lambda c: c[0])
        )
        self._select(Selection(kind, int(idx.rows[k]), start, float(idx.end[k])))
        self.view = self.view.centred_on(
            min(max((start + float(idx.end[k])) / 2, 0.0), self.view.extent - 1e-9)
        )
        self._refresh_all()

    def action_drill(self) -> None:
        node = self.selection_node()
        if node is not None:
            self.post_message(Drill(node))

    def selection_node(self) -> Node | None:
        s = self.selection
        if s is None:
            return None
        if s.kind == "kernel":
            return Node("kernel", (s.row,))
        if s.kind == "gap":
            return Node("gap", (s.row,))
        snap = self.snapshot
        if s.kind == "streamed":  # keyed by rowid: rows move as the stream's tail moves
            return Node("streamed", (snap.stream_rowid(s.row),)) if snap is not None else None
        if snap is not None:  # a CPU op: its line
            lid = int(snap.analysis.links.op_line[s.row])
            if lid in snap.lines_by_id:
                return Node("line", (lid,))
        return None

    def go_to(self, kind: str, row: int) -> bool:
        """Select a gpu row ("kernel"), gap row ("gap") or stream row ("streamed") and bring it into view;
        False if no page holds it."""
        from brrrtui.present.lanes import locate

        snap = self.snapshot
        if snap is None:
            return False
        if kind == "kernel":
            page, start = PageKey(int(snap.trace.gpu.window[row])), int(snap.trace.gpu.start_ns[row])
        elif kind == "gap":
            page, start = PageKey(int(snap.analysis.gaps.window[row])), int(snap.analysis.gaps.start_ns[row])
        else:
            if snap.stream is None:
                return False
            st = snap.stream.stream
            page, start = PageKey(int(st.after_window[row]), True), int(st.start_ns[row])
        if page != self.page:
            if snap.page_lanes(page) is None:
                return False
            self._show_page(page)
        wl = self.lanes
        assert wl is not None
        found = locate(wl, {"kernel": "gpu", "gap": "gap", "streamed": "stream"}[kind], row, start)
        if found is None:
            return False
        self.lane, k = found
        lane = wl.lanes[self.lane]
        idx = lane.gaps if kind == "gap" else lane.items
        s, e = float(idx.start[k]), float(idx.end[k])
        # zoom in until the item is at least a few cells wide (or as far as it goes)
        while (e - s) < 4 * self.view.cell and self.view.cell > View.MIN_CELL_NS * 2:
            before = self.view.span
            self.view = self.view.centred_on(min(max(s, 0.0), self.view.extent - 1e-9)).zoomed(2)
            if self.view.span == before:
                break
        self.view = self.view.centred_on(min(max((s + e) / 2, 0.0), self.view.extent - 1e-9))
        self._select(Selection(kind, row, s, e))
        self.scroll_to_region_for_lane()
        self._refresh_all()
        return True

    # ------------------------------------------------------------------ selection

    def _lane(self) -> Lane | None:
        wl = self.lanes
        if wl is None or not wl.lanes:
            return None
        return wl.lanes[min(self.lane, len(wl.lanes) - 1)]

    def _after_move(self) -> None:
        self._select_at_cursor()
        self._refresh_all()

    def _select_at_cursor(self) -> None:
        lane = self._lane()
        if lane is None:
            self._select(None)
            return
        a, b = self.view.cell_range(self.view.cursor)
        t = self.view.cursor_t
        k = pick(lane.items, a, b, t)
        if k is not None:
            kind = _ITEM_KIND[lane.kind]
            self._select(
                Selection(kind, int(lane.items.rows[k]), float(lane.items.start[k]), float(lane.items.end[k]))
            )
            return
        k = pick(lane.gaps, a, b, t)
        if k is not None:
            self._select(
                Selection("gap", int(lane.gaps.rows[k]), float(lane.gaps.start[k]), float(lane.gaps.end[k]))
            )
            return
        self._select(None)

    def _select(self, sel: Selection | None) -> None:
        if sel != self.selection:
            self.selection = sel
            self._post_selection()

    def _post_selection(self) -> None:
        self.post_message(self.Selected(self, self.selection))

    # ------------------------------------------------------------------ titles

    def _update_titles(self) -> None:
        snap, wl = self.snapshot, self.lanes
        if snap is None or wl is None:
            self.border_title = "timeline"
            self.border_subtitle = ""
            return
        n = len(snap.windows)
        k = snap.windows.index(wl.window) + 1 if wl.window in snap.windows else n
        v = self.view
        view = f"{fmt_ns(wl.extent_ns)} · view +{fmt_ns(v.t0)}…+{fmt_ns(v.t1)} · zoom ×{v.zoom:.0f}"
        if wl.stream:
            self.border_title = f"timeline · {self._stream_page_title(snap, wl)} · {view}"
            self.border_subtitle = escape(self.selection_text())
            return
        steps = ""
        w = snap.trace.windows
        rows = (w.window == wl.window).nonzero()[0]
        if len(rows) and int(w.first_step[rows[0]]) >= 0:
            first, last = int(w.first_step[rows[0]]), int(w.last_step[rows[0]])
            steps = f" · step {first}" if first == last else f" · steps {first}–{last}"
        self.border_title = f"timeline · window {k}/{n}{steps} · {view}"
        self.border_subtitle = escape(self.selection_text())

    @staticmethod
    def _stream_page_title(snap: Snapshot, wl: WindowLanes) -> str:
        """The title of a stream page: stream after window 3 · 12,345 kernels · lines inferred (87% matched)."""
        where = (
            f"after window {snap.windows.index(wl.window) + 1}"
            if wl.window in snap.windows
            else "before the first window"
            if wl.window < 0
            else f"after window {wl.window + 1}"
        )
        count = sum(len(lane.items) for lane in wl.lanes)
        view = snap.stream
        matched = 0
        if view is not None and count:
            rows = [lane.items.rows for lane in wl.lanes]
            matched = sum(int((view.template_row[r] >= 0).sum()) for r in rows)
        share = 100 * matched / count if count else None
        pct = (
            "–" if share is None else f"{share:.0f}%" if share < 99.5 or matched == count else f"{share:.1f}%"
        )
        return f"stream {where} · {count:,} kernels · lines inferred ({pct} matched)"

    def selection_text(self) -> str:
        s, snap = self.selection, self.snapshot
        if s is None or snap is None:
            return "cursor +" + fmt_ns(self.view.cursor_t)
        dur = fmt_ns(s.end - s.start)
        if s.kind == "kernel":
            from analyzers.results import REGIMES_BY_CODE

            regime = REGIMES_BY_CODE.get(int(snap.analysis.kernel_regime[s.row]))
            name = snap.kernel_name(s.row)
            return f"{name[:60]} · {dur} · {regime.value if regime else '?'} · +{fmt_ns(s.start)}"
        if s.kind == "streamed" and snap.stream is not None:
            from analyzers.results import REGIMES_BY_CODE

            st = snap.stream
            regime = REGIMES_BY_CODE.get(int(st.regime[s.row]))
            name = snap.stream_name(int(st.stream.name[s.row]))
            verdict = f"{regime.value} (inferred)" if regime else "no window has seen it"
            return f"{name[:60]} · {dur} · {verdict} · +{fmt_ns(s.start)}"
        if s.kind == "gap":
            from brrrtui.present.details import CAUSES_BY_CODE

            cause = CAUSES_BY_CODE.get(int(snap.analysis.gaps.cause[s.row]))
            return f"GPU idle · {dur} · {cause.value if cause else '?'} · +{fmt_ns(s.start)}"
        name = snap.trace.name(int(snap.trace.ops.name[s.row]))
        return f"{name} · {dur} on the CPU · +{fmt_ns(s.start)}"

    # ------------------------------------------------------------------ drawing

    def on_resize(self, event: events.Resize) -> None:
        self.view = self.view.resized(self._track_width())
        self._refresh_all()

    def notify_style_update(self) -> None:
        super().notify_style_update()
        self._styles.clear()

    def _style(self, fg: str, bg: str, cursor: bool = False) -> Style:
        key = (fg, bg, cursor)
        st = self._styles.get(key)
        if st is None:
            st = Style(color=self.role_style(fg).color, bgcolor=self.role_style(bg).color)
            if cursor:
                st += self.role_style("cursor")
            self._styles[key] = st
        return st

    def _all_cells(self) -> list[list[Cell]]:
        wl = self.lanes
        v = self.view
        key = (id(self.snapshot), self.page, v.t0, v.span, v.width)
        if key != self._cells_key:
            out = []
            for lane in wl.lanes if wl else ():
                items = bin_index(lane.items, v.t0, v.t1, v.width)
                gaps = bin_index(lane.gaps, v.t0, v.t1, v.width) if len(lane.gaps) else None
                out.append(lane_cells(items, gaps, ITEM_ROLES, GAP_ROLES, GAP_LABELS))
            self._cells, self._cells_key = out, key
        return self._cells

    def render_line(self, y: int) -> Strip:
        row = y + int(self.scroll_y)
        width = self.size.width
        wl = self.lanes
        base = self.rich_style
        if wl is None:
            text = "waiting for the first capture window…" if y == 0 else ""
            return Strip([Segment(text.ljust(width)[:width], base + self.role_style("muted"))], width)
        if row == len(wl.lanes):
            return self._axis_strip(width)
        if row > len(wl.lanes):
            return Strip.blank(width, base)
        lane = wl.lanes[row]
        current = row == self.lane
        label_role = "lane-label-current" if current else "lane-label"
        segs = [Segment(lane.label[: LABEL_W - 1].ljust(LABEL_W), base + self.role_style(label_role))]
        cells = self._all_cells()[row]
        v = self.view
        sel_lo = sel_hi = -1
        s = self.selection
        if current and s is not None:
            sel_lo, sel_hi = v.col_of(s.start), v.col_of(max(s.end - 1e-9, s.start))
        run_text: list[str] = []
        run_style: Style | None = None
        for c, cell in enumerate(cells):
            fg, bg = cell.fg, cell.bg
            if sel_lo <= c <= sel_hi:
                if s is not None and s.kind == "gap":
                    bg = "selected-gap"
                elif cell.glyph != " ":
                    fg = "selected"
            style = self._style(fg, bg, cursor=current and c == v.cursor)
            if style is run_style:
                run_text.append(cell.glyph)
            else:
                if run_text and run_style is not None:
                    segs.append(Segment("".join(run_text), run_style))
                run_text, run_style = [cell.glyph], style
        if run_text and run_style is not None:
            segs.append(Segment("".join(run_text), run_style))
        return Strip(segs, LABEL_W + len(cells)).crop_extend(0, width, base)

    def _axis_strip(self, width: int) -> Strip:
        base = self.rich_style
        v = self.view
        axis = axis_text(v)
        mark = list(axis)
        if 0 <= v.cursor < len(mark):
            mark[v.cursor] = "▲"
        text = "".join(mark)
        segs = [Segment(" " * LABEL_W, base)]
        c = v.cursor
        segs.append(Segment(text[:c], base + self.role_style("axis")))
        segs.append(Segment(text[c : c + 1], base + self.role_style("cursor-col")))
        segs.append(Segment(text[c + 1 :], base + self.role_style("axis")))
        return Strip(segs).crop_extend(0, width, base)

    # ------------------------------------------------------------------ mouse

    def on_click(self, event: events.Click) -> None:
        wl = self.lanes
        if wl is None:
            return
        offset = event.get_content_offset(self)
        if offset is None:
            return
        row = offset.y + int(self.scroll_y)
        if row < len(wl.lanes):
            self.lane = row
        if LABEL_W <= offset.x < LABEL_W + self.view.width:
            self.view = View(
                self.view.t0, self.view.span, self.view.extent, self.view.width, offset.x - LABEL_W
            )
        self._after_move()

    def on_mouse_scroll_up(self, event: events.MouseScrollUp) -> None:
        event.prevent_default()
        event.stop()
        self.action_zoom(2)

    def on_mouse_scroll_down(self, event: events.MouseScrollDown) -> None:
        event.prevent_default()
        event.stop()
        self.action_zoom(0.5)
