"""Numbers only the UI shows: elapsed wall-clock time and the timeline axis's ticks. Quantities (times,
bytes, rates, FLOP, shares) are formatted by brrrtui.contract.units, the one formatter of quantities."""

from __future__ import annotations

import math

from brrrtui.contract.units import NA


def _known(x: float | None) -> bool:
    return x is not None and math.isfinite(x)


def fmt_elapsed(seconds: float | None) -> str:
    """4:05, 1:02:03."""
    if not _known(seconds):
        return NA
    assert seconds is not None
    s = int(seconds)
    h, rem = divmod(s, 3600)
    m, s = divmod(rem, 60)
    return f"{h}:{m:02d}:{s:02d}" if h else f"{m}:{s:02d}"


def nice_step(raw: float) -> float:
    """The smallest 1, 2 or 5 × 10^k that is >= raw (raw > 0)."""
    if raw <= 0:
        return 1.0
    k = math.floor(math.log10(raw))
    for m in (1, 2, 5, 10):
        step = m * 10.0**k
        if step >= raw * (1 - 1e-9):
            return step
    return 10.0 ** (k + 1)


def fmt_tick(t_ns: float, step_ns: float, ref_ns: float | None = None) -> str:
    """A tick label. The unit follows `ref_ns` (the axis's largest time, so one axis uses one unit; default
    the step), with just enough decimals to tell ticks `step_ns` apart: 20 ms, 26.80 ms, 250 µs."""
    ref = max(abs(ref_ns if ref_ns is not None else step_ns), step_ns)
    for scale, unit in ((1e9, "s"), (1e6, "ms"), (1e3, "µs"), (1.0, "ns")):
        if ref >= scale or unit == "ns":
            decimals = 0
            while decimals < 3 and abs(step_ns / scale - round(step_ns / scale, decimals)) > 1e-9:
                decimals += 1
            return f"{t_ns / scale:.{decimals}f} {unit}"
    raise AssertionError("unreachable")
