"""`/`: find a kernel or an operator (by name) or a source line (by path, function or code) and jump to it; the
results stay the screen's search, which `n` / `N` step through."""

from __future__ import annotations

from dataclasses import dataclass

from rich.text import Text
from textual.app import ComposeResult
from textual.containers import Vertical
from textual.screen import ModalScreen
from textual.widgets import Input, OptionList
from textual.widgets.option_list import Option

from brrrtui.present.search import Hit, search
from brrrtui.present.snapshot import Snapshot
from brrrtui.tui.keymap import bindings


@dataclass(frozen=True)
class Found:
    """A search the user ran: its query, its results and the one chosen (index -1: none, the search is
    cleared)."""

    query: str
    hits: tuple[Hit, ...]
    index: int

    @property
    def hit(self) -> Hit | None:
        return self.hits[self.index] if 0 <= self.index < len(self.hits) else None

    def step(self, direction: int) -> Found:
        return Found(self.query, self.hits, (self.index + direction) % len(self.hits))


class SearchScreen(ModalScreen[Found | None]):
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
                placeholder="kernel or operator name, file:line, function or code",
                id="search-input",
            )
            yield OptionList(id="search-results")

    def on_mount(self) -> None:
        self.query_one("#search").border_title = "search · enter jumps, n/N step the results · esc closes"
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
        """Enter: the highlighted result; on an empty query, clears the search (n / N step the findings)."""
        results = self.query_one("#search-results", OptionList)
        k = results.highlighted
        if self.hits and k is not None:
            self._choose(k)
        elif not event.value.strip():
            self.dismiss(Found("", (), -1))

    def on_option_list_option_selected(self, event: OptionList.OptionSelected) -> None:
        self._choose(int(event.option.id or 0))

    def _choose(self, k: int) -> None:
        self.dismiss(Found(self.query_one("#search-input", Input).value.strip(), tuple(self.hits), k))

    def action_focus_results(self) -> None:
        self.query_one("#search-results", OptionList).focus()

    def action_cancel(self) -> None:
        self.dismiss(None)
