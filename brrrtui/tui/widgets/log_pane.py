"""The script's stdout and stderr (and brrrtui's own notes), live."""

from __future__ import annotations

from rich.text import Text
from textual.widgets import RichLog

from brrrtui.tui.widgets._roles import ROLE_CLASSES, RoleStyles

MAX_LINES = 5000


class LogPane(RoleStyles, RichLog):
    COMPONENT_CLASSES = ROLE_CLASSES

    def __init__(self, *, id: str | None = None) -> None:
        super().__init__(
            id=id, max_lines=MAX_LINES, wrap=False, markup=False, highlight=False, auto_scroll=True
        )
        self.lines_written = 0
        self.border_title = "log"

    def add(self, stream: str, text: str) -> None:
        role = stream if stream in ("stdout", "stderr", "brrrtui") else "stdout"
        line = Text(text.replace("\t", "    "), style=self.role_style(role), no_wrap=True)
        if stream == "brrrtui":
            line = Text("brrrtui: ", style=self.role_style("muted")) + line
        self.write(line)
        self.lines_written += 1
        self.border_title = f"log ({self.lines_written} lines)"
