"""Header line 3: GPU utilisation, memory, power and SM clock as sparklines."""

from __future__ import annotations

import numpy as np
from rich.text import Text
from textual.widget import Widget

from brrrtui.present.status import Metric, telemetry_metrics, telemetry_spans
from brrrtui.tui.widgets._roles import ROLE_CLASSES, RoleStyles

KEEP = 600  # samples


class Telemetry(RoleStyles, Widget):
    COMPONENT_CLASSES = ROLE_CLASSES

    def __init__(self, *, id: str | None = None) -> None:
        super().__init__(id=id)
        self.cols: dict[str, list[float]] = {k: [] for k in ("t_ns", "util", "mem", "power", "sm")}
        self.mem_total: float | None = None

    def set_series(self, t_ns, util, mem, power, sm, mem_total: float | None = None) -> None:  # noqa: ANN001
        for k, v in zip(("t_ns", "util", "mem", "power", "sm"), (t_ns, util, mem, power, sm), strict=True):
            self.cols[k] = [float(x) for x in np.asarray(v)[-KEEP:]]
        self.mem_total = mem_total
        self.refresh()

    def add(
        self, t_ns: int, util: float | None, mem: float | None, power: float | None, sm: float | None
    ) -> None:
        nan = float("nan")
        for k, v in zip(("t_ns", "util", "mem", "power", "sm"), (t_ns, util, mem, power, sm), strict=True):
            col = self.cols[k]
            col.append(nan if v is None else float(v))
            del col[:-KEEP]
        self.refresh()

    def metrics(self) -> list[Metric]:
        c = {k: np.asarray(v, dtype=np.float64) for k, v in self.cols.items()}
        return telemetry_metrics(c["t_ns"], c["util"], c["mem"], c["power"], c["sm"], self.mem_total)

    def render(self) -> Text:
        return self.spans_text(telemetry_spans(self.metrics(), self.size.width))
