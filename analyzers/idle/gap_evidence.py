"""What the CPU and GPU were doing around GPU idle gaps, gathered once per trace for gaps.classify_gaps.

Each kind of evidence is a set of sorted intervals with the line each belongs to: DataLoader `__next__` calls,
host-to-device copies (the GPU copy rows, the CPU memcpy calls that issued them, pinned-memory ops),
synchronising calls (by the time they return), the CPU's own work (operators and runtime calls), Kineto's
`Lazy Function Loading` markers (CUDA loading a kernel module on a first call) and the collectives that span
their whole operation on the CPU (gloo's `gloo:all_reduce`, ...).

A collective is communication, never a host sync or a host-to-device copy: gloo moves CUDA tensors through host
memory (a device-to-host copy, a stream synchronize on its worker thread, the host all-reduce while the ranks
wait for each other, the copy back), so the synchronising calls and copies inside a collective's span are the
collective's own and are left out of `sync_*` and `h2d`; `comm` holds the collectives themselves.
"""

from __future__ import annotations

import re
from collections.abc import Callable

import numpy as np

from analyzers import arrays
from analyzers.comm.collectives import is_comm_op
from analyzers.link.links import Links
from brrrtui.contract.model import NONE, Trace, flag_of

COVER_SHARE = 0.5  # DATA / H2D need to cover this share of a gap

SYNC_RUNTIME = re.compile(
    r"^(cuda(Stream|Device|Event|Thread)Synchronize|cudaMemcpy(2D|3D|FromSymbol|ToSymbol|Peer)?|"
    r"cu(Stream|Ctx|Event)Synchronize|cuMemcpy(DtoH|HtoD|2D|3D|Peer)?(_v2)?)$"
)
_SYNC_OPS = {
    "aten::item",
    "aten::_local_scalar_dense",
    "aten::nonzero",
    "aten::is_nonzero",
    "aten::equal",
    "aten::masked_select",
    "aten::_unique2",
    "aten::unique_consecutive",
    "aten::unique_dim",
    "aten::nonzero_static",
}
_MEMCPY_RUNTIME = re.compile(r"^(cudaMemcpy|cuMemcpy)")
_H2D_GPU = ("HtoD",)
_H2D_OPS = {"aten::pin_memory", "aten::_pin_memory"}
LAZY_LOADING = "Lazy Function Loading"  # Kineto's marker for CUDA loading a kernel module on first use


class Intervals:
    """A union of intervals with O(log n) "how much of [a, b] is covered" queries."""

    def __init__(self, start: np.ndarray, end: np.ndarray):
        s, e = start.astype(np.int64, copy=False), end.astype(np.int64, copy=False)
        if len(s) > 1 and not bool((s[1:] >= s[:-1]).all()):  # sorted only when not in order already
            order = np.argsort(s, kind="stable")
            s, e = s[order], e[order]
        if len(s):
            run_end = np.maximum.accumulate(e)
            new = np.concatenate(([True], s[1:] > run_end[:-1]))
            if new.all():  # disjoint already (unions of window groups): no copy of them
                e = run_end
            else:
                idx = np.nonzero(new)[0]
                s = s[idx]
                e = np.maximum.reduceat(run_end, idx)
        self.s, self.e = s, e
        self.cum = np.concatenate(([0], np.cumsum(e - s)))

    def covered_until(self, t: np.ndarray) -> np.ndarray:
        """How much of the union lies before each t."""
        i = np.searchsorted(self.s, t, "right")  # intervals starting at or before t
        last = np.maximum(i - 1, 0)
        full = self.cum[last]
        if len(self.s):
            full += np.maximum(np.minimum(t, self.e[last]) - self.s[last], 0)
        return np.where(i > 0, full, 0)

    def covered(self, a: np.ndarray, b: np.ndarray) -> np.ndarray:
        if not len(self.s):
            return np.zeros(len(a), dtype=np.int64)
        covered: np.ndarray = self.covered_until(b) - self.covered_until(a)
        return covered


def _last_starting_before(start: np.ndarray, end: np.ndarray, g0: np.ndarray, g1: np.ndarray) -> np.ndarray:
    """Index (into the given arrays, sorted by start) of the last interval starting before g1 that overlaps
    [g0, g1], or NONE."""
    i = np.searchsorted(start, g1, "left") - 1
    ok = i >= 0
    ok[ok] = end[i[ok]] > g0[ok]
    return np.where(ok, i, NONE)


def _touching(start: np.ndarray, dur: np.ndarray, g0: np.ndarray, g1: np.ndarray) -> np.ndarray:
    """Per interval [start, start + dur): it overlaps some [g0, g1) (by more than a point). The intervals are
    taken GROUP_ROWS at a time: each is looked up on its own, and the lookups' temporaries (their ends
    among them) stay that size."""
    o = np.argsort(g0, kind="stable")
    first, reach = g0[o], np.maximum.accumulate(g1[o])  # reach[j]: the latest end of the gaps up to j
    out, step = np.zeros(len(start), dtype=bool), arrays.GROUP_ROWS
    for lo in range(0, len(start), step):
        s = start[lo : lo + step]
        e = s + dur[lo : lo + step]
        j = np.searchsorted(first, e, "left") - 1  # the gaps starting before the interval ends: 0..j
        hit = out[lo : lo + step]
        np.greater_equal(j, 0, out=hit)
        hit[hit] = reach[j[hit]] > s[hit]
    return out


def main_thread(trace: Trace) -> int | None:
    """The CPU thread issuing the user's work: most spans, else most ops."""
    for tids in (trace.spans.tid, trace.ops.tid):
        if len(tids):
            values, counts = np.unique(tids, return_counts=True)
            return int(values[np.argmax(counts)])
    return None


class Marks:
    """Sorted intervals of one kind of CPU/GPU activity, with the line each belongs to."""

    def __init__(self, start: np.ndarray, end: np.ndarray, line: np.ndarray):
        o = np.argsort(start, kind="stable")
        self.start, self.end, self.line = start[o], end[o], line[o].astype(np.int64)
        self.union = Intervals(self.start, self.end)
        self.tid = np.empty(0, dtype=np.int64)  # the thread of each, where known (collective_marks)
        self.name = np.empty(0, dtype=np.int64)  # the op's name (string id), where known (collective_marks)

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

        def op_end(rows: np.ndarray) -> np.ndarray:  # the rows' ends only: every op's would be 24 MB at 3 M
            end: np.ndarray = ops.start_ns[rows] + ops.dur_ns[rows]
            return end

        def rt_end(rows: np.ndarray) -> np.ndarray:
            end: np.ndarray = rt.start_ns[rows] + rt.dur_ns[rows]
            return end

        d = flag_of(trace.string_flags(lambda s: "DataLoader" in s), ops.name)
        self.data = Marks(ops.start_ns[d], op_end(d), links.op_line[d])

        # HtoD copy rows on the GPU, the CPU memcpy calls that issued them, pinned-memory ops
        h2d_gpu = host_copy & flag_of(trace.string_flags(lambda s: any(k in s for k in _H2D_GPU)), gpu.name)
        h2d_rt = np.zeros(len(rt), dtype=bool)
        gpu_line = np.full(int(h2d_gpu.sum()), NONE, dtype=np.int64)
        issued = gpu.start_ns[h2d_gpu]  # when each copy was issued: its launch, else its own start
        if len(rt):
            launched = links.kernel_launch[h2d_gpu]
            h2d_rt[launched[launched >= 0]] = True
            h2d_rt &= flag_of(trace.string_flags(lambda s: bool(_MEMCPY_RUNTIME.match(s))), rt.name)
            gpu_line = np.where(launched >= 0, links.launch_line[np.maximum(launched, 0)], NONE)
            issued = np.where(launched >= 0, rt.start_ns[np.maximum(launched, 0)], issued)
        h2d_op = flag_of(trace.string_flags(lambda s: s in _H2D_OPS), ops.name)
        self.comm = collective_marks(trace, links)
        if len(self.comm):  # a collective's own copies (gloo's copy back to the GPU) are not the data's
            keep = ~_inside(self.comm, issued, issued)
            h2d_gpu[np.flatnonzero(h2d_gpu)[~keep]] = False
            gpu_line = gpu_line[keep]
            h2d_rt[h2d_rt] = ~_inside(self.comm, rt.start_ns[h2d_rt], rt_end(h2d_rt))
        self.h2d = Marks(
            np.concatenate((gpu.start_ns[h2d_gpu], rt.start_ns[h2d_rt], ops.start_ns[h2d_op])),
            np.concatenate((gpu.start_ns[h2d_gpu] + gpu.dur_ns[h2d_gpu], rt_end(h2d_rt), op_end(h2d_op))),
            np.concatenate((gpu_line, links.launch_line[h2d_rt], links.op_line[h2d_op])),
        )

        sync_rt = flag_of(trace.string_flags(lambda s: bool(SYNC_RUNTIME.match(s))), rt.name)
        sync_op = flag_of(trace.string_flags(lambda s: s in _SYNC_OPS), ops.name)
        if len(self.comm):  # the collective's own synchronising calls, on whatever thread it runs them
            sync_rt[sync_rt] = ~_inside(self.comm, rt.start_ns[sync_rt], rt_end(sync_rt))
            sync_op[sync_op] = ~_inside_own_thread(trace, self.comm, np.flatnonzero(sync_op), op_end)
        s_start = np.concatenate((rt.start_ns[sync_rt], ops.start_ns[sync_op]))
        s_end = np.concatenate((rt_end(sync_rt), op_end(sync_op)))
        s_line = np.concatenate((links.launch_line[sync_rt], links.op_line[sync_op])).astype(np.int64)
        o = np.argsort(s_end, kind="stable")  # by return time
        self.sync_start, self.sync_end, self.sync_line = s_start[o], s_end[o], s_line[o]
        self.sync_union = Intervals(s_start, s_end)

        # CPU work: operators (aten::, autograd::) and runtime calls, not record_function scopes that merely
        # enclose (an `Optimizer.step#` annotation spanning the profiler's stop is not the CPU issuing work)
        real = flag_of(trace.string_flags(lambda s: "::" in s), ops.name)
        self._cpu = ((ops.start_ns, ops.dur_ns, real), (rt.start_ns, rt.dur_ns, None))
        self.main_tid = main_thread(trace)
        lazy = flag_of(trace.string_flags(lambda s: s == LAZY_LOADING), ops.name)
        self.lazy_start = np.sort(ops.start_ns[lazy])

    def cpu_covered(self, g0: np.ndarray, g1: np.ndarray) -> np.ndarray:
        """How much of each [g0, g1) the CPU's operators and runtime calls cover (their union). Only the
        calls that overlap one of these gaps are merged: the others add nothing to any of them."""
        if not len(g0):
            return np.zeros(0, dtype=np.int64)
        starts, ends = [], []
        for start, dur, keep in self._cpu:
            hit = _touching(start, dur, g0, g1)
            if keep is not None:
                hit &= keep
            starts.append(start[hit])
            ends.append(starts[-1] + dur[hit])
        return Intervals(np.concatenate(starts), np.concatenate(ends)).covered(g0, g1)


def in_collectives(comm: Intervals, g0: np.ndarray, g1: np.ndarray) -> np.ndarray:
    """Per gap [g0, g1): the CPU-side collectives (`comm`: their union) cover at least COVER_SHARE of it, the
    rule that makes a gap COMMUNICATION (gaps.classify_gaps), which the breakdown counts as communication."""
    dur = (g1 - g0).astype(np.float64)
    inside: np.ndarray = comm.covered(g0, g1) >= COVER_SHARE * dur
    return inside


def collective_marks(trace: Trace, links: Links) -> Marks:
    """The CPU-side collectives that span their whole operation (communication.is_comm_op), with their lines;
    `tid` and `name` (string id) per mark, in the marks' order."""
    ops = trace.ops
    rows = np.flatnonzero(flag_of(trace.string_flags(is_comm_op), ops.name))
    line = links.op_line[rows] if len(links.op_line) else np.full(len(rows), NONE)
    marks = Marks(ops.start_ns[rows], ops.start_ns[rows] + ops.dur_ns[rows], line)
    order = rows[np.argsort(ops.start_ns[rows], kind="stable")]  # the order Marks sorted them into
    marks.tid, marks.name = ops.tid[order], ops.name[order]
    return marks


def _inside(marks: Marks, start: np.ndarray, end: np.ndarray) -> np.ndarray:
    """Per [start, end]: it lies wholly inside the marks' union (an instant inside it, for start == end)."""
    s, e = start.astype(np.int64), end.astype(np.int64)
    u = marks.union
    if not len(u.s):
        return np.zeros(len(s), dtype=bool)
    i = np.searchsorted(u.s, s, "right") - 1
    ok = i >= 0
    j = np.maximum(i, 0)
    inside: np.ndarray = ok & (u.e[j] >= e) & (u.s[j] <= s)
    return inside


def _inside_own_thread(
    trace: Trace, marks: Marks, rows: np.ndarray, op_end: Callable[[np.ndarray], np.ndarray]
) -> np.ndarray:
    """Per op row: it runs inside a collective on its own thread (a sync op of the collective's own, not the
    training loop's `.item()` while another thread's collective is in flight)."""
    out = np.zeros(len(rows), dtype=bool)
    tids = trace.ops.tid[rows]
    for tid in np.unique(marks.tid).tolist():
        on = tids == tid
        if on.any():
            mine = marks.tid == tid
            own = Marks(marks.start[mine], marks.end[mine], marks.line[mine])
            out[on] = _inside(own, trace.ops.start_ns[rows[on]], op_end(rows[on]))
    return out
