"""The timeline's pages and their lanes.

A page is a capture window or the kernels streamed between two windows (`PageKey`), in time order::

    stream before window 0 | window 0 | stream after 0 | window 1 | stream after 1 | ...

A window page has one lane per GPU stream and one per CPU thread. GPU lanes hold kernels, copies and memsets
classed by regime, over the GPU-idle gaps classed by cause. CPU lanes hold each thread's top-level operators;
an operator that waited for the GPU (a synchronising runtime call somewhere inside it: `.item()`, `.cpu()`,
`cudaStreamSynchronize`) is classed apart. A stream page has GPU lanes only, no gaps: each streamed kernel is
classed by the regime inferred for it (analyzers.stream.lines), or as "streamed" when no window has seen it.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from analyzers.arrays import rows_per_window, unique_rows, window_rows
from analyzers.results import GAP_CAUSE_CODES, REGIME_CODES, Analysis, GapCause, Regime
from analyzers.stream.lines import Segment, StreamView
from brrrtui.contract.model import Table, Trace
from brrrtui.present.selection import Kind
from brrrtui.present.timeline import IntervalIndex

CPU_OP = 10
CPU_SYNC = 11
INFERRED = 20  # + regime code: a streamed kernel whose regime is inferred from a window
STREAMED = 30  # a streamed kernel no window has seen

ITEM_ROLES: dict[int, str] = (
    {REGIME_CODES[r]: r.value for r in Regime}
    | {CPU_OP: "cpu", CPU_SYNC: "cpu-sync", STREAMED: "streamed"}
    | {INFERRED + REGIME_CODES[r]: f"{r.value}-inferred" for r in Regime}
)
GAP_ROLES: dict[int, str] = {code: f"gap-{cause.value}" for cause, code in GAP_CAUSE_CODES.items()}
GAP_LETTERS: dict[GapCause, str] = {
    GapCause.HOST: "H",
    GapCause.SYNC: "S",
    GapCause.H2D: "C",
    GapCause.DATA: "D",
    GapCause.WAIT: "W",
    GapCause.OTHER: "?",
    GapCause.COMMUNICATION: "N",  # N as in the regime bar's communication
}
GAP_LABELS: dict[int, str] = {GAP_CAUSE_CODES[c]: letter for c, letter in GAP_LETTERS.items()}

_SYNC_WORDS = ("Synchronize", "cudaMemcpy2D", "cuMemcpyDtoH", "cuMemcpyHtoD")


@dataclass(frozen=True, order=True)
class PageKey:
    """A page of the timeline: capture window `window`, or (`stream`) the kernels streamed after it
    (window NONE: before the first window). Sorting keys puts the pages in time order."""

    window: int
    stream: bool = False


LANE_KINDS = {Kind.KERNEL: "gpu", Kind.OP: "cpu", Kind.STREAMED: "stream"}  # what a lane holds -> its kind


@dataclass(frozen=True)
class Lane:
    key: str  # "gpu:<device>:<stream>" | "cpu:<tid>"
    label: str
    holds: Kind  # its items: KERNEL (gpu rows), OP (op rows) or STREAMED (rows of the stream table)
    items: IntervalIndex
    gaps: IntervalIndex  # rows: rows of Analysis.gaps

    @property
    def kind(self) -> str:
        """ "gpu", "cpu" or "stream": the lane named by the kind of its items."""
        return LANE_KINDS[self.holds]


@dataclass(frozen=True)
class WindowLanes:
    window: int  # the capture window, or the one the streamed kernels came after (stream pages)
    start_ns: int
    end_ns: int
    lanes: tuple[Lane, ...]
    stream: bool = False  # a page of streamed kernels

    @property
    def extent_ns(self) -> float:
        return float(max(self.end_ns - self.start_ns, 1))

    @property
    def key(self) -> PageKey:
        return PageKey(self.window, self.stream)


def window_ids(trace: Trace) -> list[int]:
    ids = set(trace.windows.window.tolist()) | set(np.unique(trace.gpu.window).tolist())
    return sorted(int(w) for w in ids)


def window_bounds(
    trace: Trace, window: int, rows: tuple[np.ndarray, np.ndarray] | None = None
) -> tuple[int, int]:
    """The window's recorded span, widened to cover the GPU work it launched (the GPU runs behind). `rows`:
    the window's gpu and op rows, when the caller has them."""
    lo, hi = [], []
    w = trace.windows
    mine = np.nonzero(w.window == window)[0]
    if len(mine):
        lo.append(int(w.start_ns[mine].min()))
        hi.append(int(w.end_ns[mine].max()))
    if rows is None:
        rows = (_window_rows(trace.gpu.window, window), _window_rows(trace.ops.window, window))
    for table, m in zip((trace.gpu, trace.ops), rows, strict=True):
        if len(m):
            lo.append(int(table.start_ns[m].min()))
            hi.append(int((table.start_ns[m] + table.dur_ns[m]).max()))
    if not lo:
        return 0, 1
    return min(lo), max(hi)


def _window_rows(column: np.ndarray, window: int) -> np.ndarray:
    """The rows of one window, in table order (a stretch found by bisection in a table sorted by window)."""
    return as_rows(window_rows(column, np.array([window], dtype=np.int64)))


def _top_level(op_parent: np.ndarray) -> np.ndarray:
    top = np.arange(len(op_parent), dtype=np.int64)
    climbing = np.nonzero(op_parent >= 0)[0]  # the ops whose top is not reached yet
    for _ in range(256):
        if not len(climbing):
            break
        top[climbing] = op_parent[top[climbing]]
        climbing = climbing[op_parent[top[climbing]] >= 0]
    return top


def op_sync(analysis: Analysis) -> np.ndarray:
    """Boolean per op row: a top-level op that waited for the GPU (for every window's CPU lanes at once)."""
    return _sync_ops(analysis.trace, analysis.links.launch_op, _top_level(analysis.links.op_parent))


def _sync_ops(trace: Trace, launch_op: np.ndarray, op_top: np.ndarray) -> np.ndarray:
    """Boolean per op row: a top-level op with a synchronising runtime call inside it."""
    out = np.zeros(len(trace.ops), dtype=bool)
    if not len(trace.runtime) or not len(trace.ops):
        return out
    sync_ids = [
        i for i, s in enumerate(trace.strings) if s.startswith("cu") and any(w in s for w in _SYNC_WORDS)
    ]
    if "cudaMemcpy" in trace.strings:
        sync_ids.append(trace.sid("cudaMemcpy"))
    rows = np.nonzero(np.isin(trace.runtime.name, sync_ids) & (launch_op >= 0))[0]
    out[op_top[launch_op[rows]]] = True
    return out


WindowRows = tuple[np.ndarray, np.ndarray, np.ndarray]
"""A window's gpu, op and gap rows, in table order."""


def rows_of_windows(analysis: Analysis, windows: list[int]) -> dict[int, WindowRows]:
    """Every window's gpu, op and gap rows, from one search of each table (not a pass per window)."""
    tables = (analysis.trace.gpu.window, analysis.trace.ops.window, analysis.gaps.window)
    g, o, p = (rows_per_window(column, windows) for column in tables)
    return {w: (as_rows(g[k]), as_rows(o[k]), as_rows(p[k])) for k, w in enumerate(windows)}


def as_rows(rows: slice | np.ndarray) -> np.ndarray:
    return np.arange(rows.start, rows.stop) if isinstance(rows, slice) else rows


def build_lanes(
    analysis: Analysis, window: int, sync: np.ndarray | None = None, table_rows: WindowRows | None = None
) -> WindowLanes:
    """The window's lanes; `sync`: op_sync(analysis), and `table_rows`: rows_of_windows(...)[window], when the
    caller builds several windows."""
    trace, links, gaps = analysis.trace, analysis.links, analysis.gaps
    gpu, ops = trace.gpu, trace.ops
    gmask, omask, gap_rows = rows_of_windows(analysis, [window])[window] if table_rows is None else table_rows
    w0, w1 = window_bounds(trace, window, (gmask, omask))
    lanes: list[Lane] = []

    cols = (gpu.device[gmask].astype(np.int64), gpu.stream[gmask].astype(np.int64))
    first = unique_rows(cols)[0]  # the distinct (device, stream) pairs, sorted
    keys = list(zip(cols[0][first].tolist(), cols[1][first].tolist(), strict=True))
    for device, stream in keys:
        rows = gmask[(gpu.device[gmask] == device) & (gpu.stream[gmask] == stream)]
        items = IntervalIndex.build(
            gpu.start_ns[rows], gpu.start_ns[rows] + gpu.dur_ns[rows], analysis.kernel_regime[rows], rows, w0
        )
        g = (
            gap_rows[(gaps.stream[gap_rows] == stream) | (gaps.stream[gap_rows] < 0)]
            if len(gap_rows)
            else gap_rows
        )
        gap_index = (
            IntervalIndex.build(gaps.start_ns[g], gaps.start_ns[g] + gaps.dur_ns[g], gaps.cause[g], g, w0)
            if len(g)
            else IntervalIndex.empty(w0)
        )
        label = f"GPU{device} s{stream}" if len(keys) < 10 else f"{device}:{stream}"
        lanes.append(Lane(f"gpu:{device}:{stream}", label, Kind.KERNEL, items, gap_index))

    if len(omask):
        if sync is None:
            sync = op_sync(analysis)
        top_rows = omask[links.op_parent[omask] < 0]
        # the thread with most operators first (the training loop), autograd's thread after it
        tids = sorted(
            np.unique(ops.tid[top_rows]).tolist(), key=lambda t: -int((ops.tid[top_rows] == t).sum())
        )
        for tid in tids:
            rows = top_rows[ops.tid[top_rows] == tid]
            backward = bool(np.mean(ops.fwd_tid[rows] > 0) > 0.5) if len(rows) else False
            items = IntervalIndex.build(
                ops.start_ns[rows],
                ops.start_ns[rows] + ops.dur_ns[rows],
                np.where(sync[rows], CPU_SYNC, CPU_OP),
                rows,
                w0,
            )
            label = f"{'bwd' if backward else 'CPU'} {tid}"[:9]
            lanes.append(Lane(f"cpu:{tid}", label, Kind.OP, items, IntervalIndex.empty(w0)))
    return WindowLanes(window, w0, w1, tuple(lanes))


def stream_classes(view: StreamView, rows: np.ndarray) -> np.ndarray:
    """Timeline class per stream row: INFERRED + the inferred regime code, or STREAMED when unmatched."""
    regime = view.regime[rows].astype(np.int64)
    return np.where(regime >= 0, INFERRED + regime, STREAMED)


def build_stream_lanes(view: StreamView, segment: Segment) -> WindowLanes:
    """A stream page: one lane per GPU stream; items are rows of `view.stream`, and where the recorder folded
    the rows, 200 ms buckets of the folded time profile (row NONE: not an item one can select), each as long as
    its kernels' summed time and classed by the regime that holds most of that lane's folded time."""
    st, rows = view.stream, segment.rows
    w0 = segment.start_ns
    lanes: list[Lane] = []
    dev, sid = st.device[rows], st.stream[rows]
    keys = {(int(d), int(s)) for d, s in zip(dev.tolist(), sid.tolist(), strict=True)}
    busy = view.busy if view.busy is not None else None
    if busy is not None and len(segment.busy):
        keys |= set(zip(busy.device[segment.busy].tolist(), busy.stream[segment.busy].tolist(), strict=True))
    for device, stream in sorted(keys):
        r = rows[(dev == device) & (sid == stream)]
        start, end, cls = st.start_ns[r], st.start_ns[r] + st.dur_ns[r], stream_classes(view, r)
        ids = r
        if busy is not None and len(segment.busy):
            f = segment.busy[(busy.device[segment.busy] == device) & (busy.stream[segment.busy] == stream)]
            b0, busy_ns = _bucket_busy(busy, f)
            b0 = np.maximum(b0, w0)  # a bucket may begin before the page
            start = np.concatenate([b0, start])
            end = np.concatenate([b0 + busy_ns, end])
            cls = np.concatenate([np.full(len(b0), _folded_class(view, segment, device, stream)), cls])
            ids = np.concatenate([np.full(len(b0), -1), r])
        items = IntervalIndex.build(start, end, cls, ids, w0)
        label = f"GPU{device} s{stream}" if len(keys) < 10 else f"{device}:{stream}"
        lanes.append(Lane(f"gpu:{device}:{stream}", label, Kind.STREAMED, items, IntervalIndex.empty(w0)))
    return WindowLanes(segment.after_window, w0, max(segment.end_ns, w0 + 1), tuple(lanes), stream=True)


def _bucket_busy(busy: Table, f: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Each distinct bucket of busy rows `f` (one lane's): its start and its kernels' summed time, capped at the
    bucket's length. Two folds that each took part of a bucket wrote a row each: drawn apart from the same
    start, the shorter would hide under the longer."""
    start = busy.bucket[f] * busy.bucket_ns[f]
    starts, first, inverse = np.unique(start, return_index=True, return_inverse=True)
    summed = np.bincount(inverse, weights=busy.dur_ns[f], minlength=len(starts)).astype(np.int64)
    return starts, np.minimum(summed, busy.bucket_ns[f][first])


def _folded_class(view: StreamView, segment: Segment, device: int, stream: int) -> int:
    """INFERRED + the regime holding most of a lane's folded time (STREAMED when none was inferred)."""
    agg = view.agg
    if agg is None or not len(segment.agg):
        return STREAMED
    a = segment.agg[(agg.device[segment.agg] == device) & (agg.stream[segment.agg] == stream)]
    regime = view.agg_regime[a].astype(np.int64)
    known = regime >= 0
    if not known.any():
        return STREAMED
    ns = np.bincount(regime[known], weights=agg.dur_ns[a][known])
    return INFERRED + int(np.argmax(ns))


def locate(wl: WindowLanes, kind: Kind, row: int, start_ns: int) -> tuple[int, int] | None:
    """(lane index, position in the lane) of a row of the table `kind` names: a gpu row (KERNEL), op row (OP),
    gap row (GAP) or stream row (STREAMED)."""
    t = float(start_ns - wl.start_ns)
    for li, lane in enumerate(wl.lanes):
        if lane.holds != (Kind.KERNEL if kind == Kind.GAP else kind):
            continue
        idx = lane.gaps if kind == Kind.GAP else lane.items
        k = int(np.searchsorted(idx.start, t, "left"))
        while k < len(idx) and idx.start[k] == t:
            if idx.rows[k] == row:
                return li, k
            k += 1
    return None
