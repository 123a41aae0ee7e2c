"""The one message every pane posts when Enter asks to open the item under its cursor in the details pane."""

from __future__ import annotations

from textual.message import Message

from brrrtui.present.selection import Node


class Drill(Message):
    """Handled as `on_drill`, whichever pane posted it."""

    def __init__(self, node: Node) -> None:
        super().__init__()
        self.node = node
