"""Navigation queries: from what the user points at to what a key jumps to. Pure functions of a snapshot
(numpy over its columns), so the screens only ask and move the cursor."""

from __future__ import annotations

import numpy as np

from brrrtui.contract.model import SourceLine, Table
from brrrtui.present.lanes import Lane, PageKey
from brrrtui.present.selection import Kind, Node, Selection
from brrrtui.present.snapshot import Snapshot
from brrrtui.present.timeline import IntervalIndex, View, neighbour, pick


def selection_node(snap: Snapshot | None, s: Selection | None) -> Node | None:
    """The details node of a timeline selection: the kernel, gap or streamed kernel itself; a CPU op's line."""
    if s is None or snap is None:
        return None
    if s.kind in (Kind.KERNEL, Kind.GAP):
        return Node(s.kind, (s.row,))
    if s.kind == Kind.STREAMED:  # keyed by rowid: rows move as the stream's tail moves
        return Node(Kind.STREAMED, (snap.stream_rowid(s.row),))
    lid = int(snap.analysis.links.op_line[s.row])
    return Node(Kind.LINE, (lid,)) if lid in snap.lines_by_id else None


def line_id_of(snap: Snapshot, kind: str | None, row: int | None) -> int | None:
    """The source line of a kernel, op or gap row, or of a streamed kernel's rowid (inferred)."""
    if row is None:
        return None
    links = snap.analysis.links
    if kind == Kind.KERNEL:
        lid = int(links.kernel_line[row])
    elif kind == Kind.OP:
        lid = int(links.op_line[row])
    elif kind == Kind.GAP:
        lid = int(snap.analysis.gaps.line[row])
    elif kind == Kind.STREAMED:
        r = snap.stream_row(row)
        lid = int(snap.stream.line[r]) if r is not None and snap.stream is not None else -1
    else:
        return None
    return lid if lid >= 0 else None


def line_of(snap: Snapshot, kind: str | None, row: int | None) -> SourceLine | None:
    lid = line_id_of(snap, kind, row)
    if lid is None:
        return None
    stat = snap.lines_by_id.get(lid)
    if stat is not None:
        return stat.line
    return snap.trace.lines[lid] if 0 <= lid < len(snap.trace.lines) else None


def heaviest_kernel_of_line(snap: Snapshot, line_id: int, window: int | None) -> int | None:
    """The longest kernel the line launched, in `window` if it launched any there; None if it launched none."""
    rows = np.nonzero(snap.analysis.links.kernel_line == line_id)[0]
    if not len(rows):
        return None
    in_window = rows[snap.trace.gpu.window[rows] == (window if window is not None else -1)]
    pick_from = in_window if len(in_window) else rows
    return int(pick_from[np.argmax(snap.trace.gpu.dur_ns[pick_from])])


def next_kernel_named(
    snap: Snapshot, name: str, window: int | None, at_ns: float | None, direction: int = 1
) -> int | None:
    """The first call of a kernel after `at_ns` (absolute) in `window` (direction < 0: the last call before it);
    else its first (last) call there, else anywhere. None when no kernel has that name."""
    g = snap.trace.gpu
    return _next_call(g, np.nonzero(g.name == snap.trace.sid(name))[0], window, at_ns, direction)


def next_op_named(
    snap: Snapshot, name: str, window: int | None, at_ns: float | None, direction: int = 1
) -> int | None:
    """As next_kernel_named, for the top-level operators the CPU lanes show."""
    ops = snap.trace.ops
    top = snap.analysis.links.op_parent < 0
    return _next_call(ops, np.nonzero((ops.name == snap.trace.sid(name)) & top)[0], window, at_ns, direction)


def _next_call(
    g: Table, rows: np.ndarray, window: int | None, at_ns: float | None, direction: int
) -> int | None:
    if not len(rows):
        return None
    candidates = rows
    if window is not None and at_ns is not None:
        here = rows[g.window[rows] == window]
        start = g.start_ns[here]
        beyond = here[start > at_ns] if direction > 0 else here[start < at_ns]
        candidates = beyond if len(beyond) else (here if len(here) else rows)
    pick = np.argmin if direction > 0 else np.argmax
    return int(candidates[pick(g.start_ns[candidates])])


def page_of(snap: Snapshot, kind: Kind, row: int) -> tuple[PageKey, int] | None:
    """The page showing a gpu (KERNEL), gap (GAP), op (OP) or stream (STREAMED) row, and the row's absolute
    start."""
    if kind == Kind.KERNEL:
        return PageKey(int(snap.trace.gpu.window[row])), int(snap.trace.gpu.start_ns[row])
    if kind == Kind.GAP:
        gaps = snap.analysis.gaps
        return PageKey(int(gaps.window[row])), int(gaps.start_ns[row])
    if kind == Kind.OP:
        ops = snap.trace.ops
        return PageKey(int(ops.window[row])), int(ops.start_ns[row])
    if snap.stream is None:
        return None
    st = snap.stream.stream
    return PageKey(int(st.after_window[row]), True), int(st.start_ns[row])


def _selection(kind: Kind, idx: IntervalIndex, k: int) -> Selection:
    return Selection(kind, int(idx.rows[k]), float(idx.start[k]), float(idx.end[k]))


def item_at(lane: Lane, view: View) -> Selection | None:
    """What the cursor cell of a lane shows: the item under it, else the gap under it, else nothing."""
    a, b = view.cell_range(view.cursor)
    k = pick(lane.items, a, b, view.cursor_t)
    if k is not None:
        return _selection(lane.holds, lane.items, k) if lane.items.rows[k] >= 0 else None  # <0: folded
    k = pick(lane.gaps, a, b, view.cursor_t)
    return _selection(Kind.GAP, lane.gaps, k) if k is not None else None


def next_item(lane: Lane, t: float, direction: int) -> Selection | None:
    """The nearest item or gap of a lane starting after (direction > 0) or before (< 0) page time t."""
    cands = []
    k = neighbour(lane.items, t, direction)
    if k is not None and lane.items.rows[k] >= 0:  # a folded stream's time profile is not an item
        cands.append(_selection(lane.holds, lane.items, k))
    k = neighbour(lane.gaps, t, direction)
    if k is not None:
        cands.append(_selection(Kind.GAP, lane.gaps, k))
    if not cands:
        return None
    return min(cands, key=lambda s: s.start) if direction > 0 else max(cands, key=lambda s: s.start)
