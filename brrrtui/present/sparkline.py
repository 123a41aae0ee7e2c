"""Telemetry sparklines: a series resampled to a fixed number of cells (max per cell, so spikes show)."""

from __future__ import annotations

import math

import numpy as np

BARS = "▁▂▃▄▅▆▇█"


def resample_max(values: np.ndarray, cells: int) -> np.ndarray:
    """The newest samples fitted into `cells` buckets, each the max of its bucket (NaN where no sample).
    Fewer samples than cells: one per cell, right-aligned (the newest at the right edge)."""
    v = np.asarray(values, dtype=np.float64)
    out = np.full(max(cells, 0), np.nan)
    if cells <= 0 or len(v) == 0:
        return out
    if len(v) <= cells:
        out[cells - len(v) :] = v
        return out
    edges = np.linspace(0, len(v), cells + 1).astype(np.int64)
    for k in range(cells):
        chunk = v[edges[k] : edges[k + 1]]
        chunk = chunk[np.isfinite(chunk)]
        out[k] = chunk.max() if len(chunk) else np.nan
    return out


def spark(values: np.ndarray, cells: int, lo: float | None = None, hi: float | None = None) -> str:
    """Bars from ▁ to █ between lo and hi (default: the data's own min and max); blank where unknown."""
    r = resample_max(values, cells)
    finite = r[np.isfinite(r)]
    if not len(finite):
        return " " * cells
    lo = float(finite.min()) if lo is None else lo
    hi = float(finite.max()) if hi is None else hi
    out = []
    for x in r.tolist():
        if math.isnan(x):
            out.append(" ")
        elif hi <= lo:
            out.append(BARS[len(BARS) // 2])
        else:
            k = int((min(max(x, lo), hi) - lo) / (hi - lo) * (len(BARS) - 1) + 0.5)
            out.append(BARS[k])
    return "".join(out)
