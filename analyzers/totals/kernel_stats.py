"""Per kernel name: calls, GPU time, regime, FLOPs, bytes and achieved rates over the analysed windows."""

from __future__ import annotations

import numpy as np

from analyzers.arrays import unique_inverse
from analyzers.cost.roofline import Roofline
from analyzers.results import REGIME_CODES, KernelStat, Regime
from brrrtui.contract.model import Trace

_REGIMES = (Regime.COMPUTE, Regime.MEMORY, Regime.OVERHEAD, Regime.COMMUNICATION)


def _dominant_regime(inv: np.ndarray, m: int, dur: np.ndarray, regime: np.ndarray) -> np.ndarray:
    """Per name (0..m-1 in `inv`), the index into _REGIMES holding most of its time; a name whose calls all
    take 0 ns gets its calls' majority regime."""
    codes = np.array([REGIME_CODES[r] for r in _REGIMES])
    # one bincount over (regime slot, name) for all regimes: each bin sums the same rows in the same order
    # as one bincount per regime would (rows of another regime only added 0 there)
    slot = np.full(int(max(codes.max(), regime.max(initial=0))) + 1, len(codes))
    slot[codes] = np.arange(len(codes))
    key = slot[regime.astype(np.int64)] * m + inv if len(regime) and regime.min() >= 0 else None
    if key is None:  # a regime code outside REGIME_CODES' range (none is): one bincount per regime
        by_time = np.stack([np.bincount(inv, weights=dur * (regime == c), minlength=m) for c in codes])
        by_count = np.stack([np.bincount(inv, weights=(regime == c), minlength=m) for c in codes])
    else:
        size = (len(codes) + 1) * m
        by_time = np.bincount(key, weights=dur, minlength=size)[: len(codes) * m].reshape(len(codes), m)
        by_count = (
            np.bincount(key, minlength=size)[: len(codes) * m].reshape(len(codes), m).astype(np.float64)
        )
    dominant: np.ndarray = np.where(by_time.sum(axis=0) > 0, by_time.argmax(axis=0), by_count.argmax(axis=0))
    return dominant


def _yes_no_weights(
    inv: np.ndarray, m: int, dur: np.ndarray, flag: np.ndarray
) -> tuple[np.ndarray, np.ndarray]:
    """Per name, the time (+1 ns per call, so 0 ns calls still count) of its calls with flag 1 and with 0."""
    yes = np.bincount(inv, weights=(dur + 1.0) * (flag == 1), minlength=m)
    no = np.bincount(inv, weights=(dur + 1.0) * (flag == 0), minlength=m)
    return yes, no


def kernel_stats(trace: Trace, roof: Roofline, rows: np.ndarray | None = None) -> list[KernelStat]:
    """One KernelStat per kernel name, by GPU time descending.

    The name's regime is the one holding most of its time; achieved rates are total FLOPs (bytes) over the
    time of the calls whose FLOPs (bytes) are known; tensor cores / L2 by majority of time.
    """
    gpu = trace.gpu
    idx = np.arange(len(gpu)) if rows is None else rows
    if not len(idx):
        return []
    names = gpu.name[idx]
    uniq, inv = unique_inverse(names)
    m = len(uniq)
    dur = gpu.dur_ns[idx].astype(np.float64)
    calls = np.bincount(inv, minlength=m)
    gpu_ns = np.bincount(inv, weights=dur, minlength=m)
    dom = _dominant_regime(inv, m, dur, roof.regime[idx])

    def known_sum(values: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        ok = np.isfinite(values)
        total = np.bincount(inv, weights=np.where(ok, values, 0.0), minlength=m)
        t = np.bincount(inv, weights=np.where(ok, dur, 0.0), minlength=m)
        cnt = np.bincount(inv, weights=ok.astype(np.float64), minlength=m)
        return total, t, cnt

    f_tot, f_t, f_cnt = known_sum(roof.flops[idx])
    b_tot, b_t, b_cnt = known_sum(roof.bytes[idx])
    frac = roof.roof_fraction(slice(None) if rows is None else rows)  # no gathers for every row
    frac_known = np.isfinite(frac)
    frac_num = np.bincount(inv, weights=np.where(frac_known, frac * dur, 0.0), minlength=m)
    frac_t = np.bincount(inv, weights=np.where(frac_known, dur, 0.0), minlength=m)
    del frac, frac_known
    tc_yes, tc_no = _yes_no_weights(inv, m, dur, roof.tensor_cores[idx])
    l2_yes, l2_no = _yes_no_weights(inv, m, dur, roof.fits_in_l2[idx])
    stats: list[KernelStat] = []
    for j in np.argsort(-gpu_ns, kind="stable").tolist():
        stats.append(
            KernelStat(
                name=trace.name(int(uniq[j])),
                calls=int(calls[j]),
                gpu_ns=int(gpu_ns[j]),
                regime=_REGIMES[int(dom[j])],
                flops=float(f_tot[j]) if f_cnt[j] else None,
                bytes=float(b_tot[j]) if b_cnt[j] else None,
                achieved_flops_per_s=float(f_tot[j] / (f_t[j] * 1e-9)) if f_cnt[j] and f_t[j] > 0 else None,
                achieved_bytes_per_s=float(b_tot[j] / (b_t[j] * 1e-9)) if b_cnt[j] and b_t[j] > 0 else None,
                roof_fraction=float(frac_num[j] / frac_t[j]) if frac_t[j] > 0 else None,
                uses_tensor_cores=None if tc_yes[j] == tc_no[j] == 0 else bool(tc_yes[j] > tc_no[j]),
                fits_in_l2=None if l2_yes[j] == l2_no[j] == 0 else bool(l2_yes[j] > l2_no[j]),
            )
        )
    return stats
