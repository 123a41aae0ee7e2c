"""Header line 1: the script, its state, steps and windows captured, elapsed time."""

from __future__ import annotations

from rich.text import Text
from textual.widget import Widget

from brrrtui.present.status import RunState, status_spans
from brrrtui.tui.widgets._roles import ROLE_CLASSES, RoleStyles


class StatusBar(RoleStyles, Widget):
    COMPONENT_CLASSES = ROLE_CLASSES

    def __init__(self, state: RunState, *, id: str | None = None) -> None:
        super().__init__(id=id)
        self.state = state

    def set_state(self, state: RunState) -> None:
        if state != self.state:
            self.state = state
            self.refresh()

    def render(self) -> Text:
        return self.spans_text(status_spans(self.state))
