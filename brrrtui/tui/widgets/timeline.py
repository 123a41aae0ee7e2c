"""The timeline: a lane per GPU stream and CPU thread, drawn with the Line API from brrrtui.present.timeline.

Only the visible window is ever binned (O(width · log n) per lane), so a key press costs the same at ten
thousand and a million kernels. The widget keeps the view state (page, zoom, cursor, lane) and posts
`Selected` when the cursor lands on a different kernel, op, gap or streamed kernel. Its pages are the capture
windows and, between them, the kernels streamed after each (brrrtui.present.lanes.PageKey).
"""

from __future__ import annotations

from rich.segment import Segment
from rich.style import Style
from textual import events
from textual.content import Content
from textual.geometry import Size
from textual.message import Message
from textual.scroll_view import ScrollView
from textual.strip import Strip

from brrrtui.present import queries
from brrrtui.present.lanes import GAP_LABELS, GAP_ROLES, ITEM_ROLES, Lane, PageKey, WindowLanes, locate
from brrrtui.present.selection import Kind, Node, Selection
from brrrtui.present.snapshot import Snapshot
from brrrtui.present.timeline import Cell, View, axis_text, bin_index, lane_cells
from brrrtui.present.timeline_text import selection_text, timeline_title
from brrrtui.tui.keymap import bindings
from brrrtui.tui.widgets._roles import ROLE_CLASSES, RoleStyles
from brrrtui.tui.widgets.drill import Drill

LABEL_W = 9
__all__ = ["LABEL_W", "Selection", "Timeline"]


class Timeline(RoleStyles, ScrollView, can_focus=True):
    COMPONENT_CLASSES = ROLE_CLASSES

    BINDINGS = bindings("timeline")

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
        # another analysis (a live window, or the whole phase after a first look) numbers its rows afresh: the
        # selection is found again at the cursor, and posted even where its row number happens to be the same
        renumbered = self.snapshot is not None and snap.analysis is not self.snapshot.analysis
        self.snapshot = snap
        if renumbered:
            self.selection = None
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
            if renumbered or (old is not None and old.stream and old is not wl):  # rows moved: select afresh
                self.lane = min(self.lane, max(len(wl.lanes) - 1, 0))
                self._select_at_cursor()
        self._refresh_all()

    def forget_page(self) -> None:
        """The next snapshot opens on its default page (it holds other windows: another phase)."""
        self.page = None

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
        sel = queries.next_item(lane, t, direction)
        if sel is None:
            return
        self._select(sel)
        self.view = self.view.centred_on(min(max((sel.start + sel.end) / 2, 0.0), self.view.extent - 1e-9))
        self._refresh_all()

    def action_drill(self) -> None:
        node = self.selection_node()
        if node is not None:
            self.post_message(Drill(node))

    def selection_node(self) -> Node | None:
        return queries.selection_node(self.snapshot, self.selection)

    def go_to(self, kind: str, row: int) -> bool:
        """Select a gpu row (KERNEL), gap row (GAP) or stream row (STREAMED) and bring it into view; False if
        no page holds it."""
        snap = self.snapshot
        found = queries.page_of(snap, Kind(kind), row) if snap is not None else None
        if snap is None or found is None:
            return False
        page, start = found
        if page != self.page:
            if snap.page_lanes(page) is None:
                return False
            self._show_page(page)
        wl = self.lanes
        assert wl is not None
        at = locate(wl, Kind(kind), row, start)
        if at is None:
            return False
        self.lane, k = at
        lane = wl.lanes[self.lane]
        idx = lane.gaps if kind == Kind.GAP else lane.items
        s, e = float(idx.start[k]), float(idx.end[k])
        self._zoom_to(s, e)
        self._select(Selection(Kind(kind), row, s, e))
        self.scroll_to_region_for_lane()
        self._refresh_all()
        return True

    def _zoom_to(self, s: float, e: float) -> None:
        """Zoom in until [s, e) is at least a few cells wide (or as far as it goes), and centre it."""
        while (e - s) < 4 * self.view.cell and self.view.cell > View.MIN_CELL_NS * 2:
            before = self.view.span
            self.view = self.view.centred_on(min(max(s, 0.0), self.view.extent - 1e-9)).zoomed(2)
            if self.view.span == before:
                break
        self.view = self.view.centred_on(min(max((s + e) / 2, 0.0), self.view.extent - 1e-9))

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
        self._select(queries.item_at(lane, self.view) if lane is not None else None)

    def _select(self, sel: Selection | None) -> None:
        if sel != self.selection:
            self.selection = sel
            self._post_selection()

    def _post_selection(self) -> None:
        self.post_message(self.Selected(self, self.selection))

    # ------------------------------------------------------------------ titles

    def _update_titles(self) -> None:
        self.border_title = Content(timeline_title(self.snapshot, self.lanes, self.view))
        self.border_subtitle = Content(self.selection_text()) if self.lanes is not None else ""

    def selection_text(self) -> str:
        return selection_text(self.snapshot, self.selection, self.view.cursor_t)

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
                if s is not None and s.kind == Kind.GAP:
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
