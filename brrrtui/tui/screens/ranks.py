"""`r`: the rank picker of a distributed run. Lists every rank's recording; Enter shows that rank (the app
loads and analyses it, brrrtui.tui.rank_switch), Esc keeps the one on screen."""

from __future__ import annotations

from textual.app import ComposeResult
from textual.containers import Vertical
from textual.screen import ModalScreen
from textual.widgets import OptionList, Static
from textual.widgets.option_list import Option

from brrrtui.tui.keymap import bindings


class RankPicker(ModalScreen[int | None]):
    BINDINGS = bindings("rank picker")

    def __init__(self, rows: list[tuple[int, str]], shown: int | None) -> None:
        super().__init__()
        self.rows = rows
        self.shown = shown

    def compose(self) -> ComposeResult:
        with Vertical(id="rank-picker"):
            yield Static("Show which rank? (the whole view switches to it)", classes="question")
            yield OptionList(*[Option(label, id=str(rank)) for rank, label in self.rows], id="ranks")

    def on_mount(self) -> None:
        ranks = self.query_one("#ranks", OptionList)
        at = [r for r, _ in self.rows].index(self.shown) if self.shown in [r for r, _ in self.rows] else 0
        ranks.highlighted = (at + 1) % len(self.rows)  # the next rank: Enter alone steps through them
        ranks.focus()

    def on_option_list_option_selected(self, event: OptionList.OptionSelected) -> None:
        self.dismiss(int(event.option.id or "0"))

    def action_cancel(self) -> None:
        self.dismiss(None)
