"""The details pane: a drill-down stack over brrrtui.present.details (Enter pushes, Esc pops).

The pane is one scrolling document: the node's text (wrapped to the pane's width, never cut), then the list of
what it drills into. The arrow keys read it top to bottom: down scrolls the text until the list's highlighted
row is in view, then moves the highlight; up moves the highlight back to the first row, then scrolls the text
back up. PgUp/PgDn scroll a page, Home/End go to the top and the bottom; a scroll bar shows when the document
is taller than the pane, and the mouse wheel scrolls it too.
"""

from __future__ import annotations

from itertools import takewhile

from rich.style import Style
from rich.text import Text
from textual.app import ComposeResult
from textual.containers import VerticalScroll
from textual.content import Content
from textual.geometry import Region
from textual.message import Message
from textual.widgets import OptionList, Static
from textual.widgets.option_list import Option

from brrrtui.present.details import Detail, describe
from brrrtui.present.paths import Location, Phrase
from brrrtui.present.selection import ROW_KEYED, SUMMARY, Node
from brrrtui.present.snapshot import Snapshot
from brrrtui.tui.keymap import bindings
from brrrtui.tui.widgets._roles import ROLE_CLASSES, RoleStyles
from brrrtui.tui.widgets.links import FitRow, with_link


def _label(label: str) -> Text | FitRow:
    """A drill row: one that names a location keeps its file name and line at any width."""
    parts = label.parts if isinstance(label, Phrase) else (label,)
    if any(isinstance(p, Location) for p in parts):
        return FitRow([(p, Style()) for p in parts])
    return Text(label, no_wrap=True, overflow="ellipsis")


class DrillList(OptionList):
    """The drill list at the foot of the details document. It is as tall as its options (one row each: they
    never wrap), so the pane scrolls, not the list; its keys scroll the pane through the text above it."""

    @property
    def pane(self) -> VerticalScroll:
        assert isinstance(self.parent, VerticalScroll)
        return self.parent

    def _row(self, k: int) -> int:
        """The pane's document row of option k."""
        return self.virtual_region.y + k

    def _view(self) -> tuple[int, int]:
        pane = self.pane
        top = round(pane.scroll_y)
        return top, top + pane.scrollable_content_region.height

    def _scroll_by(self, rows: int) -> None:
        pane = self.pane
        pane.scroll_to(
            y=max(0, min(pane.max_scroll_y, round(pane.scroll_y) + rows)), animate=False, immediate=True
        )

    def _highlight(self, k: int) -> None:
        self.highlighted = k
        self.pane.scroll_to_region(Region(0, self._row(k), 1, 1), animate=False, force=True, immediate=True)

    def scroll_to_highlight(self, top: bool = False) -> None:
        """The pane scrolls to the highlight only when a key moves it (`_highlight`): a new node opens at the
        top of its text, and a resize keeps the reader's place."""

    def action_cursor_down(self) -> None:
        k, n = self.highlighted, self.option_count
        top, bottom = self._view()
        if k is None or self._row(k) >= bottom or k + 1 >= n:
            self._scroll_by(1)  # the text above the highlight, or what follows the last row
        else:
            self._highlight(k + 1)

    def action_cursor_up(self) -> None:
        k = self.highlighted
        top, _ = self._view()
        if k is None or k == 0 or self._row(k) < top:
            self._scroll_by(-1)
        else:
            self._highlight(k - 1)

    def action_page_down(self) -> None:
        self._scroll_by(max(1, self.pane.scrollable_content_region.height - 1))
        self._highlight_in_view()

    def action_page_up(self) -> None:
        self._scroll_by(-max(1, self.pane.scrollable_content_region.height - 1))
        self._highlight_in_view()

    def _highlight_in_view(self) -> None:
        """After a page scroll: keep the highlight on a visible row (the nearest) when any row is visible."""
        k, n = self.highlighted, self.option_count
        if k is None or not n:
            return
        top, bottom = self._view()
        first, last = top - self._row(0), bottom - 1 - self._row(0)
        if last < 0 or first >= n:
            return  # no row of the list is in view: the text is
        self.highlighted = min(max(k, max(first, 0)), min(last, n - 1))

    def action_first(self) -> None:
        if self.option_count:
            self.highlighted = 0
        self.pane.scroll_home(animate=False, immediate=True)

    def action_last(self) -> None:
        if self.option_count:
            self.highlighted = self.option_count - 1
        self.pane.scroll_end(animate=False, immediate=True)


class Details(RoleStyles, VerticalScroll, can_focus=False):
    COMPONENT_CLASSES = ROLE_CLASSES

    BINDINGS = bindings("details")

    class BackAtRoot(Message):
        """Esc at the top of the stack: give focus back to the pane we came from."""

    def __init__(self, *, id: str | None = None) -> None:
        super().__init__(id=id)
        self.snapshot: Snapshot | None = None
        self.stack: list[Node] = [SUMMARY]
        self.detail: Detail | None = None
        self._shown: Node | None = None  # the node on screen: a new one opens at the top of its text

    def compose(self) -> ComposeResult:
        yield Static(id="details-body")
        yield DrillList(id="details-children")

    @property
    def node(self) -> Node:
        return self.stack[-1]

    def set_snapshot(self, snap: Snapshot) -> None:
        if self.snapshot is not None and snap.analysis is not self.snapshot.analysis:
            # another analysis: the stack stops before its first node keyed by the old analysis's rows (the
            # timeline posts what its cursor holds in the new one)
            self.stack = list(takewhile(lambda node: node.kind not in ROW_KEYED, self.stack))
        self.snapshot = snap
        self._show()

    def show(self, node: Node) -> None:
        """Show a selection from another pane: the stack becomes summary -> node."""
        self.stack = [SUMMARY] if node == SUMMARY else [SUMMARY, node]
        self._show()

    def push(self, node: Node) -> None:
        self.stack.append(node)
        self._show()

    def action_back(self) -> None:
        if len(self.stack) > 1:
            self.stack.pop()
            self._show()
        else:
            self.post_message(self.BackAtRoot())

    def on_option_list_option_selected(self, event: OptionList.OptionSelected) -> None:
        event.stop()
        if self.detail is None or event.option.id is None:
            return
        k = int(event.option.id)
        if 0 <= k < len(self.detail.children):
            self.push(self.detail.children[k][1])

    def on_option_list_option_highlighted(self, event: OptionList.OptionHighlighted) -> None:
        event.stop()

    def _show(self) -> None:
        snap = self.snapshot
        if not self.is_mounted:
            return
        body = self.query_one("#details-body", Static)
        children = self.query_one("#details-children", OptionList)
        if snap is None:
            body.update("analysing…")
            children.clear_options()
            return
        d = describe(snap, self.node)
        self.detail = d
        text = Text()
        for k, line in enumerate(d.body):
            if k:
                text.append("\n")
            for chunk, role in line:
                text.append(chunk, with_link(chunk, self.role_style(role)))
        body.update(text)
        children.clear_options()
        options = [Option(_label(label), id=str(k)) for k, (label, _) in enumerate(d.children)]
        children.add_options(options)
        if d.children:
            children.highlighted = 0
        if self._shown != self.node:
            self._shown = self.node
            self.scroll_home(animate=False, immediate=True)
        crumbs = " › ".join(n.kind for n in self.stack)
        self.border_title = Content(f"details · {crumbs}")
        self.border_subtitle = "enter: drill · esc: back" if d.children else "esc: back"

    def on_mount(self) -> None:
        self._show()
