"""The hottest source lines of the run (GPU time plus the idle time they caused), heaviest first; without GPU
activity, the lines by CPU-side time, as the report lists them."""

from __future__ import annotations

from textual.widgets import OptionList
from textual.widgets.option_list import Option

from analyzers.results import LineStat
from brrrtui.contract.units import fmt_ns
from brrrtui.present.details import display_path
from brrrtui.present.gutter import BADGES, line_host_ns, line_time_ns
from brrrtui.present.snapshot import Snapshot
from brrrtui.tui.widgets._roles import ROLE_CLASSES, RoleStyles
from brrrtui.tui.widgets.links import FitRow

MAX_LINES = 200


class HotLines(RoleStyles, OptionList):
    """Options are keyed by line id: OptionHighlighted moves the source view, OptionSelected (Enter) drills."""

    COMPONENT_CLASSES = ROLE_CLASSES

    def __init__(self, *, id: str | None = None) -> None:
        super().__init__(id=id)
        self.snapshot: Snapshot | None = None

    def set_snapshot(self, snap: Snapshot) -> None:
        keep = self.highlighted_line_id()
        self.snapshot = snap
        self.clear_options()
        rows = snap.hot_lines[:MAX_LINES]
        need = max((display_path(snap, s.line).least for s in rows), default=0)
        self.add_options([Option(self._prompt(snap, s, need), id=str(s.line_id)) for s in rows])
        self.border_title = f"hot lines ({len(snap.hot_lines)})"
        self.border_subtitle = (
            f"CPU-side time/{'step' if snap.per_step else 'window'} (no GPU activity)"
            if snap.cpu_only
            else "GPU/step +idle it caused"
            if snap.per_step
            else "GPU/window +idle it caused"
        )
        if keep is not None:
            self.select_line_id(keep)

    def _prompt(self, snap: Snapshot, s: LineStat, need: int) -> FitRow:
        """Time, idle, share, regime, fusion, `path:line`, function; a narrow pane drops idle and share
        before it cuts the path's folders (links.FitRow)."""
        where = [(display_path(snap, s.line), "path"), (f" {s.line.function}", "muted")]
        if snap.cpu_only:  # no regime, share or idle: the line's CPU-side time, as the report lists it
            return self._row(
                [(f"{fmt_ns(line_host_ns(s, snap.per_step)):>8} ", "gutter-time"), *where], need=need
            )
        share = s.gpu_ns / snap.total_gpu_ns if snap.total_gpu_ns else 0.0
        fused = " F" if s.line in snap.fused_lines else "  "
        steps = max(snap.analysis.steps_analysed, 1) if snap.per_step else 1
        idle = f"+{fmt_ns(s.idle_ns / steps)}" if s.idle_ns else ""
        time = (f"{fmt_ns(line_time_ns(s, snap.per_step)):>8} ", "gutter-time")
        badge = [(BADGES[s.regime], s.regime.value), (fused + " ", "fusion")]
        figures = [(f"{idle:>9} ", "gap-label" if idle else "muted"), (f"{100 * share:>3.0f}% ", "share")]
        least = [(BADGES[s.regime], s.regime.value), ("F " if fused.strip() else "  ", "fusion")]
        time7 = (f"{fmt_ns(line_time_ns(s, snap.per_step)):>7} ", "gutter-time")
        return self._row([time, *figures, *badge, *where], [time7, *least, *where], least + where, need=need)

    def _row(self, *variants: list[tuple[str, str]], need: int) -> FitRow:
        return FitRow(*([(t, self.role_style(r)) for t, r in v] for v in variants), need=need)

    def highlighted_line_id(self) -> int | None:
        if self.highlighted is None or self.option_count == 0:
            return None
        opt = self.get_option_at_index(self.highlighted)
        return int(opt.id) if opt.id is not None else None

    def select_line_id(self, line_id: int) -> None:
        try:
            self.highlighted = self.get_option_index(str(line_id))
        except Exception:  # noqa: BLE001 - OptionDoesNotExist: the line left the list
            return
