"""How fast the CPU issues kernels and how far ahead of the GPU it runs: queue depth per stream, the measured
cost of one more launch, the CPU's interval between launches, and the kernels dominated by launch cost."""

from __future__ import annotations

import numpy as np

from analyzers.arrays import distinct, lexsort, median
from analyzers.links import Links
from analyzers.model import GpuKind, Table, Trace

QUEUE_SCHEMA = {"window": np.int32, "stream": np.int32, "t_ns": np.int64, "depth": np.int32}


def queue_depth(trace: Trace, links: Links) -> Table:
    """Outstanding GPU work per stream over time (HTA's queue length): +1 when the CPU's launch call starts,
    -1 when the launched row starts on the GPU. Rows are the points where the depth changes::

        CPU   launch a | launch b | launch c |
        GPU                  [ a ........ ][ b ][ c ]
        depth   1        2    1   2        1    0
    """
    gpu, rt = trace.gpu, trace.runtime
    linked = np.nonzero(links.kernel_launch >= 0)[0]
    if not len(linked):
        return Table({k: np.empty(0, dtype=v) for k, v in QUEUE_SCHEMA.items()})
    n = len(linked)
    t = np.concatenate((rt.start_ns[links.kernel_launch[linked]], gpu.start_ns[linked]))
    delta = np.concatenate((np.ones(n, np.int64), np.full(n, -1, np.int64)))
    stream = np.concatenate((gpu.stream[linked], gpu.stream[linked]))
    window = np.concatenate((gpu.window[linked], gpu.window[linked]))
    if -(2**61) < int(t.min()) and int(t.max()) < 2**61:  # (t, launch first) as one key: one sort less
        order = lexsort((2 * t + (delta < 0), stream, window))
    else:
        order = lexsort((-delta, t, stream, window))  # at equal times count the launch first
    t, delta, stream, window = t[order], delta[order], stream[order], window[order]
    key = window.astype(np.int64) << 32 | (stream.astype(np.int64) & 0xFFFFFFFF)
    starts = np.nonzero(key[1:] != key[:-1])[0] + 1
    # each (window, stream) counts from 0: its first step also takes back what the ones before it left
    left = np.cumsum(delta)[starts - 1]
    delta[starts] -= np.diff(np.concatenate(([0], left)))
    depth = np.cumsum(delta).astype(np.int32)
    return Table(
        {"window": window.astype(np.int32), "stream": stream.astype(np.int32), "t_ns": t, "depth": depth}
    )


def same_stream_gaps(trace: Trace, busy: np.ndarray) -> np.ndarray | None:
    """Idle ns between consecutive busy rows of each (window, stream), at least 0; None without a pair."""
    gpu = trace.gpu
    rows = np.nonzero(busy)[0]
    if len(rows) < 2:
        return None
    key = gpu.window[rows].astype(np.int64) << 32 | (gpu.stream[rows].astype(np.int64) & 0xFFFFFFFF)
    order = lexsort((gpu.start_ns[rows], key))
    r, k = rows[order], key[order]
    same = k[1:] == k[:-1]
    if not same.any():
        return None
    gap = gpu.start_ns[r[1:]] - (gpu.start_ns[r[:-1]] + gpu.dur_ns[r[:-1]])
    out: np.ndarray = np.maximum(gap[same], 0)
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
    floor = float(np.sort(gaps)[int(BACK_TO_BACK_QUANTILE * (len(gaps) - 1))])
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


def launch_bound(trace: Trace, links: Links, busy: np.ndarray) -> np.ndarray:
    """Kernels dominated by launch cost: the GPU was waiting for them (their launch started after the previous
    row on the stream ended) and they ran for less than the CPU's median interval between launches on that
    thread, so the GPU finished each before the CPU could issue the next::

        CPU   |launch a  py  |launch b  py  |launch c
        GPU         [a]            [b]            [c]     a, b, c: launch-bound
    """
    gpu, rt = trace.gpu, trace.runtime
    out = np.zeros(len(gpu), dtype=bool)
    rows = np.nonzero(busy & (links.kernel_launch >= 0) & (gpu.kind == GpuKind.KERNEL))[0]
    if len(rows) < 2 or not len(rt):
        return out
    launch = links.kernel_launch[rows]
    lt = rt.tid[launch]
    ls = rt.start_ns[launch]
    intervals = launch_intervals_ns(trace, links)
    interval = np.full(len(lt), np.inf)
    if intervals:
        tids = np.array(sorted(intervals), dtype=np.int64)
        vals = np.array([intervals[t] for t in tids.tolist()])
        at = np.minimum(np.searchsorted(tids, lt), len(tids) - 1)
        hit = tids[at] == lt
        interval[hit] = vals[at[hit]]
    # previous row's end on the same stream
    key = gpu.window[rows].astype(np.int64) << 32 | (gpu.stream[rows].astype(np.int64) & 0xFFFFFFFF)
    so = lexsort((gpu.start_ns[rows], key))
    prev_end = np.full(len(rows), np.iinfo(np.int64).min)
    r = rows[so]
    same_s = key[so][1:] == key[so][:-1]
    ends = gpu.start_ns[r] + gpu.dur_ns[r]  # rows of one stream run one after another
    pe = np.where(same_s, ends[:-1], np.iinfo(np.int64).min)
    prev_end[so[1:]] = pe
    waited = ls >= prev_end
    out[rows] = waited & (gpu.dur_ns[rows] < interval)
    return out
