"""The main screen: header, timeline, source + hot lines + details, log. Routes messages between panes."""

from __future__ import annotations

from textual.app import ComposeResult
from textual.containers import Horizontal, Vertical
from textual.screen import Screen
from textual.widget import Widget
from textual.widgets import Footer, OptionList

from brrrtui.contract.model import SourceLine
from brrrtui.present import queries
from brrrtui.present.details import display_path
from brrrtui.present.selection import SUMMARY, Kind, Node, Selection
from brrrtui.present.snapshot import Snapshot
from brrrtui.present.status import RunState
from brrrtui.tui.keymap import bindings
from brrrtui.tui.screens.modules import ModuleScreen
from brrrtui.tui.screens.search import Found, SearchScreen
from brrrtui.tui.widgets.details import Details
from brrrtui.tui.widgets.drill import Drill
from brrrtui.tui.widgets.hot_lines import HotLines
from brrrtui.tui.widgets.log_pane import LogPane
from brrrtui.tui.widgets.regime_bars import RegimeBars
from brrrtui.tui.widgets.source_view import SourceView
from brrrtui.tui.widgets.status_bar import StatusBar
from brrrtui.tui.widgets.telemetry import Telemetry
from brrrtui.tui.widgets.timeline import Timeline

PANES = ("timeline", "source", "hot", "details", "log")


class MainScreen(Screen):
    BINDINGS = bindings("main")
    HORIZONTAL_BREAKPOINTS = [(0, "-narrow"), (120, "-wide")]
    VERTICAL_BREAKPOINTS = [(0, "-short"), (36, "-tall")]

    def __init__(self, state: RunState) -> None:
        super().__init__()
        self.state = state
        self.snapshot: Snapshot | None = None
        self.finding_index = -1
        self.found: Found | None = None  # the search n / N step through (None: they step the findings)
        self._g_origin: tuple[Selection, int | None] | None = None
        self._last_pane: str = "timeline"

    def compose(self) -> ComposeResult:
        with Vertical(id="header"):
            yield StatusBar(self.state, id="status")
            yield RegimeBars(id="regimes")
            yield Telemetry(id="telemetry")
        yield Timeline(id="timeline")
        with Horizontal(id="middle"):
            yield SourceView(id="source")
            with Vertical(id="side"):
                yield HotLines(id="hot")
                yield Details(id="details")
        yield LogPane(id="log")
        yield Footer()

    def on_mount(self) -> None:
        self.query_one(Timeline).focus()

    # ------------------------------------------------------------------ accessors

    @property
    def timeline(self) -> Timeline:
        return self.query_one(Timeline)

    @property
    def source(self) -> SourceView:
        return self.query_one(SourceView)

    @property
    def hot(self) -> HotLines:
        return self.query_one(HotLines)

    @property
    def details(self) -> Details:
        return self.query_one(Details)

    @property
    def log_pane(self) -> LogPane:
        return self.query_one(LogPane)

    def focused_pane(self) -> str | None:
        w: Widget | None = self.focused
        while w is not None:
            if w.id in PANES:
                return w.id
            w = w.parent if isinstance(w.parent, Widget) else None
        return None

    # ------------------------------------------------------------------ updates from the app

    def set_state(self, state: RunState) -> None:
        self.state = state
        for bar in self.query(StatusBar):  # none before compose; the bar is then built from self.state
            bar.set_state(state)

    def show_snapshot(self, snap: Snapshot, follow: bool, fresh: bool = False) -> None:
        """Show a new analysis. `fresh`: of other windows (another phase): every pane starts over on it (the
        newest window, the hottest line, the summary) instead of keeping its place."""
        self.snapshot = snap
        tl = self.timeline
        if fresh:
            self._start_over(snap)
        tl.set_snapshot(snap, follow)
        wl = tl.lanes
        rows = (len(wl.lanes) if wl else 1) + 1
        tl.styles.height = min(rows, 4 if self.has_class("-short") else 12) + 2
        self.source.set_snapshot(snap)
        self.hot.set_snapshot(snap)
        held = len(self.details.stack)
        self.details.set_snapshot(snap)
        node = tl.selection_node()
        if len(self.details.stack) < held and node is not None:  # it held rows numbered afresh (Details)
            self.details.show(node)  # what the timeline's cursor holds in the new analysis
        self._update_regimes()
        tr = snap.trace
        if not self.state.live and len(tr.telemetry):
            t = tr.telemetry
            self.query_one(Telemetry).set_series(
                t.t_ns,
                t.gpu_util_pct,
                t.mem_used_bytes,
                t.power_w,
                t.sm_clock_mhz,
                tr.device.total_memory_bytes,
            )
        else:
            self.query_one(Telemetry).mem_total = tr.device.total_memory_bytes

    def _start_over(self, snap: Snapshot) -> None:
        self.timeline.forget_page()
        self.details.stack = [SUMMARY]
        self.finding_index = -1
        self._g_origin = None
        if snap.hot_lines:
            self.source.forget_file()

    def show_stream(self, snap: Snapshot) -> None:
        """A snapshot that differs from the shown one only in its kernel stream: redraw the timeline (following
        the newest page if it was on the newest page) and the details; the other panes keep theirs."""
        tl = self.timeline
        follow = tl.on_latest_page
        self.snapshot = snap
        tl.set_snapshot(snap, follow)
        self.details.set_snapshot(snap)

    def _update_regimes(self) -> None:
        snap = self.snapshot
        if snap is None:
            return
        if snap.cpu_only:
            per = "step" if snap.per_step else "window"
            self.query_one(RegimeBars).set_no_gpu(
                f"no GPU activity recorded: no regimes; lines show their CPU-side time per {per} "
                "(sampled, or in torch calls where more)"
            )
            return
        w = self.timeline.window
        wb = snap.analysis.window_breakdowns.get(w) if w is not None else None
        k = snap.window_place(w)[0] if w is not None else 0
        page = self.timeline.page
        stream = page is not None and page.stream
        self.query_one(RegimeBars).set_breakdowns(
            ("stream", None) if stream else (f"window {k}", wb) if wb is not None else None,
            snap.analysis.breakdown,
            snap.analysis.overhead.corrected_overhead_fraction,
            "regimes inferred per kernel, no breakdown" if stream else None,
        )

    # ------------------------------------------------------------------ pane messages

    def on_timeline_selected(self, event: Timeline.Selected) -> None:
        self._update_regimes()
        node = self.timeline.selection_node()
        if node is not None and self.focused_pane() in (None, "timeline"):
            self.details.show(node)

    def on_drill(self, event: Drill) -> None:  # Enter in the timeline or the source view
        self._drill(event.node)

    def on_source_view_line_chosen(self, event: SourceView.LineChosen) -> None:
        if event.stat is not None:
            if self.focused_pane() in (None, "source"):
                self.details.show(Node(Kind.LINE, (event.stat.line_id,)))
            self.hot.select_line_id(event.stat.line_id)

    def on_option_list_option_highlighted(self, event: OptionList.OptionHighlighted) -> None:
        if event.option_list is not self.hot or self.snapshot is None or event.option.id is None:
            return
        stat = self.snapshot.lines_by_id.get(int(event.option.id))
        if stat is not None and self.focused_pane() == "hot":
            self.source.show_line(stat.line, notify=False)
            self.details.show(Node(Kind.LINE, (stat.line_id,)))

    def on_option_list_option_selected(self, event: OptionList.OptionSelected) -> None:
        if event.option_list is self.hot and event.option.id is not None:
            self._drill(Node(Kind.LINE, (int(event.option.id),)))

    def on_details_back_at_root(self, event: Details.BackAtRoot) -> None:
        self.query_one(f"#{self._last_pane}").focus()

    def on_descendant_focus(self, event: object) -> None:
        """The details pane shows what the focused pane has selected."""
        pane = self.focused_pane()
        if pane is None or pane == "details":
            return
        self._last_pane = pane
        node = None
        if pane == "timeline":
            node = self.timeline.selection_node()
        elif pane == "source":
            stat = self.source.current_stat()
            node = Node(Kind.LINE, (stat.line_id,)) if stat else None
        elif pane == "hot":
            lid = self.hot.highlighted_line_id()
            node = Node(Kind.LINE, (lid,)) if lid is not None else None
        if node is not None and self.snapshot is not None and self.details.node != node:
            self.details.show(node)

    def _drill(self, node: Node) -> None:
        d = self.details
        if d.node != node:
            d.show(node)
        d.query_one(OptionList).focus(scroll_visible=False)  # the text opens at its top

    # ------------------------------------------------------------------ actions

    def action_back(self) -> None:
        if len(self.details.stack) > 1:
            self.details.action_back()
        elif self.found is not None:
            self.found = None
            self.notify("Search cleared: n / N step through the findings.", timeout=2)

    def action_next(self, step: int) -> None:
        """n / N: the next / previous result of the search, if one is on; else the next / previous finding."""
        if self.found is not None and self.found.hits:
            self.found = self.found.step(step)
            self._jump(self.found, step)
        else:
            self._finding(step)

    def _finding(self, step: int) -> None:
        snap = self.snapshot
        if snap is None or not snap.findings:
            self.notify("No findings in this analysis.", timeout=2)
            return
        self.finding_index = (self.finding_index + step) % len(snap.findings)
        f = snap.findings[self.finding_index]
        if f.lines:
            self.source.show_line(f.lines[0], notify=False)
        if f.kernels:
            self.timeline.go_to(Kind.KERNEL, f.kernels[0])
        self.details.show(Node(Kind.FINDING, (self.finding_index,)))
        self.details.query_one(OptionList).focus(scroll_visible=False)

    def action_goto(self) -> None:
        """g: from a kernel to its source line, and from a line back to the kernel (or its first kernel)."""
        if self.snapshot is None:
            return
        pane = self.focused_pane()
        node = self.details.node if pane == "details" else None
        if pane == "timeline" or (node is not None and node.kind in (Kind.KERNEL, Kind.GAP, Kind.STREAMED)):
            self._goto_line(node)
        else:
            self._goto_kernel(pane, node)

    def _goto_line(self, node: Node | None) -> None:
        """g on an item: show its source line."""
        snap = self.snapshot
        assert snap is not None
        sel = self.timeline.selection
        row = node.key[0] if node is not None else (sel.row if sel else None)
        kind = node.kind if node is not None else (sel.kind if sel else None)
        if node is None and kind == Kind.STREAMED and row is not None:
            row = snap.stream_rowid(row)  # a selection holds a stream row, a node its rowid
        line = queries.line_of(snap, kind, row)
        if line is None:
            self.notify("No source line is known for this item.", timeout=2)
            return
        if sel is not None:
            self._g_origin = (sel, self.timeline.window)
        self.source.show_line(line)
        self.source.focus()

    def _goto_kernel(self, pane: str | None, node: Node | None) -> None:
        """g on a line: back to the kernel we came from, else the line's heaviest kernel."""
        snap = self.snapshot
        assert snap is not None
        line_id = None
        if pane in ("source", None):
            stat = self.source.current_stat()
            line_id = stat.line_id if stat else None
        elif pane == "hot":
            line_id = self.hot.highlighted_line_id()
        elif node is not None and node.kind in (Kind.LINE, Kind.OP):
            line_id = node.key[0]
        origin = self._g_origin
        if origin is not None and origin[0].kind == Kind.KERNEL and line_id is not None:
            if queries.line_id_of(snap, Kind.KERNEL, origin[0].row) == line_id:
                self.timeline.go_to(Kind.KERNEL, origin[0].row)
                self.timeline.focus()
                return
        row = (
            queries.heaviest_kernel_of_line(snap, line_id, self.timeline.window)
            if line_id is not None
            else None
        )
        if row is None:
            self.notify("This line launched no kernels.", timeout=2)
            return
        self.timeline.go_to(Kind.KERNEL, row)
        self.timeline.focus()

    def action_modules(self) -> None:
        """M: the module tree of the analysis on screen."""
        snap = self.snapshot
        if snap is None or snap.analysis.modules is None:
            why = "the analysis is still running" if snap is None else "no kernel ran inside an nn.Module"
            self.notify(f"No module tree: {why}.", timeout=3)
        else:
            self.app.push_screen(
                ModuleScreen(snap.analysis, lambda ln: display_path(snap, ln)), self._show_source
            )

    def _show_source(self, line: SourceLine | None) -> None:
        """The line the module tree handed back (`s`): a library file opens with its lines' GPU time."""
        if line is not None:
            self.source.show_line(line)
            self.source.focus()

    def action_search(self) -> None:
        snap = self.snapshot
        if snap is None:
            self.notify("Nothing to search yet: the analysis is still running.", timeout=2)
            return

        def chosen(found: Found | None) -> None:
            if found is None:
                return
            self.found = found if found.hits else None
            if self.found is not None:
                self._jump(self.found, 1)

        self.app.push_screen(SearchScreen(snap, self.found.query if self.found else ""), chosen)

    def _jump(self, found: Found, direction: int) -> None:
        """Move to a search result: a line in the source view; a kernel or operator: its next call after the
        timeline's cursor (direction < 0: its last call before it), selected in the timeline."""
        hit, snap = found.hit, self.snapshot
        if hit is None or snap is None:
            return
        self.notify(f"/{found.query}: {found.index + 1} of {len(found.hits)} · n/N", timeout=2, markup=False)
        line = hit.key if isinstance(hit.key, SourceLine) else None  # a "source" hit
        if hit.kind == "line":
            stat = snap.lines_by_id.get(int(hit.key))  # type: ignore[arg-type]
            line = stat.line if stat is not None else None
        if line is not None:
            self.source.show_line(line)
            self.source.focus()
        elif hit.kind in ("kernel", "op"):
            self._jump_to_call(Kind.KERNEL if hit.kind == "kernel" else Kind.OP, str(hit.key), direction)

    def _jump_to_call(self, kind: Kind, name: str, direction: int) -> None:
        snap = self.snapshot
        assert snap is not None
        tl = self.timeline
        at = None
        if tl.window is not None and tl.lanes is not None:
            at = tl.lanes.start_ns + (tl.selection.start if tl.selection else tl.view.cursor_t)
        find = queries.next_kernel_named if kind == Kind.KERNEL else queries.next_op_named
        row = find(snap, name, tl.window, at, direction)
        if row is not None and tl.go_to(kind, row):
            tl.focus()

    def show_summary(self) -> None:
        self.details.show(SUMMARY)
