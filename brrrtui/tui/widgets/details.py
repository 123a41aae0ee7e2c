"""The details pane: a drill-down stack over brrrtui.present.details (Enter pushes, Esc pops)."""

from __future__ import annotations

from rich.text import Text
from textual.app import ComposeResult
from textual.containers import Vertical
from textual.content import Content
from textual.message import Message
from textual.widgets import OptionList, Static
from textual.widgets.option_list import Option

from brrrtui.present.details import Detail, describe
from brrrtui.present.selection import SUMMARY, Node
from brrrtui.present.snapshot import Snapshot
from brrrtui.tui.keymap import bindings
from brrrtui.tui.widgets._roles import ROLE_CLASSES, RoleStyles


class Details(RoleStyles, Vertical):
    COMPONENT_CLASSES = ROLE_CLASSES

    BINDINGS = bindings("details")

    class BackAtRoot(Message):
        """Esc at the top of the stack: give focus back to the pane we came from."""

    def __init__(self, *, id: str | None = None) -> None:
        super().__init__(id=id)
        self.snapshot: Snapshot | None = None
        self.stack: list[Node] = [SUMMARY]
        self.detail: Detail | None = None

    def compose(self) -> ComposeResult:
        yield Static(id="details-body")
        yield OptionList(id="details-children")

    @property
    def node(self) -> Node:
        return self.stack[-1]

    def set_snapshot(self, snap: Snapshot) -> None:
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
                text.append(chunk, self.role_style(role))
        body.update(text)
        children.clear_options()
        options = [
            Option(Text(label, no_wrap=True, overflow="ellipsis"), id=str(k))
            for k, (label, _) in enumerate(d.children)
        ]
        children.add_options(options)
        if d.children:
            children.highlighted = 0
        crumbs = " › ".join(n.kind for n in self.stack)
        self.border_title = Content(f"details · {crumbs}")
        self.border_subtitle = "enter: drill · esc: back" if d.children else "esc: back"

    def on_mount(self) -> None:
        self._show()
