"""Join the model's tables: kernel -> launch (correlation) -> op (time nesting) -> source line.

On one CPU thread, calls nest::

    span  train.py:41 |==========================================|
    op        aten::linear |================================|
    op            aten::addmm |==================|
    launch            cudaLaunchKernel |==|            <- correlation 7
    kernel (GPU)                              [sm90_gemm]   <- correlation 7

so a launch belongs to the innermost op that encloses its start, and an op to the innermost span (its line,
module chain and library line). Backward ops (autograd nodes) take the span of the forward op that created
them, the last forward op with the same `Sequence number`, and so do the ops nested in them; any other op
without a span of its own inherits its parent's.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import NamedTuple

import numpy as np

from analyzers import arrays
from analyzers.arrays import distinct, lexsort, window_groups
from analyzers.link.compiled import CompiledLines, compiled_lines, fill_op_lines
from brrrtui.contract.model import NONE, Trace
from brrrtui.contract.schema import COMPILED_CALL_PREFIX
from brrrtui.runtime.parallel import concurrently


def _nesting_order(start: np.ndarray, end: np.ndarray, tid: np.ndarray) -> np.ndarray:
    """np.lexsort((-end, start, tid)): sorted by (tid, start) first, then only the intervals that share a
    thread and a start are put in -end order (few: the third sort of every row was most of the time)."""
    order = lexsort((start, tid))
    s, t = start[order], tid[order]
    tie = (s[1:] == s[:-1]) & (t[1:] == t[:-1])
    if tie.any():
        group = np.cumsum(np.concatenate(([True], ~tie))) - 1
        held = np.zeros(len(order), dtype=bool)
        held[1:] |= tie
        held[:-1] |= tie
        pos = np.nonzero(held)[0]
        order[pos] = order[pos][np.lexsort((-end[order[pos]], group[pos]))]
    return order


class Nesting(NamedTuple):
    """Intervals sorted by (tid, start, -end), with each one's innermost enclosing interval."""

    order: np.ndarray  # sorts the input
    parent: np.ndarray  # parent[k]: the sorted position of sorted interval k's enclosing one, or NONE
    start: np.ndarray  # the sorted intervals' starts, ends and threads (innermost_enclosing searches them)
    end: np.ndarray
    tid: np.ndarray


def nesting(start: np.ndarray, end: np.ndarray, tid: np.ndarray) -> Nesting:
    """Sort intervals by (tid, start, -end) and give each its innermost enclosing interval.

    Equivalent to the stack walk (pop every open interval that ended at or before k starts; the top encloses
    k), vectorised by pointer jumping: k's candidate starts at k-1 and, while it ended at or before k's start,
    jumps to the candidate's own candidate. Every interval skipped that way ended before the candidate
    started, so it cannot enclose k either; flat runs of siblings converge in log2(n) rounds. Positions are
    int32 when they fit (half the memory the jumps gather through).
    """
    order = _nesting_order(start, end, tid)
    s, e, t = start[order], end[order], tid[order]
    n = len(order)
    parent: np.ndarray = np.arange(-1, n - 1, dtype=np.int32 if n < 2**31 else np.int64)
    # Per thread (the stack empties when the thread changes): an interval that starts after every earlier one
    # ended (running max of ends <= its start) is top level, without any jumping.
    cuts = np.concatenate(([0], np.nonzero(t[1:] != t[:-1])[0] + 1, [n])) if n else np.zeros(1, np.int64)
    for lo, hi in zip(cuts[:-1].tolist(), cuts[1:].tolist(), strict=True):
        open_until = np.maximum.accumulate(e[lo:hi])
        top = np.concatenate(([True], open_until[:-1] <= s[lo + 1 : hi]))
        parent[lo:hi][top] = NONE
    active = np.nonzero(parent >= 0)[0]
    while len(active):
        cand = parent[active]
        ended = e[cand] <= s[active]
        active = active[ended]
        parent[active] = parent[cand[ended]]
        active = active[parent[active] >= 0]
    return Nesting(order, parent, s, e, t)


def _from_nearest_ancestor(value: np.ndarray, parent: np.ndarray) -> np.ndarray:
    """Fill value[i] < 0 with the value of i's nearest ancestor (via `parent`) whose value is >= 0.

    The rows walk up a chunk at a time (their temporaries a chunk's: 5 M ops walking at once held ~120 MB).
    A row may meet an ancestor a chunk before filled: it holds its own nearest ancestor's value, the same."""
    out = value.copy()
    if not (out >= 0).any():  # nothing to inherit (no backward node in the trace, say): no walk up
        return out
    step = 4 * arrays.GROUP_ROWS
    for lo in range(0, len(out), step):
        todo = np.nonzero((out[lo : lo + step] < 0) & (parent[lo : lo + step] >= 0))[0] + lo
        anc = parent[todo]  # the ancestor each row of `todo` looks at now
        while len(todo):  # one nesting level per round: tens of rounds at most
            v = out[anc]
            hit = v >= 0
            out[todo[hit]] = v[hit]
            todo, anc = todo[~hit], parent[anc[~hit]]
            up = anc >= 0
            todo, anc = todo[up], anc[up]
    return out


def outermost_ops(op_parent: np.ndarray, ops: np.ndarray) -> np.ndarray:
    """Each op's outermost enclosing op (itself when top level)."""
    out = ops.copy()
    up = op_parent[out] if len(out) else out
    while (up >= 0).any():
        out = np.where(up >= 0, up, out)
        up = np.where(up >= 0, op_parent[np.maximum(up, 0)], -1)
    return out


def innermost_enclosing(
    start: np.ndarray,
    end: np.ndarray,
    tid: np.ndarray,
    q_time: np.ndarray,
    q_tid: np.ndarray,
    nested: Nesting | None = None,
    dtype: type[np.signedinteger] = np.int64,
) -> np.ndarray:
    """For each query point (q_time on thread q_tid), the index of the innermost interval containing it, as
    `dtype`.

    `nested`: nesting(start, end, tid) when the caller already has it."""
    result = np.full(len(q_time), NONE, dtype=dtype)
    if len(start) == 0 or len(q_time) == 0:
        return result
    order, parent, s, e, t = nested if nested is not None else nesting(start, end, tid)
    # Candidate: the last interval on the same thread starting at or before the point; if it ended before the
    # point, walk up its parents (depth is small: tens of levels at most).
    one_thread = t[0] == t[-1] and bool((q_tid == t[0]).all())  # t is sorted
    for thread in [int(t[0])] if one_thread else distinct(t).tolist():
        lo, hi = np.searchsorted(t, thread, "left"), np.searchsorted(t, thread, "right")
        q: np.ndarray | slice = slice(None) if one_thread else np.nonzero(q_tid == thread)[0]  # no copies
        if isinstance(q, np.ndarray) and not len(q):
            continue
        qt = q_time[q]
        cand = np.searchsorted(s[lo:hi], qt, "right") - 1 + lo
        cand[cand < lo] = NONE
        # the points whose candidate ended before them (few: most points lie in their candidate)
        walk = np.nonzero(e[np.maximum(cand, 0)] < qt)[0]
        walk = walk[cand[walk] >= 0]
        for _ in range(256):
            if not len(walk):
                break
            cand[walk] = parent[cand[walk]]
            walk = walk[cand[walk] >= 0]
            walk = walk[e[cand[walk]] < qt[walk]]
        has = cand >= 0
        result[q] = np.where(has, order[np.where(has, cand, 0)], NONE)
    return result


@dataclass(frozen=True)
class Calls:
    """Who launched what, without source lines: all the roofline's op costs need, so they are worked out
    beside the lines' join (`link_lines`). Row and id columns are int32 (half the memory of int64: 1 M
    kernels' 3 M ops hold ~75 MB less) when every table is shorter than 2**31 rows; line, module and string
    ids are int32 in the recording anyway."""

    kernel_launch: np.ndarray  # gpu row -> runtime row (NONE: no launch seen)
    launch_op: np.ndarray  # runtime row -> op row
    kernel_op: np.ndarray  # gpu row -> op row
    op_parent: np.ndarray  # op row -> enclosing op row


@dataclass(frozen=True)
class Links(Calls):
    """The calls, each op's, launch's and kernel's source line, and each kernel's module chain and library
    line (the ops' own are not kept: 3 M ops take 24 MB for them, and nothing after the join reads them)."""

    op_line: np.ndarray  # op row -> line id
    kernel_line: np.ndarray  # gpu row -> line id
    launch_line: np.ndarray  # runtime row -> line id
    kernel_module: np.ndarray  # gpu row -> string id of its module chain
    kernel_lib_line: np.ndarray  # gpu row -> line id of its innermost model-library line
    op_compiled: np.ndarray  # op row -> its line came from Inductor's provenance (a compiled kernel's launch)
    compiled: CompiledLines | None  # the compiled kernels' lines and shares, when the recording has them


def _kernel_launches(trace: Trace) -> np.ndarray:
    """gpu row -> runtime row, by correlation id (unique per process; windows are kept apart anyway)."""
    gpu, rt = trace.gpu, trace.runtime
    kernel_launch = np.full(len(gpu), NONE, dtype=np.int64)
    if len(rt) and len(gpu):
        rkey = rt.window.astype(np.int64) << 40 | rt.correlation
        gkey = gpu.window.astype(np.int64) << 40 | gpu.correlation
        in_order = bool((rkey[1:] >= rkey[:-1]).all())  # launches come in correlation order
        ro = np.arange(len(rkey)) if in_order else np.argsort(rkey, kind="stable")
        sorted_keys = rkey if in_order else rkey[ro]
        pos = np.searchsorted(sorted_keys, gkey)
        pos_c = np.minimum(pos, len(ro) - 1)
        hit = (pos < len(ro)) & (sorted_keys[pos_c] == gkey) & (gpu.correlation >= 0)
        kernel_launch[hit] = ro[pos_c[hit]]
    return kernel_launch


def _span_rows(trace: Trace, dtype: type[np.signedinteger]) -> np.ndarray:
    """op row -> the innermost span containing the op's start on the same thread (NONE)."""
    ops = trace.ops
    return spans_at(trace, ops.window, ops.start_ns, ops.tid, dtype)


def spans_at(
    trace: Trace,
    window: np.ndarray,
    start: np.ndarray,
    tid: np.ndarray,
    dtype: type[np.signedinteger],
    want: np.ndarray | None = None,
) -> np.ndarray:
    """Per row of a table with these columns, the innermost span containing its start on its thread (NONE;
    only the rows `want`, given); window group by window group (arrays.window_groups), the groups counted in
    rows of the longer of the two tables: a few queried times do not make every span one group."""
    spans = trace.spans
    out = np.full(len(window), NONE, dtype=dtype)
    if len(window) >= len(spans):
        groups = window_groups((window, spans.window))
    else:
        groups = [(r, s) for s, r in window_groups((spans.window, window))]
    for r, s in groups:
        q: slice | np.ndarray = r if want is None else np.flatnonzero(want[r]) + r.start
        if s.stop > s.start and len(start[q]):
            sp_start = spans.start_ns[s]
            end = sp_start + spans.dur_ns[s]
            found = innermost_enclosing(sp_start, end, spans.tid[s], start[q], tid[q], dtype=dtype)
            out[q] = np.where(found >= 0, found + s.start, NONE)
    return out


def _op_spans(trace: Trace, direct: np.ndarray, op_parent: np.ndarray) -> np.ndarray:
    """op row -> span row (its line, module and library line).

    Backward autograd nodes (seq >= 0, fwd_tid > 0) take the span of the forward op with the same seq, even
    when they ran inside a span (on CPU, backward runs on the thread that called loss.backward()). An op takes:
    the forward span of its nearest enclosing-or-self backward node that has one, else its own span,
    else the span of its nearest enclosing op that has one of those.
    """
    ops = trace.ops
    if not len(ops):
        return direct.copy()
    seq = ops.seq
    # Every op records the thread's *next* sequence number, and an autograd node takes it when created,
    # so all ops since the previous node share a number and the node's creator is the last of them
    # (`x * 1.5` and fifty `tanh` before `w * t` all carry MulBackward0's number).
    # The creator may have no span (a torch.compile'd call runs untagged): its node then has none either,
    # rather than the span of an earlier op that merely shares the number (the data slicing before the
    # compiled model, whose line would take the whole compiled backward).
    fwd = np.nonzero((seq >= 0) & (ops.fwd_tid <= 0))[0]
    fwd = fwd[lexsort((ops.start_ns[fwd], seq[fwd]))]
    last = np.concatenate((seq[fwd][1:] != seq[fwd][:-1], [True])) if len(fwd) else np.zeros(0, bool)
    fwd_seq, fwd_span = seq[fwd][last], direct[fwd][last]
    node_span = np.full(len(ops), NONE, dtype=direct.dtype)
    node = np.nonzero((seq >= 0) & (ops.fwd_tid > 0))[0]
    if len(node) and len(fwd_seq):
        pos = np.minimum(np.searchsorted(fwd_seq, seq[node]), len(fwd_seq) - 1)
        found = fwd_seq[pos] == seq[node]
        node_span[node[found]] = fwd_span[pos[found]]
    base = _from_nearest_ancestor(node_span, op_parent)  # inside a backward node: its forward span
    op_span = np.where(base >= 0, base, direct)
    return _from_nearest_ancestor(op_span, op_parent)


def _take(column: np.ndarray, rows: np.ndarray, dtype: type[np.signedinteger] = np.int64) -> np.ndarray:
    """column[rows] where rows >= 0, NONE elsewhere, as `dtype`."""
    if not len(column):
        return np.full(len(rows), NONE, dtype=dtype)
    out: np.ndarray = column[np.maximum(rows, 0)].astype(dtype, copy=False)  # a fresh array: set in place
    out[rows < 0] = NONE
    return out


def _compiled_op_lines(
    trace: Trace,
    op_line: np.ndarray,
    op_lib_line: np.ndarray,
    op_parent: np.ndarray,
    compiled: CompiledLines | None,
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """torch.compile'd kernels' launch ops have no span: their lines come from Inductor (analyzers.link.compiled),
    and ops nested in one that took a line (cuDNN's attention forward inside the extern call Inductor named,
    aten::_scaled_dot_product_cudnn_attention) take it too. Also returns which ops took a line so."""
    if compiled is None:
        return op_line, op_lib_line, np.zeros(len(op_line), dtype=bool)
    op_line, op_lib_line, op_compiled = fill_op_lines(trace, op_line, op_lib_line, compiled)
    src = _from_nearest_ancestor(np.where(op_compiled, np.arange(len(op_line)), NONE), op_parent)
    nested = (op_line < 0) & (src >= 0)
    op_line[nested], op_lib_line[nested] = op_line[src[nested]], op_lib_line[src[nested]]
    op_compiled[nested] = True
    # a kernel traced to library code only gave its library line alone: ops nested in it take that too
    # (cuDNN's convolution inside the aten::convolution of a compiled torchvision model)
    lib_only = (op_line < 0) & (op_lib_line >= 0)
    if lib_only.any():
        lib_src = _from_nearest_ancestor(np.where(lib_only, np.arange(len(op_line)), NONE), op_parent)
        nested = (op_line < 0) & (op_lib_line < 0) & (lib_src >= 0)
        op_lib_line[nested] = op_lib_line[lib_src[nested]]
    return op_line, op_lib_line, op_compiled


def _compiled_call_lines(trace: Trace, op_parent: np.ndarray) -> np.ndarray | None:
    """op row -> the line that made the compiled call it ran in (the op the capture puts around each call,
    schema.COMPILED_CALL_PREFIX, names it), or the call its backward node's creator ran in, as spans go
    (`_op_spans`); NONE elsewhere. None without compiled calls."""
    ops, strings = trace.ops, trace.strings
    flagged = np.flatnonzero(trace.string_flags(lambda s: s.startswith(COMPILED_CALL_PREFIX)))
    if not len(flagged) or not len(ops):
        return None
    line_of_name = np.full(len(strings) + 1, NONE, dtype=np.int64)  # the last: NONE's (-1) name
    for sid in flagged.tolist():
        text = strings[sid].removeprefix(COMPILED_CALL_PREFIX)
        if text.isdigit() and int(text) < len(trace.lines):
            line_of_name[sid] = int(text)
    inside = _from_nearest_ancestor(line_of_name[ops.name], op_parent)
    return _op_spans(trace, inside, op_parent)


def _index_dtype(trace: Trace) -> type[np.signedinteger]:
    """int32 when every row index (and NONE) fits in it, else int64."""
    longest = max(len(trace.gpu), len(trace.runtime), len(trace.ops), len(trace.spans))
    return np.int32 if longest < 2**31 else np.int64


def link(trace: Trace) -> Links:
    calls, span_rows = link_calls(trace)
    return link_lines(trace, calls, span_rows)


def link_calls(trace: Trace) -> tuple[Calls, np.ndarray]:
    """The calls, and each op's innermost span: the ops' nesting and the launches' ops on this thread, the
    kernels' launches and the ops' spans on a second one (the two halves take about as long)."""
    rt, ops = trace.runtime, trace.ops
    idx = _index_dtype(trace)

    def ops_and_launches() -> tuple[np.ndarray, np.ndarray]:
        """Window group by window group (arrays.window_groups): calls nest inside one profiling session."""
        launch_op = np.full(len(rt), NONE, dtype=idx)
        op_parent = np.full(len(ops), NONE, dtype=idx)  # op -> enclosing op (for inheritance)
        for o, r in window_groups((ops.window, rt.window)):
            if o.stop == o.start:
                continue
            start, end, tid = ops.start_ns[o], ops.start_ns[o] + ops.dur_ns[o], ops.tid[o]
            nested = nesting(start, end, tid)
            found = innermost_enclosing(start, end, tid, rt.start_ns[r], rt.tid[r], nested, idx)
            launch_op[r] = np.where(found >= 0, found + o.start, NONE)
            order, parent_sorted = nested.order, nested.parent
            parent = np.where(parent_sorted >= 0, order[np.maximum(parent_sorted, 0)] + o.start, NONE)
            op_parent[o][order] = parent
        return launch_op, op_parent

    (launch_op, op_parent), (kernel_launch, span_rows) = concurrently(
        ops_and_launches, lambda: (_kernel_launches(trace).astype(idx), _span_rows(trace, idx))
    )
    return Calls(kernel_launch, launch_op, _take(launch_op, kernel_launch, idx), op_parent), span_rows


def link_lines(trace: Trace, calls: Calls, span_rows: np.ndarray) -> Links:
    """Each op's line from its span (`span_rows`: link_calls's), by inheritance or from Inductor's provenance,
    and the launches' and kernels' from their ops."""
    rt, spans = trace.runtime, trace.spans
    idx = _index_dtype(trace)
    kernel_launch, launch_op, kernel_op, op_parent = (
        calls.kernel_launch,
        calls.launch_op,
        calls.kernel_op,
        calls.op_parent,
    )
    op_span = _op_spans(trace, span_rows, op_parent)
    op_line, op_lib_line = _take(spans.line, op_span, idx), _take(spans.lib_line, op_span, idx)
    compiled = compiled_lines(trace)
    op_line, op_lib_line, op_compiled = _compiled_op_lines(trace, op_line, op_lib_line, op_parent, compiled)
    call_line = _compiled_call_lines(trace, op_parent)
    if call_line is not None:  # what Inductor did not place: the line that called the compiled code
        unplaced = (op_line < 0) & (call_line >= 0)
        op_line[unplaced] = call_line[unplaced]
    op_line, op_lib_line = op_line.astype(idx, copy=False), op_lib_line.astype(idx, copy=False)

    kernel_line = _take(op_line, kernel_op, idx)
    launch_line = _take(op_line, launch_op, idx)
    # a launch outside any op (rare) can still sit inside a span
    if len(spans) and len(rt):
        miss = launch_line < 0
        if miss.any():
            in_span = spans_at(trace, rt.window, rt.start_ns, rt.tid, idx, miss)[miss]
            launch_line[miss] = _take(spans.line, in_span, idx)
            kernel_line = _take(launch_line, kernel_launch, idx)
    kernel_module = _take(spans.module, _take(op_span, kernel_op, idx), idx)
    return Links(
        kernel_launch,
        launch_op,
        kernel_op,
        op_parent,
        op_line,
        kernel_line,
        launch_line,
        kernel_module,
        _take(op_lib_line, kernel_op, idx),
        op_compiled,
        compiled,
    )
