"""Asks before quitting while the script is still running (quitting stops it)."""

from __future__ import annotations

from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Vertical
from textual.screen import ModalScreen
from textual.widgets import Static


class ConfirmQuit(ModalScreen[bool]):
    BINDINGS = [
        Binding("y,enter", "answer(True)", "Quit and stop the script"),
        Binding("n,escape,q", "answer(False)", "Keep running"),
    ]

    def compose(self) -> ComposeResult:
        with Vertical(id="confirm-quit"):
            yield Static("The script is still running.", classes="question")
            yield Static("Quit brrrtui and stop it?  [b]y[/b] yes · [b]n[/b] no (the recording is kept)")

    def action_answer(self, yes: bool) -> None:
        self.dismiss(yes)
