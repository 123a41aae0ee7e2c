"""How fast the CPU issues kernels: the measured cost of one more launch, the CPU's interval between launches,
and the kernels dominated by launch cost."""

from __future__ import annotations

import numpy as np

from analyzers import arrays
from analyzers.arrays import distinct, lexsort, median, window_stream_key
from analyzers.link.links import Links
from brrrtui.contract.model import GpuKind, Trace


def stream_order(trace: Trace, busy: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The busy GPU rows sorted by (window, stream, start), and each one's (window, stream) key: the order
    `same_stream_gaps` and `launch_bound` both walk (one sort for the two)."""
    gpu = trace.gpu
    rows = np.flatnonzero(busy)
    if len(busy) < 2**31:  # int32 rows: the launch timing's temporaries are mostly these
        rows = rows.astype(np.int32)
    key = window_stream_key(gpu.window[rows], gpu.stream[rows])
    order = lexsort((gpu.start_ns[rows], key))
    return rows[order], key[order]


def same_stream_gaps(
    trace: Trace, busy: np.ndarray, ordered: tuple[np.ndarray, np.ndarray] | None = None
) -> np.ndarray | None:
    """Idle ns between consecutive busy rows of each (window, stream), at least 0; None without a pair.
    `ordered`: stream_order(trace, busy) when the caller has it."""
    gpu = trace.gpu
    r, k = ordered if ordered is not None else stream_order(trace, busy)
    if len(r) < 2:
        return None
    same = k[1:] == k[:-1]
    if not same.any():
        return None
    start = gpu.start_ns[r]
    prev_end = start[:-1] + gpu.dur_ns[r[:-1]]
    gap = np.subtract(start[1:], prev_end, out=prev_end)[same]
    out: np.ndarray = np.maximum(gap, 0, out=gap)
    return out


def per_launch_ns(gaps: np.ndarray | None) -> float | None:
    """The measured cost of one more kernel: the median of `same_stream_gaps` (~1-2 us when the queue is full,
    the CPU's launch interval when it is not). None without two rows."""
    return None if gaps is None else median(gaps)


BACK_TO_BACK_QUANTILE = 0.1


def unprofiled_launch_ns(gaps: np.ndarray | None, idle_scale: float | None) -> float | None:
    """What one more launch costs in a step without the profiler, from the window's `same_stream_gaps`: their
    median scaled like the window's idle
    (`idle_scale`, lines.unprofiled_idle_scale), but never under the gap of back-to-back kernels on a full
    queue (the window's 10th-percentile gap), which the profiler does not lengthen. A window whose slowed CPU
    starved the GPU (median gap 28 us where its unprofiled steps run the GPU near full) would otherwise credit
    each fused launch with the profiler's own delay."""
    if gaps is None:
        return None
    typical = median(gaps)
    if idle_scale is None:
        return typical
    at = int(BACK_TO_BACK_QUANTILE * (len(gaps) - 1))
    floor = float(np.partition(gaps, [at, at])[at])  # sorted gaps' element there (two kth: arrays.median)
    return min(typical, max(floor, typical * idle_scale))


def launch_intervals_ns(trace: Trace, links: Links) -> dict[int, float]:
    """Per CPU thread, the median time between the starts of consecutive kernel launches: how fast the CPU
    issues work when nothing else holds it."""
    rt = trace.runtime
    launch = distinct(links.kernel_launch[links.kernel_launch >= 0])
    if len(launch) < 2:
        return {}
    lt, ls = rt.tid[launch], rt.start_ns[launch]
    o = lexsort((ls, lt))
    lt, ls = lt[o], ls[o]
    same = lt[1:] == lt[:-1]
    diffs, tids = np.diff(ls)[same], lt[1:][same]
    return {int(t): median(diffs[tids == t]) for t in distinct(tids).tolist()}


def median_launch_interval_ns(trace: Trace, links: Links) -> float | None:
    """Median, over every launch that follows another on its thread, of the time since that previous one."""
    rt = trace.runtime
    launch = distinct(links.kernel_launch[links.kernel_launch >= 0])
    if len(launch) < 2:
        return None
    lt, ls = rt.tid[launch], rt.start_ns[launch]
    o = lexsort((ls, lt))
    same = lt[o][1:] == lt[o][:-1]
    return median(np.diff(ls[o])[same]) if same.any() else None


def launch_bound(
    trace: Trace, links: Links, busy: np.ndarray, ordered: tuple[np.ndarray, np.ndarray] | None = None
) -> np.ndarray:
    """Kernels dominated by launch cost: the GPU was waiting for them (their launch started after the previous
    row on the stream ended) and they ran for less than the CPU's median interval between launches on that
    thread, so the GPU finished each before the CPU could issue the next::

        CPU   |launch a  py  |launch b  py  |launch c
        GPU         [a]            [b]            [c]     a, b, c: launch-bound

    `ordered`: stream_order(trace, busy) when the caller has it (the launched kernels keep its order)."""
    gpu, rt = trace.gpu, trace.runtime
    out = np.zeros(len(gpu), dtype=bool)
    if len(gpu) < 2 or not len(rt):
        return out
    intervals = launch_intervals_ns(trace, links)  # first: its temporaries are gone before the rows' come
    r, key = ordered if ordered is not None else stream_order(trace, busy)
    keep = (links.kernel_launch[r] >= 0) & (gpu.kind[r] == GpuKind.KERNEL)
    r, key = r[keep], key[keep]
    if len(r) < 2:
        return out
    tids = np.array(sorted(intervals), dtype=np.int64)
    vals = np.array([intervals[t] for t in tids.tolist()])
    # GROUP_ROWS rows at a time, each chunk with the row before it (whether a row waited depends on the one
    # before it on its stream): the temporaries are a chunk's, not eight columns of every kernel
    for lo in range(0, len(r), arrays.GROUP_ROWS):
        before, hi = max(lo - 1, 0), min(lo + arrays.GROUP_ROWS, len(r))
        bound = _launch_bound_rows(trace, links, r[before:hi], key[before:hi], tids, vals)
        out[r[lo:hi]] = bound[lo - before :]
    return out


def _launch_bound_rows(
    trace: Trace, links: Links, r: np.ndarray, key: np.ndarray, tids: np.ndarray, vals: np.ndarray
) -> np.ndarray:
    """launch_bound of consecutive rows `r` of the stream order (the first counts as its stream's first);
    `tids`, `vals`: the launching threads' median launch intervals, by thread."""
    gpu, rt = trace.gpu, trace.runtime
    launch = links.kernel_launch[r]
    lt = rt.tid[launch]
    ls = rt.start_ns[launch]
    interval = np.full(len(lt), np.inf)
    if len(tids):
        at = np.minimum(np.searchsorted(tids, lt), len(tids) - 1)
        hit = tids[at] == lt
        interval[hit] = vals[at[hit]]
    dur = gpu.dur_ns[r]
    short = dur < interval
    # waited: the first launched kernel of its stream, or launched after the previous one on the stream ended
    # (rows of one stream run one after another)
    ends = gpu.start_ns[r[:-1]] + dur[:-1]
    waited = np.ones(len(r), dtype=bool)
    waited[1:] = (key[1:] != key[:-1]) | (ls[1:] >= ends)
    bound: np.ndarray = waited & short
    return bound
