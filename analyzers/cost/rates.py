"""A kernel's achieved FLOP/s and bytes/s and its share of the roof, worked out from its FLOPs, bytes and
duration where they are read, not kept per kernel: three float64 columns are 23 MB at 1 M kernels, held from
the roofline pass to the end of the analysis (and by the view), for the few passes and the one details pane
that read them."""

from __future__ import annotations

from typing import NamedTuple

import numpy as np


class Rates(NamedTuple):
    flops_per_s: np.ndarray  # achieved FLOP/s (NaN unknown)
    bytes_per_s: np.ndarray  # achieved bytes/s (NaN unknown)
    roof_fraction: np.ndarray  # max(FLOP/s / the unit's FLOP roof, bytes/s / peak bandwidth): achieved / roof


def achieved(
    flops: np.ndarray, nbytes: np.ndarray, dur_ns: np.ndarray, unit_peak: np.ndarray, peak_bytes_per_s: float
) -> Rates:
    """Rates of kernels that did `flops` and moved `nbytes` in `dur_ns` (NaN where a figure is unknown or
    the duration is 0), against FLOP roofs `unit_peak` and bandwidth `peak_bytes_per_s` (NaN: unknown)."""
    secs = _seconds(dur_ns)
    with np.errstate(divide="ignore", invalid="ignore"):
        flops_per_s = flops / secs
        bytes_per_s = nbytes / secs
        fraction = np.fmax(flops_per_s / unit_peak, bytes_per_s / peak_bytes_per_s)
    return Rates(flops_per_s, bytes_per_s, fraction)


def roof_fraction(
    flops: np.ndarray, nbytes: np.ndarray, dur_ns: np.ndarray, unit_peak: np.ndarray, peak_bytes_per_s: float
) -> np.ndarray:
    """achieved(...).roof_fraction, the same float operations in the same order, holding two arrays at once
    instead of five (it runs beside other passes: their temporaries add up)."""
    secs = _seconds(dur_ns)
    with np.errstate(divide="ignore", invalid="ignore"):
        by_flops = np.divide(flops, secs)
        by_flops /= unit_peak
        np.divide(nbytes, secs, out=secs)
        secs /= peak_bytes_per_s
        out: np.ndarray = np.fmax(by_flops, secs, out=by_flops)
    return out


def _seconds(dur_ns: np.ndarray) -> np.ndarray:
    """Durations in seconds as float64, NaN where not positive."""
    secs = dur_ns.astype(np.float64)
    positive = secs > 0
    secs *= 1e-9
    secs[~positive] = np.nan
    return secs
