"""The source view's gutter: GPU time per step, a share bar, a regime badge and a fusion marker (without GPU
activity: the line's CPU-side time per step, and blanks).

` 12.3 ms ▉▉▉▍ M F  41 │ y = x.cos().cos()`
  time     share  |  |  line number
                  |  fusion candidate (a Finding of kind "fusion" names this line)
                  dominant regime: C compute, M memory, N communication, O overhead (idle counts as overhead)
"""

from __future__ import annotations

from analyzers.results import LineStat, Regime
from brrrtui.contract.units import fmt_ns

Span = tuple[str, str]  # (text, role)

BADGES = {Regime.COMPUTE: "C", Regime.MEMORY: "M", Regime.OVERHEAD: "O", Regime.COMMUNICATION: "N"}
EIGHTHS = " ▏▎▍▌▋▊▉█"


def share_bar(fraction: float, cells: int) -> str:
    """A left-aligned bar of `cells` cells at 1/8-cell resolution (at least one eighth for any share > 0)."""
    fraction = min(max(fraction, 0.0), 1.0)
    eighths = round(fraction * cells * 8)
    if fraction > 0 and eighths == 0:
        eighths = 1
    full, part = divmod(eighths, 8)
    bar = "█" * full + (EIGHTHS[part] if part and full < cells else "")
    return bar.ljust(cells)


def line_time_ns(stat: LineStat, per_step: bool) -> float:
    if per_step and stat.per_step_gpu_ns is not None:
        return stat.per_step_gpu_ns
    return float(stat.gpu_ns)


def line_host_ns(stat: LineStat, per_step: bool) -> float:
    """The line's CPU-side time (LineStat.host_ns), per step when steps are known."""
    if per_step and stat.per_step_host_ns is not None:
        return stat.per_step_host_ns
    return float(stat.host_ns)


def gutter_spans(
    stat: LineStat | None,
    total_gpu_ns: int,
    per_step: bool,
    fused: bool,
    compact: bool,
    lineno_digits: int,
    lineno: int,
) -> list[Span]:
    """The gutter of one source line. Lines without GPU work get blanks of the same width. A run without GPU
    activity (`total_gpu_ns` 0) shows each line's CPU-side time, with no share and no regime."""
    bar_cells = 0 if compact else 4
    spans: list[Span] = []
    if stat is not None and total_gpu_ns == 0 and stat.host_ns > 0:
        spans.append((fmt_ns(line_host_ns(stat, per_step)).rjust(8)[:8] + " ", "gutter-time"))
        spans.append((" " * (bar_cells + 1 if bar_cells else 0) + "   ", "gutter"))
    elif stat is None or (stat.gpu_ns == 0 and stat.idle_ns == 0):
        spans.append((" " * 9, "gutter"))
        if bar_cells:
            spans.append((" " * (bar_cells + 1), "gutter"))
        spans.append(("   ", "gutter"))
    else:
        spans.append((fmt_ns(line_time_ns(stat, per_step)).rjust(8)[:8] + " ", "gutter-time"))
        if bar_cells:
            share = stat.gpu_ns / total_gpu_ns if total_gpu_ns else 0.0
            spans.append((share_bar(share, bar_cells) + " ", "share"))
        spans.append((BADGES[stat.regime], stat.regime.value))
        spans.append((" F" if fused else "  ", "fusion" if fused else "gutter"))
    spans.append((f" {lineno:>{lineno_digits}} ", "lineno"))
    spans.append(("│", "gutter-rule"))
    return spans
