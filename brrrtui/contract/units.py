"""Human-readable numbers, the one formatter of quantities for findings, reports and the UI: `1.6 GB`,
`0.4 ms`, `3.9 TB/s`, `312 TFLOP/s` (a rate), `1.2 TFLOP` (a count).

Decimal prefixes (GB = 1e9 bytes), as bandwidth datasheets use; memory capacity alone (`fmt_mem`) is binary
(GiB), as GPU memory is sold and reported. Unknown (None/NaN/inf) prints as `NA`, never as 0.
"""

from __future__ import annotations

import math

NA = "?"  # an unknown number
_PREFIXES = ((1e15, "P"), (1e12, "T"), (1e9, "G"), (1e6, "M"), (1e3, "k"))


def _known(x: float | None) -> bool:
    return x is not None and math.isfinite(x)


def _sig(x: float) -> str:
    """Three significant figures at most, no trailing zeros: 4.26, 42.6, 426."""
    if x == 0:
        return "0"
    digits = max(0, 2 - int(math.floor(math.log10(abs(x)))))
    s = f"{x:.{digits}f}"
    return s.rstrip("0").rstrip(".") if "." in s else s


def si(x: float | None, unit: str) -> str:
    if not _known(x):
        return NA
    assert x is not None
    for scale, p in _PREFIXES:
        if abs(x) >= scale:
            return f"{_sig(x / scale)} {p}{unit}"
    return f"{_sig(x)} {unit}"


def fmt_bytes(n: float | None) -> str:
    return si(n, "B")


def fmt_bw(bytes_per_s: float | None) -> str:
    return si(bytes_per_s, "B/s")


def fmt_flops(flops_per_s: float | None) -> str:
    """A rate: `312 TFLOP/s`."""
    return si(flops_per_s, "FLOP/s")


def fmt_flop_count(flops: float | None) -> str:
    """A count of floating-point operations: `1.2 TFLOP`."""
    return si(flops, "FLOP")


def fmt_mem(nbytes: float | None) -> str:
    """Memory capacity or use, binary prefixes: `512 B`, `1.5 KiB`, `141 GiB`."""
    if not _known(nbytes):
        return NA
    assert nbytes is not None
    x = float(nbytes)
    for unit in ("B", "KiB", "MiB", "GiB", "TiB"):
        if abs(x) < 1024 or unit == "TiB":
            return f"{_sig(x)} {unit}" if unit != "B" else f"{x:.0f} B"
        x /= 1024
    raise AssertionError("unreachable")


def fmt_ns(ns: float | None) -> str:
    if not _known(ns):
        return NA
    assert ns is not None
    a = abs(ns)
    if a >= 1e9:
        return f"{_sig(ns / 1e9)} s"
    if a >= 1e6:
        return f"{_sig(ns / 1e6)} ms"
    if a >= 1e3:
        return f"{_sig(ns / 1e3)} µs"
    return f"{_sig(ns)} ns"


def fmt_pct(fraction: float | None) -> str:
    if not _known(fraction):
        return NA
    assert fraction is not None
    pct = fraction * 100
    if abs(pct) >= 10 or pct == 0:
        return f"{pct:.0f}%"
    return f"{pct:.1f}%" if abs(pct) >= 0.1 else f"{pct:.2g}%"


def fmt_lines(lines: list[int]) -> str:
    """[41, 42, 43, 44, 47] -> "41–44, 47"."""
    nums = sorted(set(lines))
    parts: list[str] = []
    i = 0
    while i < len(nums):
        j = i
        while j + 1 < len(nums) and nums[j + 1] == nums[j] + 1:
            j += 1
        parts.append(str(nums[i]) if i == j else f"{nums[i]}–{nums[j]}")
        i = j + 1
    return ", ".join(parts)
