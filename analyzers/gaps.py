"""GPU idle gaps, why the GPU was idle, and which source line kept it waiting.

A gap is time inside a capture window when no GPU work runs: device-wide (no kernel, memset or device copy on
any stream: what the breakdown counts as idle) and per stream. Host<->device copies do not make the GPU busy:
they move data over PCIe, not HBM, and the time they take is the overhead the user can remove (pinned memory,
non_blocking). Each gap gets one cause (GapCause), checked in this order:

DATA: a DataLoader `__next__` covers at least half of the gap::

    CPU   ...| enumerate(DataLoader)#_SingleProcessDataLoaderIter.__next__ |  launch
    GPU   [k1]                                                                  [k2]
               <------------------------- gap: DATA --------------------------->

H2D: host-to-device copies (the GPU row, or the CPU's memcpy call) cover at least half of the gap::

    CPU      x.to("cuda") | cudaMemcpyAsync ........ |  launch
    GPU   [k1]   [Memcpy HtoD (Pageable -> Device)...]       [k2]
             <------------------ gap: H2D ------------------->

SYNC: a synchronising call (cudaStreamSynchronize, cudaDeviceSynchronize, cudaEventSynchronize, blocking
cudaMemcpy, aten::item / _local_scalar_dense / nonzero ...) returns inside the gap: the CPU sat waiting for
the GPU to drain, so nothing was queued behind the last kernel, and the GPU idles until the CPU refills it::

    CPU   loss.item() | cudaStreamSynchronize ..... | python ... | launch
    GPU   [k1 ..................]                                     [k2]
                                 <---------- gap: SYNC ------------->   attributed to the .item() line

HOST: the launch of the kernel that ends the gap started after the GPU went idle (HTA's "host wait": the CPU,
in Python, dispatch or launch calls, was not issuing work fast enough)::

    CPU   launch k1 | python, dispatch ........... | launch k2
    GPU       [k1]                                        [k2]
                  <-------------- gap: HOST ------------->      attributed to k2's line

One-time warm-up is OTHER and charged to no line: a gap in which CUDA loads a kernel module for a first call
(Kineto's `Lazy Function Loading` marker) is a set-up cost of the run's first steps, not the line's per-step
cost, and it would otherwise make every line of a warm-up window look overhead-bound::

    CPU   x * 1.5 (first call: 13 ms) ...................| Lazy Function Loading | launch
    GPU   [k1]                                                                         [k2]
              <---------------------- gap: OTHER, no line ------------------------->

OTHER: none of the above: the next kernel was already queued when the GPU went idle (cross-stream waits,
launch latency: HTA's "kernel wait"), or the CPU recorded nothing at all (profiler, GC, outside any op).

Leading and trailing gaps (window start to the first kernel, last kernel to window end) have no next launch:
HOST when CPU operators and runtime calls cover half of them, else OTHER (DATA and H2D apply as above; SYNC
only when synchronising calls cover half of such a gap).
"""

from __future__ import annotations

import re

import numpy as np

from analyzers.arrays import distinct
from analyzers.links import Links, innermost_enclosing
from analyzers.model import NONE, GpuKind, Table, Trace, flag_of
from analyzers.results import GAP_CAUSE_CODES, GapCause

SYNC_TOLERANCE_NS = 1_000  # CPU and GPU timestamps are aligned to ~1 us
COVER_SHARE = 0.5  # DATA / H2D need to cover this share of a gap

_SYNC_RUNTIME = re.compile(
    r"^(cuda(Stream|Device|Event|Thread)Synchronize|cudaMemcpy(2D|3D|FromSymbol|ToSymbol|Peer)?|"
    r"cu(Stream|Ctx|Event)Synchronize|cuMemcpy(DtoH|HtoD|2D|3D|Peer)?(_v2)?)$"
)
_SYNC_OPS = {
    "aten::item", "aten::_local_scalar_dense", "aten::nonzero", "aten::is_nonzero", "aten::equal",
    "aten::masked_select", "aten::_unique2", "aten::unique_consecutive", "aten::unique_dim", "aten::nonzero_static",
}  # fmt: skip
_MEMCPY_RUNTIME = re.compile(r"^(cudaMemcpy|cuMemcpy)")
_H2D_GPU = ("HtoD",)
_H2D_OPS = {"aten::pin_memory", "aten::_pin_memory"}
LAZY_LOADING = "Lazy Function Loading"  # Kineto's marker for CUDA loading a kernel module on first use

GAP_SCHEMA = {
    "window": np.int32, "stream": np.int32, "start_ns": np.int64, "dur_ns": np.int64, "cause": np.int8,
    "line": np.int64, "next_row": np.int64,
}  # fmt: skip
"""stream: NONE for device-wide gaps; line: line id or NONE; next_row: the gpu row whose start ends the gap."""

QUEUE_SCHEMA = {"window": np.int32, "stream": np.int32, "t_ns": np.int64, "depth": np.int32}


def busy_mask(trace: Trace, host_copy: np.ndarray) -> np.ndarray:
    """GPU rows that keep the GPU busy: kernels, memsets and device-side copies (not host<->device copies)."""
    return ~host_copy


def _window_bounds(trace: Trace) -> dict[int, tuple[int, int]]:
    w = trace.windows
    return {
        int(i): (int(s), int(e))
        for i, s, e in zip(w.window.tolist(), w.start_ns.tolist(), w.end_ns.tolist(), strict=True)
    }


def find_gaps(trace: Trace, busy: np.ndarray, per_stream: bool) -> Table:
    """Idle intervals of the busy rows inside each window: device-wide, or per (window, stream).

    Device-wide gaps include the leading (window start -> first row) and trailing (last row end -> window end)
    idle time, so gaps + busy time tile the window exactly. Per-stream gaps are only those between rows.
    """
    gpu = trace.gpu
    bounds = _window_bounds(trace)
    rows = np.nonzero(busy)[0]
    out: dict[str, list[np.ndarray]] = {k: [] for k in ("window", "stream", "start_ns", "dur_ns", "next_row")}
    if per_stream:
        group_key = gpu.window[rows].astype(np.int64) << 32 | (gpu.stream[rows].astype(np.int64) & 0xFFFFFFFF)
    else:
        group_key = gpu.window[rows].astype(np.int64)
    windows_seen = set(distinct(gpu.window[rows]).tolist())
    order = np.lexsort((gpu.start_ns[rows], group_key))
    rows, group_key = rows[order], group_key[order]
    cuts = np.nonzero(np.diff(group_key))[0] + 1
    for seg in np.split(np.arange(len(rows)), cuts) if len(rows) else []:
        r = rows[seg]
        win = int(gpu.window[r[0]])
        stream = int(gpu.stream[r[0]]) if per_stream else NONE
        lo, hi = bounds.get(win, (int(gpu.start_ns[r].min()), int((gpu.start_ns[r] + gpu.dur_ns[r]).max())))
        start = np.clip(gpu.start_ns[r], lo, hi)
        end = np.clip(gpu.start_ns[r] + gpu.dur_ns[r], lo, hi)
        run_end = np.maximum.accumulate(end)
        g0 = run_end[:-1]
        g1 = start[1:]
        nxt = r[1:]
        if not per_stream:  # leading and trailing idle of the window
            g0 = np.concatenate(([lo], g0, [run_end[-1]]))
            g1 = np.concatenate(([start[0]], g1, [hi]))
            nxt = np.concatenate(([r[0]], nxt, [NONE]))
        keep = g1 > g0
        out["window"].append(np.full(int(keep.sum()), win, np.int32))
        out["stream"].append(np.full(int(keep.sum()), stream, np.int32))
        out["start_ns"].append(g0[keep])
        out["dur_ns"].append((g1 - g0)[keep])
        out["next_row"].append(nxt[keep])
    if not per_stream:  # windows with no GPU work at all are one idle gap
        for win, (lo, hi) in bounds.items():
            if win not in windows_seen and hi > lo:
                for k, v in (("window", win), ("stream", NONE), ("start_ns", lo), ("dur_ns", hi - lo),
                             ("next_row", NONE)):  # fmt: skip
                    out[k].append(np.array([v]))
    cols = {k: (np.concatenate(v) if v else np.empty(0)).astype(GAP_SCHEMA[k]) for k, v in out.items()}
    n = len(cols["window"])
    cols["cause"] = np.full(n, GAP_CAUSE_CODES[GapCause.OTHER], np.int8)
    cols["line"] = np.full(n, NONE, np.int64)
    return Table({k: cols[k] for k in GAP_SCHEMA})


class _Intervals:
    """A union of intervals with O(log n) "how much of [a, b] is covered" queries."""

    def __init__(self, start: np.ndarray, end: np.ndarray):
        order = np.argsort(start, kind="stable")
        s, e = start[order].astype(np.int64), end[order].astype(np.int64)
        if len(s):
            run_end = np.maximum.accumulate(e)
            new = np.concatenate(([True], s[1:] > run_end[:-1]))
            idx = np.nonzero(new)[0]
            s = s[idx]
            e = np.maximum.reduceat(run_end, idx)
        self.s, self.e = s, e
        self.cum = np.concatenate(([0], np.cumsum(e - s)))

    def _covered_until(self, t: np.ndarray) -> np.ndarray:
        i = np.searchsorted(self.s, t, "right")  # intervals starting at or before t
        full = self.cum[np.maximum(i - 1, 0)]
        last_s = self.s[np.maximum(i - 1, 0)] if len(self.s) else np.zeros_like(t)
        last_e = self.e[np.maximum(i - 1, 0)] if len(self.s) else np.zeros_like(t)
        part = np.clip(np.minimum(t, last_e) - last_s, 0, None)
        return np.where(i > 0, full + part, 0)

    def covered(self, a: np.ndarray, b: np.ndarray) -> np.ndarray:
        if not len(self.s):
            return np.zeros(len(a), dtype=np.int64)
        return self._covered_until(b) - self._covered_until(a)


def _last_starting_before(start: np.ndarray, end: np.ndarray, g0: np.ndarray, g1: np.ndarray) -> np.ndarray:
    """Index (into the given arrays, sorted by start) of the last interval starting before g1 that overlaps
    [g0, g1], or NONE."""
    i = np.searchsorted(start, g1, "left") - 1
    ok = i >= 0
    ok[ok] = end[i[ok]] > g0[ok]
    return np.where(ok, i, NONE)


def main_thread(trace: Trace) -> int | None:
    """The CPU thread issuing the user's work: most spans, else most ops."""
    for tids in (trace.spans.tid, trace.ops.tid):
        if len(tids):
            values, counts = np.unique(tids, return_counts=True)
            return int(values[np.argmax(counts)])
    return None


class _Marks:
    """Sorted intervals of one kind of CPU/GPU activity, with the line each belongs to."""

    def __init__(self, start: np.ndarray, end: np.ndarray, line: np.ndarray):
        o = np.argsort(start, kind="stable")
        self.start, self.end, self.line = start[o], end[o], line[o].astype(np.int64)
        self.union = _Intervals(self.start, self.end)

    def __len__(self) -> int:
        return len(self.start)

    def covering(self, g0: np.ndarray, g1: np.ndarray, dur: np.ndarray) -> np.ndarray:
        return self.union.covered(g0, g1) >= COVER_SHARE * dur

    def line_at(self, g0: np.ndarray, g1: np.ndarray) -> np.ndarray:
        """Line of the last interval that starts before the gap ends and overlaps it."""
        j = _last_starting_before(self.start, self.end, g0, g1)
        return np.where(j >= 0, self.line[np.maximum(j, 0)], NONE)


class GapEvidence:
    """What the CPU and GPU were doing, gathered once per trace and used for every set of gaps."""

    def __init__(self, trace: Trace, links: Links, host_copy: np.ndarray):
        gpu, rt, ops = trace.gpu, trace.runtime, trace.ops
        self.trace, self.links = trace, links
        op_end = ops.start_ns + ops.dur_ns
        rt_end = rt.start_ns + rt.dur_ns

        d = flag_of(trace.string_flags(lambda s: "DataLoader" in s), ops.name)
        self.data = _Marks(ops.start_ns[d], op_end[d], links.op_line[d])

        # HtoD copy rows on the GPU, the CPU memcpy calls that issued them, pinned-memory ops
        h2d_gpu = host_copy & flag_of(trace.string_flags(lambda s: any(k in s for k in _H2D_GPU)), gpu.name)
        h2d_rt = np.zeros(len(rt), dtype=bool)
        gpu_line = np.full(int(h2d_gpu.sum()), NONE, dtype=np.int64)
        if len(rt):
            launched = links.kernel_launch[h2d_gpu]
            h2d_rt[launched[launched >= 0]] = True
            h2d_rt &= flag_of(trace.string_flags(lambda s: bool(_MEMCPY_RUNTIME.match(s))), rt.name)
            gpu_line = np.where(launched >= 0, links.launch_line[np.maximum(launched, 0)], NONE)
        h2d_op = flag_of(trace.string_flags(lambda s: s in _H2D_OPS), ops.name)
        self.h2d = _Marks(
            np.concatenate((gpu.start_ns[h2d_gpu], rt.start_ns[h2d_rt], ops.start_ns[h2d_op])),
            np.concatenate((gpu.start_ns[h2d_gpu] + gpu.dur_ns[h2d_gpu], rt_end[h2d_rt], op_end[h2d_op])),
            np.concatenate((gpu_line, links.launch_line[h2d_rt], links.op_line[h2d_op])),
        )

        sync_rt = flag_of(trace.string_flags(lambda s: bool(_SYNC_RUNTIME.match(s))), rt.name)
        sync_op = flag_of(trace.string_flags(lambda s: s in _SYNC_OPS), ops.name)
        s_start = np.concatenate((rt.start_ns[sync_rt], ops.start_ns[sync_op]))
        s_end = np.concatenate((rt_end[sync_rt], op_end[sync_op]))
        s_line = np.concatenate((links.launch_line[sync_rt], links.op_line[sync_op])).astype(np.int64)
        o = np.argsort(s_end, kind="stable")  # by return time
        self.sync_start, self.sync_end, self.sync_line = s_start[o], s_end[o], s_line[o]
        self.sync_union = _Intervals(s_start, s_end)

        # CPU work: operators (aten::, autograd::) and runtime calls, not record_function scopes that merely
        # enclose (an `Optimizer.step#` annotation spanning the profiler's stop is not the CPU issuing work)
        real = flag_of(trace.string_flags(lambda s: "::" in s), ops.name)
        self.cpu = _Intervals(
            np.concatenate((ops.start_ns[real], rt.start_ns)), np.concatenate((op_end[real], rt_end))
        )
        self.main_tid = main_thread(trace)
        lazy = flag_of(trace.string_flags(lambda s: s == LAZY_LOADING), ops.name)
        self.lazy_start = np.sort(ops.start_ns[lazy])


def classify_gaps(
    trace: Trace, links: Links, gaps: Table, host_copy: np.ndarray, evidence: GapEvidence | None = None
) -> Table:
    """Fill `cause` and `line` of `gaps` (see the module docstring for the rules)."""
    n = len(gaps)
    if not n:
        return gaps
    ev = evidence or GapEvidence(trace, links, host_copy)
    gpu, rt = trace.gpu, trace.runtime
    g0 = gaps.start_ns.astype(np.int64)
    g1 = g0 + gaps.dur_ns
    dur = gaps.dur_ns.astype(np.float64)
    cause = np.full(n, GAP_CAUSE_CODES[GapCause.OTHER], np.int8)
    line = np.full(n, NONE, np.int64)
    decided = np.zeros(n, dtype=bool)

    # the launch of the row that ends the gap (none for a window's trailing gap)
    nxt = gaps.next_row
    launch = (
        np.where(nxt >= 0, links.kernel_launch[np.maximum(nxt, 0)], NONE) if len(gpu) else np.full(n, NONE)
    )
    has_launch = launch >= 0

    warmup = np.zeros(n, dtype=bool)
    if len(ev.lazy_start):  # first-call module loading inside the gap: warm-up, no line
        warmup = np.searchsorted(ev.lazy_start, g1, "left") > np.searchsorted(ev.lazy_start, g0, "left")
        decided |= warmup

    for marks, c in ((ev.data, GapCause.DATA), (ev.h2d, GapCause.H2D)):
        if len(marks):
            hit = ~decided & marks.covering(g0, g1, dur)
            cause[hit] = GAP_CAUSE_CODES[c]
            line[hit] = marks.line_at(g0[hit], g1[hit])
            decided |= hit

    # SYNC: a synchronising call returns inside the gap
    if len(ev.sync_end):
        i = np.searchsorted(ev.sync_end, g0 - SYNC_TOLERANCE_NS, "left")
        ok = i < len(ev.sync_end)
        ic = np.minimum(i, len(ev.sync_end) - 1)
        returns = ok & (ev.sync_end[ic] <= g1) & (ev.sync_start[ic] < g1)
        # with no launch ending the gap, a sync only explains it if syncs fill most of it (a trailing gap
        # after a synchronize is usually the profiler stopping, not the CPU refilling the GPU)
        filled = ev.sync_union.covered(g0, g1) >= COVER_SHARE * dur
        hit = ~decided & returns & (has_launch | filled)
        # several syncs can return in one gap (.item() inside cudaStreamSynchronize): prefer a known line
        cause[hit] = GAP_CAUSE_CODES[GapCause.SYNC]
        line[hit] = _first_known_line(ev.sync_end, ev.sync_line, ic, g1, hit)[hit]
        decided |= hit

    # HOST / OTHER from the launch of the kernel that ends the gap
    launch_start = np.where(has_launch, rt.start_ns[np.maximum(launch, 0)] if len(rt) else 0, 0)
    late = has_launch & (launch_start >= g0 - SYNC_TOLERANCE_NS)
    busy_cpu = ~has_launch & (ev.cpu.covered(g0, g1) >= COVER_SHARE * dur)
    host = ~decided & (late | busy_cpu)
    cause[host] = GAP_CAUSE_CODES[GapCause.HOST]
    rest = ~decided
    if len(rt):
        line[rest] = np.where(has_launch[rest], links.launch_line[np.maximum(launch[rest], 0)], NONE)

    # fall back to the span the main thread was in when the gap ended; not for SYNC gaps, whose cause is the
    # synchronising call (one outside any traced line, like torch.cuda.synchronize(), stays unattributed
    # rather than landing on whatever line launched next)
    missing = np.nonzero((line < 0) & (cause != GAP_CAUSE_CODES[GapCause.SYNC]) & ~warmup)[0]
    if len(missing) and len(trace.spans) and ev.main_tid is not None:
        sp = trace.spans
        q = np.maximum(g1[missing] - 1, g0[missing])
        idx = innermost_enclosing(
            sp.start_ns, sp.start_ns + sp.dur_ns, sp.tid, q, np.full(len(q), ev.main_tid)
        )
        line[missing] = np.where(idx >= 0, sp.line[np.maximum(idx, 0)], NONE)

    # HOST and OTHER gaps: where brrrtui sampled the main thread, the line it was executing most inside the gap
    # is the line that kept the GPU waiting (a `time.sleep` or a Python loop between torch calls).
    hostish = (cause == GAP_CAUSE_CODES[GapCause.HOST]) | (cause == GAP_CAUSE_CODES[GapCause.OTHER])
    sampled = sampled_lines(trace.line_samples, g0, g1, hostish & ~warmup)
    line = np.where(sampled >= 0, sampled, line)

    cols = dict(gaps.columns)
    cols["cause"] = cause
    cols["line"] = line
    return Table(cols)


def sampled_lines(samples: Table, g0: np.ndarray, g1: np.ndarray, wanted: np.ndarray) -> np.ndarray:
    """For each wanted gap [g0, g1), the line most often sampled inside it (ties: the earliest), else NONE::

    main thread   ...tanh  tanh | time.sleep(0.002) ................ | (w * t).sum()
    samples                        87   87   87   87   87   87   87     88
    GPU           [k][k][k]                                              [k]
                               <--------- gap: HOST, line 87 -------->
    """
    out = np.full(len(g0), NONE, dtype=np.int64)
    if not len(samples) or not wanted.any():
        return out
    order = np.argsort(samples.t_ns, kind="stable")
    t, ln = samples.t_ns[order], samples.line[order].astype(np.int64)
    lo = np.searchsorted(t, g0, "left")
    hi = np.searchsorted(t, g1, "left")
    for i in np.nonzero(wanted & (hi > lo))[0].tolist():
        values, counts = np.unique(ln[lo[i] : hi[i]], return_counts=True)
        out[i] = values[np.argmax(counts)]
    return out


def _first_known_line(
    ends: np.ndarray, lines: np.ndarray, first: np.ndarray, g1: np.ndarray, hit: np.ndarray
) -> np.ndarray:
    """Line of the first sync returning in the gap; if unknown, of a later one returning in the same gap."""
    out = np.where(hit, lines[first], NONE)
    for step in range(1, 4):
        need = hit & (out < 0)
        if not need.any():
            break
        j = np.minimum(first + step, len(ends) - 1)
        ok = need & (first + step < len(ends)) & (ends[j] <= g1)
        out[ok] = lines[j[ok]]
    return out


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
    t = np.concatenate((rt.start_ns[links.kernel_launch[linked]], gpu.start_ns[linked]))
    delta = np.concatenate((np.ones(len(linked), np.int32), -np.ones(len(linked), np.int32)))
    stream = np.concatenate((gpu.stream[linked], gpu.stream[linked]))
    window = np.concatenate((gpu.window[linked], gpu.window[linked]))
    order = np.lexsort((-delta, t, stream, window))  # at equal times count the launch first
    t, delta, stream, window = t[order], delta[order], stream[order], window[order]
    key = window.astype(np.int64) << 32 | (stream.astype(np.int64) & 0xFFFFFFFF)
    csum = np.cumsum(delta)
    starts = np.concatenate(([0], np.nonzero(np.diff(key))[0] + 1))
    base = np.repeat(
        np.concatenate(([0], csum[starts[1:] - 1])), np.diff(np.concatenate((starts, [len(key)])))
    )
    depth = (csum - base).astype(np.int32)
    return Table(
        {"window": window.astype(np.int32), "stream": stream.astype(np.int32), "t_ns": t, "depth": depth}
    )


def per_launch_ns(trace: Trace, busy: np.ndarray) -> float | None:
    """The measured cost of one more kernel: the median idle time between consecutive busy rows of a stream
    (~1-2 us when the queue is full, the CPU's launch interval when it is not). None without two rows."""
    gpu = trace.gpu
    rows = np.nonzero(busy)[0]
    if len(rows) < 2:
        return None
    key = gpu.window[rows].astype(np.int64) << 32 | (gpu.stream[rows].astype(np.int64) & 0xFFFFFFFF)
    order = np.lexsort((gpu.start_ns[rows], key))
    r, k = rows[order], key[order]
    same = k[1:] == k[:-1]
    if not same.any():
        return None
    gap = gpu.start_ns[r[1:]] - (gpu.start_ns[r[:-1]] + gpu.dur_ns[r[:-1]])
    return float(np.median(np.maximum(gap[same], 0)))


def launch_intervals_ns(trace: Trace, links: Links) -> dict[int, float]:
    """Per CPU thread, the median time between the starts of consecutive kernel launches: how fast the CPU
    issues work when nothing else holds it."""
    rt = trace.runtime
    launch = distinct(links.kernel_launch[links.kernel_launch >= 0])
    if len(launch) < 2:
        return {}
    lt, ls = rt.tid[launch], rt.start_ns[launch]
    o = np.lexsort((ls, lt))
    lt, ls = lt[o], ls[o]
    same = lt[1:] == lt[:-1]
    diffs, tids = np.diff(ls)[same], lt[1:][same]
    return {int(t): float(np.median(diffs[tids == t])) for t in distinct(tids).tolist()}


def median_launch_interval_ns(trace: Trace, links: Links) -> float | None:
    """Median, over every launch that follows another on its thread, of the time since that previous one."""
    rt = trace.runtime
    launch = distinct(links.kernel_launch[links.kernel_launch >= 0])
    if len(launch) < 2:
        return None
    lt, ls = rt.tid[launch], rt.start_ns[launch]
    o = np.lexsort((ls, lt))
    same = lt[o][1:] == lt[o][:-1]
    return float(np.median(np.diff(ls[o])[same])) if same.any() else None


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
    so = np.lexsort((gpu.start_ns[rows], key))
    prev_end = np.full(len(rows), np.iinfo(np.int64).min)
    r = rows[so]
    same_s = key[so][1:] == key[so][:-1]
    ends = gpu.start_ns[r] + gpu.dur_ns[r]  # rows of one stream run one after another
    pe = np.where(same_s, ends[:-1], np.iinfo(np.int64).min)
    prev_end[so[1:]] = pe
    waited = ls >= prev_end
    out[rows] = waited & (gpu.dur_ns[rows] < interval)
    return out
