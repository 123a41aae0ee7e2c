"""`?`: every key, from the keymap that also builds the panes' bindings."""

from __future__ import annotations

from rich.table import Table
from textual.app import ComposeResult
from textual.containers import VerticalScroll
from textual.screen import ModalScreen
from textual.widgets import Static

from brrrtui.tui.keymap import Key, bindings, help_sections

KEY_NAMES = {
    "left_square_bracket": "[",
    "right_square_bracket": "]",
    "comma": ",",
    "full_stop": ".",
    "less_than_sign": "<",
    "greater_than_sign": ">",
    "plus": "+",
    "equals_sign": "=",
    "minus": "-",
    "underscore": "_",
    "question_mark": "?",
    "slash": "/",
    "escape": "esc",
    "enter": "enter",
    "shift+left": "shift+←",
    "shift+right": "shift+→",
    "left": "←",
    "right": "→",
    "up": "↑",
    "down": "↓",
    "pageup": "pgup",
    "pagedown": "pgdn",
}

# Keys Textual itself provides to every app, listed so the help is complete.
BUILTIN = [
    ("tab / shift+tab", "Next / previous pane"),
    ("mouse", "Click a pane, a line or a timeline cell; wheel over the timeline zooms"),
]


def key_label(keys: str) -> str:
    return " ".join(KEY_NAMES.get(k.strip(), k.strip()) for k in keys.split(","))


def help_rows(sections: list[tuple[str, list[Key]]]) -> list[tuple[str, str, str]]:
    """(section, keys, what) for every key, in declaration order."""
    return [
        (section, key_label(k.keys), k.description or k.action) for section, keys in sections for k in keys
    ]


class HelpScreen(ModalScreen[None]):
    BINDINGS = bindings("help")

    def __init__(self) -> None:
        super().__init__()
        self.rows = help_rows(help_sections()) + [("everywhere", k, w) for k, w in BUILTIN]

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
