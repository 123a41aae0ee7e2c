"""Header line 2: the three-regime bar for the latest window and for the whole run (without GPU activity: a
line that says there are no regimes, and what the panes show instead)."""

from __future__ import annotations

from rich.text import Text
from textual.widget import Widget

from analyzers.results import Breakdown
from brrrtui.present.regime_bar import regime_bar
from brrrtui.tui.widgets._roles import ROLE_CLASSES, RoleStyles


class RegimeBars(RoleStyles, Widget):
    COMPONENT_CLASSES = ROLE_CLASSES

    def __init__(self, *, id: str | None = None) -> None:
        super().__init__(id=id)
        self.window: tuple[str, Breakdown | None] | None = None
        self.run: Breakdown | None = None
        self.corrected: float | None = None
        self.placeholder = "waiting for the first window"
        self.no_gpu: str | None = None  # set: the run had no GPU activity; shown instead of the bars

    def set_no_gpu(self, message: str) -> None:
        """A run without GPU activity: no regime bar, `message` in its place."""
        self.no_gpu = message
        self.window, self.run, self.corrected = None, None, None
        self.refresh()

    def set_breakdowns(
        self,
        window: tuple[str, Breakdown | None] | None,
        run: Breakdown | None,
        corrected_overhead: float | None,
        placeholder: str | None = None,
    ) -> None:
        """`placeholder`: what the window bar says when it has no breakdown."""
        self.window, self.run, self.corrected = window, run, corrected_overhead
        self.no_gpu = None
        self.placeholder = placeholder or "waiting for the first window"
        self.refresh()

    def render(self) -> Text:
        if self.no_gpu is not None:
            return self.spans_text([(self.no_gpu, "muted")])
        w = self.size.width
        # "window N <bar> C 62% M 25% O 13% (idle 40%)", and the run's beside it when there is room
        two = w >= 110
        label, wb = self.window if self.window else ("window", None)

        def bar(label: str, b: Breakdown | None, room: int, corrected: float | None = None) -> list:
            fixed = sum(len(t) for t, _ in regime_bar(label, b, 0, corrected, self.placeholder))
            return regime_bar(label, b, max(6, min(60, room - fixed)), corrected, self.placeholder)

        if not two:
            return self.spans_text(bar(f"{label:<9}", wb, w))
        half = (w - 3) // 2
        left = bar(f"{label:<9}", wb, half)
        pad = half - sum(len(t) for t, _ in left)
        return self.spans_text(left + [(" " * (pad + 3), "")] + bar("run", self.run, half, self.corrected))
