"""Numbers with units, formatted the same way everywhere in the UI."""

from __future__ import annotations

import math

NA = "—"  # shown for "unknown" (None / NaN), never 0


def _known(x: float | None) -> bool:
    return x is not None and not (isinstance(x, float) and math.isnan(x))


def fmt_ns(ns: float | None) -> str:
    """123 ns, 12.3 µs, 4.56 ms, 1.23 s (three significant digits)."""
    if not _known(ns):
        return NA
    assert ns is not None
    a = abs(ns)
    for scale, unit in ((1e9, "s"), (1e6, "ms"), (1e3, "µs")):
        if a >= scale:
            return f"{_sig3(ns / scale)} {unit}"
    return f"{ns:.0f} ns"


def _sig3(x: float) -> str:
    a = abs(x)
    if a >= 100:
        return f"{x:.0f}"
    if a >= 10:
        return f"{x:.1f}"
    return f"{x:.2f}"


def _scaled(x: float | None, unit: str, base: float, prefixes: str) -> str:
    if not _known(x):
        return NA
    assert x is not None
    i = 0
    while abs(x) >= base and i < len(prefixes) - 1:
        x /= base
        i += 1
    p = prefixes[i].strip()
    return f"{_sig3(x)} {p}{unit}"


def fmt_bytes(b: float | None) -> str:
    """Binary prefixes: 512 B, 1.50 KiB, 40.0 MiB, 141 GiB."""
    if not _known(b):
        return NA
    assert b is not None
    if abs(b) < 1024:
        return f"{b:.0f} B"
    units = ["KiB", "MiB", "GiB", "TiB", "PiB"]
    x, i = b / 1024, 0
    while abs(x) >= 1024 and i < len(units) - 1:
        x /= 1024
        i += 1
    return f"{_sig3(x)} {units[i]}"


def fmt_flops(f: float | None) -> str:
    return _scaled(f, "FLOP", 1000.0, " kMGTPE")


def fmt_flop_rate(f: float | None) -> str:
    return _scaled(f, "FLOP/s", 1000.0, " kMGTPE")


def fmt_byte_rate(b: float | None) -> str:
    return _scaled(b, "B/s", 1000.0, " kMGTPE")


def fmt_pct(fraction: float | None) -> str:
    if not _known(fraction):
        return NA
    assert fraction is not None
    return f"{100 * fraction:.0f}%"


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
