"""`brrrtui diff --view`: the comparison of two runs in the terminal UI, three tables (per step, per line, per
kernel) with what got faster beyond the noise in the theme's success colour and what got slower in its error
colour. Every string comes from brrrtui.present.diff_report."""

from __future__ import annotations

from typing import ClassVar

from rich.text import Text
from textual.app import App, ComposeResult
from textual.binding import BindingType
from textual.containers import Vertical
from textual.widgets import DataTable, Footer, Static

from brrrtui.present.diff_report import DiffRow

COLUMNS = {
    "run": ("per step", "before", "after", "change", "", ""),
    "lines": ("change", "", "before", "after", "line", "function", "regime"),
    "kernels": ("change", "", "before", "after", "calls", "kernel"),
}
TITLES = {"run": "step time and GPU time by regime", "lines": "lines", "kernels": "kernels"}


class DiffApp(App[None]):
    TITLE = "brrrtui diff"
    CSS = """
    #header { padding: 0 1; height: auto; }
    DataTable { height: auto; max-height: 1fr; border: round $primary-muted; }
    #run { max-height: 9; }
    """
    BINDINGS: ClassVar[list[BindingType]] = [("q", "quit", "Quit"), ("tab", "focus_next", "Next table")]

    def __init__(self, header: str, tables: dict[str, list[DiffRow]], unit: str = "step"):
        super().__init__()
        self.header, self.tables, self.unit = header, tables, unit

    def compose(self) -> ComposeResult:
        yield Static(Text(self.header), id="header")
        with Vertical():
            for name in ("run", "lines", "kernels"):
                table: DataTable[Text] = DataTable(id=name, cursor_type="row", zebra_stripes=False)
                table.border_title = f"{TITLES[name]} (per {self.unit})"
                yield table
        yield Footer()

    def on_mount(self) -> None:
        theme = self.current_theme
        styles = {"better": theme.success or "green", "worse": theme.error or "red", "same": ""}
        for name, rows in self.tables.items():
            table = self.query_one(f"#{name}", DataTable)
            table.add_columns(*COLUMNS[name])
            for row in rows:
                table.add_row(*(Text(cell, style=styles[row.role]) for cell in row.cells))
            table.border_subtitle = f"{len(rows)} changed" if name != "run" else ""
        self.query_one("#lines", DataTable).focus()
