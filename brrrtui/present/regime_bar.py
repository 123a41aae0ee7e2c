"""The regime bar: how a span of wall time splits into compute, memory, communication and overhead.

    `window 3 ████████▓▓▓▓▓░░░ C 62% M 25% O 13%`
    `window 3 ██████▓▓▓▒▒▒░░░░ C 40% M 20% N 20% O 20%`   (a run with collectives: N, the exposed part and
                                                               the GPU idle inside CPU-side collectives)

Each regime has its own glyph as well as its own colour, so the bar still reads without colour (NO_COLOR).
"""

from __future__ import annotations

from analyzers.results import Breakdown, Regime

Span = tuple[str, str]

GLYPHS = {Regime.COMPUTE: "█", Regime.MEMORY: "▓", Regime.COMMUNICATION: "▒", Regime.OVERHEAD: "░"}
LETTERS = {Regime.COMPUTE: "C", Regime.MEMORY: "M", Regime.COMMUNICATION: "N", Regime.OVERHEAD: "O"}


def split_cells(fractions: list[float], cells: int) -> list[int]:
    """Largest-remainder rounding: integer cells per part that sum to `cells`."""
    total = sum(fractions)
    if cells <= 0 or total <= 0:
        return [0] * len(fractions)
    raw = [f / total * cells for f in fractions]
    out = [int(r) for r in raw]
    for k in sorted(range(len(raw)), key=lambda k: -(raw[k] - out[k]))[: cells - sum(out)]:
        out[k] += 1
    return out


def regime_bar(
    label: str,
    b: Breakdown | None,
    cells: int,
    corrected_overhead: float | None = None,
    placeholder: str = "waiting for the first window",
) -> list[Span]:
    """`label` then a bar of `cells` cells then the three percentages. None -> `placeholder`."""
    spans: list[Span] = [(label + " ", "label")]
    if b is None or b.span_ns <= 0:
        spans.append(("·" * cells, "muted"))
        spans.append((" " + placeholder, "muted"))
        return spans
    regimes = [Regime.COMPUTE, Regime.MEMORY, Regime.OVERHEAD]
    if getattr(b, "communication_ns", 0) or getattr(b, "communication_hidden_ns", 0):
        regimes.insert(2, Regime.COMMUNICATION)  # shown only for a run with collectives
    parts = split_cells([b.fraction(r) for r in regimes], cells)
    for r, n in zip(regimes, parts, strict=True):
        if n:
            spans.append((GLYPHS[r] * n, r.value))
    for r in regimes:
        spans.append((f" {LETTERS[r]} {100 * b.fraction(r):.0f}%", r.value))
    idle = getattr(b, "idle_ns", None)  # the part of overhead with no kernel running at all
    if idle is not None and b.overhead_ns:
        spans.append((f" (idle {100 * idle / b.span_ns:.0f}%)", "muted"))
    if corrected_overhead is not None:
        spans.append((f" (unprofiled O {100 * corrected_overhead:.0f}%)", "muted"))
    return spans
