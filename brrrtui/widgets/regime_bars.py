"""Header line 2: the three-regime bar for the latest window and for the whole run."""

from __future__ import annotations

from rich.text import Text
from textual.widget import Widget

from analyzers.results import Breakdown
from brrrtui.render.regime_bar import regime_bar
from brrrtui.widgets._roles import ROLE_CLASSES, RoleStyles


class RegimeBars(RoleStyles, Widget):
    COMPONENT_CLASSES = ROLE_CLASSES

    def __init__(self, *, id: str | None = None) -> None:
        super().__init__(id=id)
        self.window: tuple[str, Breakdown] | None = None
        self.run: Breakdown | None = None
        self.corrected: float | None = None

    def set_breakdowns(self, window: tuple[str, Breakdown] | None, run: Breakdown | None,
                       corrected_overhead: float | None) -> None:  # fmt: skip
        self.window, self.run, self.corrected = window, run, corrected_overhead
        self.refresh()

    def render(self) -> Text:
        w = self.size.width
        # "window N " + bar + " C 62% M 25% O 13%" (18) ... twice, side by side when there is room
        two = w >= 100
        cells = max(6, (w // (2 if two else 1)) - 34)
        label, wb = self.window if self.window else ("window", None)
        spans = regime_bar(f"{label:<9}", wb, cells)
        if two:
            spans += [("   ", "")] + regime_bar("run", self.run, cells, self.corrected)
        return self.spans_text(spans)
