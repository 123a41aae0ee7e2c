"""`/`: find a kernel (by name) or a source line (by path, function or code) and jump to it."""

from __future__ import annotations

from rich.text import Text
from textual.app import ComposeResult
from textual.containers import Vertical
from textual.screen import ModalScreen
from textual.widgets import Input, OptionList
from textual.widgets.option_list import Option

from brrrtui.present.search import Hit, search
from brrrtui.present.snapshot import Snapshot
from brrrtui.tui.keymap import bindings


class SearchScreen(ModalScreen[Hit | None]):
    BINDINGS = bindings("search")

    def __init__(self, snap: Snapshot, query: str = "") -> None:
        super().__init__()
        self.snap = snap
        self.query_text = query
        self.hits: list[Hit] = []

    def compose(self) -> ComposeResult:
        with Vertical(id="search"):
            yield Input(
                value=self.query_text,
                placeholder="kernel name, file:line, function or code",
                id="search-input",
            )
            yield OptionList(id="search-results")

    def on_mount(self) -> None:
        self.query_one("#search").border_title = "search · enter jumps · esc closes"
        self._update(self.query_text)

    def on_input_changed(self, event: Input.Changed) -> None:
        self._update(event.value)

    def _update(self, q: str) -> None:
        self.hits = search(self.snap, q)
        results = self.query_one("#search-results", OptionList)
        results.clear_options()
        results.add_options(
            [
                Option(Text(h.label, no_wrap=True, overflow="ellipsis"), id=str(i))
                for i, h in enumerate(self.hits)
            ]
        )
        if self.hits:
            results.highlighted = 0

    def on_input_submitted(self, event: Input.Submitted) -> None:
        results = self.query_one("#search-results", OptionList)
        k = results.highlighted
        self.dismiss(self.hits[k] if self.hits and k is not None else None)

    def on_option_list_option_selected(self, event: OptionList.OptionSelected) -> None:
        self.dismiss(self.hits[int(event.option.id or 0)])

    def action_focus_results(self) -> None:
        self.query_one("#search-results", OptionList).focus()

    def action_cancel(self) -> None:
        self.dismiss(None)
