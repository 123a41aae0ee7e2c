"""`?`: every key, generated from the bindings of the app, the main screen and each pane."""

from __future__ import annotations

from collections.abc import Iterable

from rich.table import Table
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import VerticalScroll
from textual.screen import ModalScreen
from textual.widgets import Static

KEY_NAMES = {
    "left_square_bracket": "[", "right_square_bracket": "]", "comma": ",", "full_stop": ".",
    "less_than_sign": "<", "greater_than_sign": ">", "plus": "+", "equals_sign": "=", "minus": "-",
    "underscore": "_", "question_mark": "?", "slash": "/", "escape": "esc", "enter": "enter",
    "shift+left": "shift+←", "shift+right": "shift+→", "left": "←", "right": "→", "up": "↑", "down": "↓",
    "pageup": "pgup", "pagedown": "pgdn",
}  # fmt: skip

# Keys Textual itself provides to every app, listed so the help is complete.
BUILTIN = [
    ("tab / shift+tab", "Next / previous pane"),
    ("mouse", "Click a pane, a line or a timeline cell; wheel over the timeline zooms"),
    ("ctrl+c", "Copy the selected text (Textual); q quits"),
]


def key_label(keys: str) -> str:
    return " ".join(KEY_NAMES.get(k.strip(), k.strip()) for k in keys.split(","))


def help_rows(sections: Iterable[tuple[str, Iterable[Binding | tuple]]]) -> list[tuple[str, str, str]]:
    """(section, keys, what) for every binding, in declaration order."""
    rows: list[tuple[str, str, str]] = []
    for section, bindings in sections:
        for b in bindings:
            b = b if isinstance(b, Binding) else Binding(*b)
            rows.append((section, key_label(b.key), b.description or b.action))
    return rows


class HelpScreen(ModalScreen[None]):
    BINDINGS = [Binding("escape,question_mark,q", "dismiss_help", "Close help")]

    def __init__(self, sections: list[tuple[str, Iterable[Binding | tuple]]]) -> None:
        super().__init__()
        self.rows = help_rows(sections) + [("everywhere", k, w) for k, w in BUILTIN]

    def text(self) -> str:
        """Plain text of the help (tests)."""
        return "\n".join(f"{s}: {k} — {w}" for s, k, w in self.rows)

    def compose(self) -> ComposeResult:
        table = Table(box=None, expand=True, show_header=False, padding=(0, 1))
        table.add_column("where", style="bold", no_wrap=True)
        table.add_column("keys", no_wrap=True)
        table.add_column("what")
        last = None
        for section, keys, what in self.rows:
            table.add_row(section if section != last else "", keys, what)
            last = section
        with VerticalScroll(id="help"):
            yield Static(table)

    def on_mount(self) -> None:
        self.query_one("#help").border_title = "keys · esc closes"

    def action_dismiss_help(self) -> None:
        self.dismiss(None)
