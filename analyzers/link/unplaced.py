"""The GPU rows of the analysed windows that are on no line, and why: every kernel is on a line or counted here.

A row misses its line in one of five ways, told apart from the join's own columns (analyzers.link.links):

    before the window   no launch in the window, and its correlation id precedes every launch the window has
                        (or it started before the window opened): the profiler started while the kernel was
                        queued or running, so its launch, op and line fell before the window
    no launch           no launch in the window for any other reason (a launch on a thread or from a library
                        the profiler did not trace)
    backward, forward   its launch is in a backward node (autograd) whose forward op is not in the window: the
    before the window   window opened after the forward pass, so the line that made the forward op is unknown
    outside any op      its launch is in the window but in no op and no span: a library's own call, such as
                        cuBLAS's or NCCL's lazy initialisation, or a launch from C++ with no torch op around it
    outside user code   its launch is in an op that no line of the user's code made (an op on a thread the
                        line tagger does not see, or under code that is not the user's)

Counts and GPU time per reason, with the costliest names, become one note of the analysis.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from analyzers.link.links import Links, outermost_ops
from brrrtui.contract.model import Trace
from brrrtui.contract.units import fmt_ns

BEFORE_WINDOW = "launched before their window opened (the profiler saw the kernel run, not its launch)"
NO_LAUNCH = "with no CPU launch in the trace"
OUTSIDE_OPS = (
    "launched outside any torch op or traced line (a library's lazy initialisation, a launch from C++)"
)
BACKWARD_BEFORE_WINDOW = "launched by backward ops whose forward ran before their window opened"
OUTSIDE_USER_CODE = "launched by torch ops that no line of the user's code made"
REASONS = (BEFORE_WINDOW, NO_LAUNCH, BACKWARD_BEFORE_WINDOW, OUTSIDE_OPS, OUTSIDE_USER_CODE)


@dataclass(frozen=True)
class Unplaced:
    """GPU rows on no line for one reason."""

    reason: str  # one of REASONS
    rows: np.ndarray  # their gpu rows
    gpu_ns: int  # their GPU time
    names: tuple[str, ...]  # the costliest kernel (or, for ops, op) names, most GPU time first


def _per_window(windows: np.ndarray, keys: np.ndarray, values: np.ndarray, fill: int) -> np.ndarray:
    """For each of `windows`, the smallest of `values` over the rows whose key is that window; `fill` where
    the window has none."""
    out = np.full(len(windows), fill, dtype=np.int64)
    if not len(keys):
        return out
    order = np.lexsort((values, keys))  # by window, smallest value first
    k, v = keys[order], values[order]
    lead = np.concatenate(([True], k[1:] != k[:-1]))
    uk, uv = k[lead], v[lead]
    pos = np.minimum(np.searchsorted(uk, windows), len(uk) - 1)
    hit = uk[pos] == windows
    out[hit] = uv[pos[hit]]
    return out


def _before_window(trace: Trace, rows: np.ndarray) -> np.ndarray:
    """Of unlaunched gpu `rows`, those launched before their window opened: a correlation id below every
    launch of the window, or a start before the window's."""
    gpu, rt, win = trace.gpu, trace.runtime, trace.windows
    window = gpu.window[rows].astype(np.int64)
    corr = gpu.correlation[rows].astype(np.int64)
    ok = rt.correlation >= 0
    never = np.iinfo(np.int64).min
    first = _per_window(window, rt.window[ok].astype(np.int64), rt.correlation[ok].astype(np.int64), never)
    opened = _per_window(window, win.window.astype(np.int64), win.start_ns.astype(np.int64), never)
    earlier = (corr >= 0) & (first != never) & (corr < first)
    out: np.ndarray = earlier | ((opened != never) & (gpu.start_ns[rows] < opened))
    return out


def _backward_without_forward(trace: Trace, op_parent: np.ndarray, ops: np.ndarray) -> np.ndarray:
    """Of `ops`, those inside (or being) an autograd node whose forward op (same sequence number, forward
    thread) is not in the node's window."""
    table = trace.ops
    node = (table.seq >= 0) & (table.fwd_tid > 0)
    found = np.full(len(ops), -1, dtype=np.int64)  # the nearest enclosing-or-self node
    cur = ops.copy()
    while len(cur) and (cur >= 0).any():
        hit = (found < 0) & (cur >= 0) & node[np.maximum(cur, 0)]
        found[hit] = cur[hit]
        cur = np.where((cur >= 0) & (found < 0), op_parent[np.maximum(cur, 0)], -1)
    has = found >= 0
    fwd = (table.seq >= 0) & (table.fwd_tid <= 0)
    fwd_keys = table.window[fwd].astype(np.int64) << 40 | table.seq[fwd]
    rows = found[has]
    keys = table.window[rows].astype(np.int64) << 40 | table.seq[rows]
    out = np.zeros(len(ops), dtype=bool)
    out[has] = ~np.isin(keys, fwd_keys)
    return out


def _names(ids: np.ndarray, dur: np.ndarray, strings: list[str], most: int = 2) -> tuple[str, ...]:
    """The `most` string ids among `ids` with the most of `dur`, as strings."""
    unique, inverse = np.unique(ids, return_inverse=True)
    total = np.bincount(inverse, weights=dur.astype(np.float64))
    return tuple(strings[int(unique[i])] for i in np.argsort(-total, kind="stable")[:most])


def unplaced_kernels(trace: Trace, links: Links) -> list[Unplaced]:
    """The analysed GPU rows on no line, grouped by reason (REASONS' order; reasons with no row left out)."""
    gpu, strings = trace.gpu, trace.strings
    if not len(gpu):
        return []
    missing = np.flatnonzero(links.kernel_line < 0)
    if not len(missing):
        return []
    launch = links.kernel_launch[missing]
    unlaunched = missing[launch < 0]
    before = _before_window(trace, unlaunched)
    in_op = links.kernel_op[missing] >= 0
    in_ops = missing[(launch >= 0) & in_op]
    orphan = _backward_without_forward(trace, links.op_parent, links.kernel_op[in_ops].astype(np.int64))
    groups = {
        BEFORE_WINDOW: unlaunched[before],
        NO_LAUNCH: unlaunched[~before],
        BACKWARD_BEFORE_WINDOW: in_ops[orphan],
        OUTSIDE_OPS: missing[(launch >= 0) & ~in_op],
        OUTSIDE_USER_CODE: in_ops[~orphan],
    }
    out = []
    for reason in REASONS:
        rows = groups[reason]
        if not len(rows):
            continue
        dur = gpu.dur_ns[rows]
        if reason in (OUTSIDE_USER_CODE, BACKWARD_BEFORE_WINDOW):
            ids = trace.ops.name[outermost_ops(links.op_parent, links.kernel_op[rows].astype(np.int64))]
        else:
            ids = gpu.name[rows]
        out.append(Unplaced(reason, rows, int(dur.sum()), _names(ids, dur, strings)))
    return out


def _short(name: str, width: int = 48) -> str:
    return name if len(name) <= width else name[: width - 1] + "…"


def unplaced_note(trace: Trace, links: Links) -> str | None:
    """One note counting the analysed GPU rows on no line, with their GPU time, by reason; None when every row
    is on a line."""
    groups = unplaced_kernels(trace, links)
    if not groups:
        return None
    n = sum(len(g.rows) for g in groups)
    total = sum(g.gpu_ns for g in groups)
    parts = [
        f"{len(g.rows)} ({fmt_ns(g.gpu_ns)}) {g.reason}: {', '.join(_short(x) for x in g.names)}"
        for g in groups
    ]
    return f"{n} of {len(trace.gpu)} GPU rows ({fmt_ns(total)} of GPU time) are on no line: " + "; ".join(
        parts
    )
