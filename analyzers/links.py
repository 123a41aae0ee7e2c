"""Join the model's tables: kernel -> launch (correlation) -> op (time nesting) -> source line.

On one CPU thread, calls nest::

    span  train.py:41 |==========================================|
    op        aten::linear |================================|
    op            aten::addmm |==================|
    launch            cudaLaunchKernel |==|            <- correlation 7
    kernel (GPU)                              [sm90_gemm]   <- correlation 7

so a launch belongs to the innermost op that encloses its start, and an op to the innermost span. Backward
ops (autograd nodes) take the line of the forward op with the same `Sequence number`, and so do the ops
nested in them; any other op without a span of its own inherits its parent's line.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from analyzers.model import NONE, Trace


def nesting_parents(start: np.ndarray, end: np.ndarray, tid: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Sort intervals by (tid, start, -end) and give each its innermost enclosing interval.

    Returns (order, parent) where `order` sorts the input and parent[k] is the position (in sorted order) of
    the enclosing interval of sorted interval k, or NONE.
    """
    order = np.lexsort((-end, start, tid))
    s, e, t = start[order], end[order], tid[order]
    parent = np.full(len(order), NONE, dtype=np.int64)
    stack: list[int] = []
    last_tid = None
    s_list, e_list, t_list = s.tolist(), e.tolist(), t.tolist()
    for k in range(len(order)):
        if t_list[k] != last_tid:
            stack.clear()
            last_tid = t_list[k]
        while stack and e_list[stack[-1]] <= s_list[k]:
            stack.pop()
        if stack:
            parent[k] = stack[-1]
        stack.append(k)
    return order, parent


def innermost_enclosing(
    start: np.ndarray, end: np.ndarray, tid: np.ndarray, q_time: np.ndarray, q_tid: np.ndarray
) -> np.ndarray:
    """For each query point (q_time on thread q_tid), the index of the innermost interval containing it."""
    result = np.full(len(q_time), NONE, dtype=np.int64)
    if len(start) == 0 or len(q_time) == 0:
        return result
    order, parent = nesting_parents(start, end, tid)
    s, e, t = start[order], end[order], tid[order]
    # Candidate: the last interval on the same thread starting at or before the point; if it ended before the
    # point, walk up its parents (depth is small: tens of levels at most).
    key_t = np.unique(t)
    for thread in key_t:
        lo, hi = np.searchsorted(t, thread, "left"), np.searchsorted(t, thread, "right")
        q = np.nonzero(q_tid == thread)[0]
        if len(q) == 0:
            continue
        cand = np.searchsorted(s[lo:hi], q_time[q], "right") - 1 + lo
        cand[cand < lo] = NONE
        for _ in range(256):
            ok = cand >= 0
            bad = ok & (e[np.where(ok, cand, 0)] < q_time[q])
            if not bad.any():
                break
            cand[bad] = parent[cand[bad]]
        result[q] = np.where(cand >= 0, order[np.where(cand >= 0, cand, 0)], NONE)
    return result


@dataclass
class Links:
    kernel_launch: np.ndarray  # gpu row -> runtime row (NONE: no launch seen)
    launch_op: np.ndarray  # runtime row -> op row
    kernel_op: np.ndarray  # gpu row -> op row
    op_parent: np.ndarray  # op row -> enclosing op row
    op_line: np.ndarray  # op row -> line id
    kernel_line: np.ndarray  # gpu row -> line id
    launch_line: np.ndarray  # runtime row -> line id


def link(trace: Trace) -> Links:
    gpu, rt, ops, spans = trace.gpu, trace.runtime, trace.ops, trace.spans

    # kernel -> launch by correlation id (unique per process; windows are kept apart anyway)
    kernel_launch = np.full(len(gpu), NONE, dtype=np.int64)
    if len(rt) and len(gpu):
        rkey = rt.window.astype(np.int64) << 40 | rt.correlation
        gkey = gpu.window.astype(np.int64) << 40 | gpu.correlation
        ro = np.argsort(rkey, kind="stable")
        pos = np.searchsorted(rkey[ro], gkey)
        pos_c = np.minimum(pos, len(ro) - 1)
        hit = (pos < len(ro)) & (rkey[ro][pos_c] == gkey) & (gpu.correlation >= 0)
        kernel_launch[hit] = ro[pos_c[hit]]

    op_end = ops.start_ns + ops.dur_ns
    launch_op = innermost_enclosing(ops.start_ns, op_end, ops.tid, rt.start_ns, rt.tid)

    # op -> enclosing op (for inheritance), computed once in sorted order
    op_parent = np.full(len(ops), NONE, dtype=np.int64)
    if len(ops):
        order, parent_sorted = nesting_parents(ops.start_ns, op_end, ops.tid)
        op_parent[order] = np.where(parent_sorted >= 0, order[np.maximum(parent_sorted, 0)], NONE)
        op_order = order
    else:
        op_order = np.empty(0, dtype=np.int64)

    # op -> line: innermost span containing the op's start on the same thread
    direct = np.full(len(ops), NONE, dtype=np.int64)
    if len(spans) and len(ops):
        idx = innermost_enclosing(
            spans.start_ns, spans.start_ns + spans.dur_ns, spans.tid, ops.start_ns, ops.tid
        )
        direct = np.where(idx >= 0, spans.line[np.maximum(idx, 0)], NONE).astype(np.int64)

    # Backward autograd nodes (seq >= 0, fwd_tid > 0) take the line of the forward op with the same seq,
    # even when they ran inside a span (on CPU, backward runs on the thread that called loss.backward()).
    fwd_line: dict[int, int] = {}
    is_node = np.zeros(len(ops), dtype=bool)
    if len(ops):
        seq = ops.seq
        fwd = (seq >= 0) & (direct >= 0) & (ops.fwd_tid <= 0)
        for s, ln in zip(seq[fwd][::-1].tolist(), direct[fwd][::-1].tolist(), strict=True):
            fwd_line[s] = ln  # reversed, so the earliest op of each seq is written last and wins
        is_node = (seq >= 0) & (ops.fwd_tid > 0)

    # Parents first (sorted order visits parents before children): a node's forward line, else the line of
    # an enclosing backward node, else the op's own span, else the enclosing op's line.
    op_line = direct.copy()
    if len(ops):
        par, lines = op_parent.tolist(), direct.tolist()
        node, seqs = is_node.tolist(), ops.seq.tolist()
        in_bwd = [False] * len(lines)
        for i in op_order.tolist():
            p = par[i]
            if node[i] and seqs[i] in fwd_line:
                lines[i], in_bwd[i] = fwd_line[seqs[i]], True
            elif p >= 0 and in_bwd[p]:
                lines[i], in_bwd[i] = lines[p], True
            elif lines[i] < 0 and p >= 0:
                lines[i] = lines[p]
        op_line = np.asarray(lines, dtype=np.int64)

    kernel_op = (
        np.where(kernel_launch >= 0, launch_op[np.maximum(kernel_launch, 0)], NONE)
        if len(rt)
        else (np.full(len(gpu), NONE, dtype=np.int64))
    )
    kernel_line = (
        np.where(kernel_op >= 0, op_line[np.maximum(kernel_op, 0)], NONE)
        if len(ops)
        else (np.full(len(gpu), NONE, dtype=np.int64))
    )
    launch_line = (
        np.where(launch_op >= 0, op_line[np.maximum(launch_op, 0)], NONE)
        if len(ops)
        else (np.full(len(rt), NONE, dtype=np.int64))
    )
    # a launch outside any op (rare) can still sit inside a span
    if len(spans) and len(rt):
        miss = launch_line < 0
        if miss.any():
            idx = innermost_enclosing(
                spans.start_ns, spans.start_ns + spans.dur_ns, spans.tid, rt.start_ns[miss], rt.tid[miss]
            )
            launch_line[miss] = np.where(idx >= 0, spans.line[np.maximum(idx, 0)], NONE)
            kernel_line = np.where(kernel_launch >= 0, launch_line[np.maximum(kernel_launch, 0)], NONE)
    return Links(kernel_launch, launch_op, kernel_op, op_parent, op_line, kernel_line, launch_line)
