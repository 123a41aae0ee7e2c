"""What every finder reads (`Context`), and the lines most of a set of rows come from."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from analyzers.cost.roofline import Roofline
from analyzers.findings.facts import Per
from analyzers.link.links import Links
from analyzers.results import Breakdown, OverheadCorrection
from brrrtui.contract.model import Peaks, SourceLine, Table, Trace

MIN_SAVING_SHARE = 0.005  # drop findings saving less than this share of a step (or window)


@dataclass(frozen=True)
class Context:
    """What every finder needs; `per` divides run totals into per-step (or per-window) figures."""

    trace: Trace
    links: Links
    roof: Roofline
    peaks: Peaks
    gaps: Table
    breakdown: Breakdown
    overhead: OverheadCorrection
    steps: int
    per_launch_ns: float | None
    launch_bound: np.ndarray

    @property
    def per(self) -> int:
        return self.steps if self.steps > 0 else max(1, len(self.trace.windows))

    @property
    def step_ns(self) -> float:
        return self.breakdown.span_ns / self.per if self.per else float(self.breakdown.span_ns)

    @property
    def idle_scale(self) -> float:
        """Profiled idle -> idle in unprofiled steps. The profiler slows the CPU, so idle measured inside
        windows overstates what the user's run loses; when unprofiled step times are known, idle-based
        savings are scaled by (corrected overhead per step) / (raw overhead per step)."""
        unprofiled, raw = self.unprofiled_overhead_ns, self.breakdown.overhead_ns
        if unprofiled is None or not raw:
            return 1.0
        return min(1.0, unprofiled / (raw / self.per))

    @property
    def unprofiled_overhead_ns(self) -> float | None:
        """The GPU's overhead per step in unprofiled steps (the corrected fraction of the unprofiled step), when
        unprofiled step times are known: no idle the window shows can cost those steps more."""
        o = self.overhead
        if o.corrected_overhead_fraction is None or not o.unprofiled_step_ns:
            return None
        return o.corrected_overhead_fraction * o.unprofiled_step_ns

    @property
    def scale(self) -> Per:
        """How this run's totals become per-step figures, for a finding's facts."""
        return Per(self.per, self.steps > 0, self.step_ns, self.idle_scale)

    def source_lines(self, ids: list[int]) -> tuple[SourceLine, ...]:
        return tuple(self.trace.lines[i] for i in dict.fromkeys(ids) if 0 <= i < len(self.trace.lines))


def count_lines(lines: np.ndarray, k: int = 3) -> list[int]:
    ok = lines >= 0
    if not ok.any():
        return []
    counts = np.bincount(lines[ok])
    return [int(i) for i in np.argsort(-counts)[:k] if counts[i] > 0]
