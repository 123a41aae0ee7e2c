"""Asks before quitting while the script is still running (quitting stops it)."""

from __future__ import annotations

from textual.app import ComposeResult
from textual.containers import Vertical
from textual.screen import ModalScreen
from textual.widgets import Static

from brrrtui.tui.keymap import bindings


class ConfirmQuit(ModalScreen[bool]):
    BINDINGS = bindings("quit dialog")

    def compose(self) -> ComposeResult:
        with Vertical(id="confirm-quit"):
            yield Static("The script is still running.", classes="question")
            yield Static("Quit brrrtui and stop it?  [b]y[/b] yes · [b]n[/b] no (the recording is kept)")

    def action_answer(self, yes: bool) -> None:
        self.dismiss(yes)
