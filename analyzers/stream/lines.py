"""Lines and regimes for the kernels streamed between windows, learned from the windows.

A streamed kernel carries no CPU side (no launch, op or shapes); only its name, timing and launch order
(CUPTI's correlation id). A training step launches the same kernels in the same order every step, so each
window yields a *template*: the kernels of its last complete step in launch order, each with the line, op
and regime the window measured. The kernels streamed after that window are aligned to it greedily, in launch
order: the next kernel is matched to the first template position at or after the expected one that has its
name, wrapping to a new step when none is left::

    template (window 3, step 41):  gemm@L12  gemm@L13  softmax@L14  gemm@L15  adam@L30
    streamed after window 3:       gemm      gemm      softmax      gemm      adam   gemm  gemm ...
    inferred:                      L12       L13       L14          L15       L30    L12   L13

The same kernel name on two lines (a GEMM used by two layers) is told apart by its position. A name no window
has seen stays unmatched. Every match is *inferred*; it is *confirmed* when the next window's template has the
same kernel at the same position (the step did not change between the two windows).

A recording made by the recorder keeps each window's template (`stream_templates`) and only the newest stream
rows raw: older rows are folded into aggregates per template position and time bucket (brrrtui.contract.stream_fold,
`stream_agg`), and `stream_folds` says where each segment's alignment and idle continue. The view aligns the
raw rows from there and maps the aggregates through the same templates, so the per-line figures of the whole
run (`stream_figures`) are the same as from every row raw. Older recordings have neither table: their
templates come from the analysed windows, as before.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from functools import cached_property

import numpy as np

from analyzers.results import Analysis
from brrrtui.contract.model import NONE, Table, Trace
from brrrtui.contract.stream_align import (
    TemplateNames,
    align_from,
    idle_before,
    launch_times,
    next_template,
    segment_template,
    step_times,
    template_order,
)


@dataclass(frozen=True)
class Template:
    window: int
    rows: np.ndarray  # gpu rows of the analysed trace per position (NONE: the window was not analysed)
    names: np.ndarray  # their name ids

    @cached_property
    def key(self) -> TemplateNames:
        return TemplateNames(self.window, self.names)

    @property
    def positions(self) -> dict[int, list[int]]:
        """name id -> template positions holding it, ascending."""
        return self.key.positions


@dataclass(frozen=True)
class Segment:
    """The kernels streamed between two windows (after_window NONE: before the first)."""

    after_window: int
    rows: np.ndarray  # raw stream rows, in launch order
    start_ns: int
    end_ns: int
    busy_ns: int  # GPU time of its kernels (summed; overlapping streams counted once each)
    agg: np.ndarray = field(default_factory=lambda: np.empty(0, dtype=np.int64))  # its stream_agg rows
    busy: np.ndarray = field(default_factory=lambda: np.empty(0, dtype=np.int64))  # its stream_busy rows


@dataclass(frozen=True)
class StreamView:
    stream: Table
    template_row: np.ndarray  # stream row -> the window's gpu row it was matched to (NONE: unmatched)
    line: np.ndarray  # stream row -> line id (NONE)
    regime: np.ndarray  # stream row -> regime code of its template kernel (-1: unmatched)
    confirmed: np.ndarray  # bool: the next window's template agrees
    segments: list[Segment] = field(default_factory=list)
    total_rows: int = 0  # rows in the recording, folded ones included (the view may hold only the newest)
    gap_ns: np.ndarray = field(default_factory=lambda: np.empty(0, dtype=np.int64))  # idle before each row
    agg: Table | None = None  # the folded rows' aggregates (stream_agg), None: nothing folded
    busy: Table | None = None  # the folded rows' time profile (stream_busy)
    agg_template_row: np.ndarray = field(default_factory=lambda: np.empty(0, dtype=np.int64))
    agg_line: np.ndarray = field(default_factory=lambda: np.empty(0, dtype=np.int64))
    agg_regime: np.ndarray = field(default_factory=lambda: np.empty(0, dtype=np.int8))
    agg_confirmed: np.ndarray = field(default_factory=lambda: np.empty(0, dtype=bool))

    @property
    def matched(self) -> int:
        return int((self.template_row >= 0).sum())

    @property
    def folded_rows(self) -> int:
        return int(self.agg["count"].sum()) if self.agg is not None else 0


def _window_template(trace: Trace, rows: np.ndarray, first: int, last: int) -> np.ndarray:
    """The rows of one window (gpu rows `rows`) forming its template, in launch order."""
    g, rt = trace.gpu, trace.runtime
    win = int(g.window[rows[0]])
    rt_rows = np.nonzero(rt.window == win)[0] if len(rt) else np.empty(0, dtype=np.int64)
    launch = launch_times(g.correlation[rows], rt.correlation[rt_rows], rt.start_ns[rt_rows])
    t_last, t_prev = step_times(trace.steps.step, trace.steps.t_ns, first, last)
    out: np.ndarray = rows[template_order(g.correlation[rows], launch, t_last, t_prev)]
    return out


def templates(analysis: Analysis, skip: frozenset[int] = frozenset()) -> dict[int, Template]:
    """Each analysed window's template (but those in `skip`), computed from its rows (what the recorder stores
    as it records)."""
    trace = analysis.trace
    out: dict[int, Template] = {}
    w = trace.windows
    for i, win in enumerate(w.window.tolist()):
        if win in skip:
            continue
        rows = np.nonzero(trace.gpu.window == win)[0]
        if not len(rows):
            continue
        rows = _window_template(trace, rows, int(w.first_step[i]), int(w.last_step[i]))
        out[int(win)] = Template(int(win), rows, trace.gpu.name[rows].astype(np.int64))
    return out


def _stored_templates(analysis: Analysis) -> dict[int, Template]:
    """The recording's templates (every window's, whichever phase it is in), each position mapped to the
    analysed trace's gpu row by (window, correlation); a window that was not analysed borrows the rows of the
    nearest analysed window whose template has the same kernels in the same order (else its rows are NONE).
    An analysed window the recording has no template for (a recorder that stopped early) gets its own."""
    trace, st = analysis.trace, analysis.trace.stream_templates
    g = trace.gpu
    gkey = g.window.astype(np.int64) << 40 | g.correlation
    order = np.argsort(gkey, kind="stable")
    skey = gkey[order]
    out: dict[int, Template] = {}
    for sel in _groups(st.window.astype(np.int64)):
        win = int(st.window[sel[0]])
        sel = sel[np.argsort(st.pos[sel], kind="stable")]
        rows = np.full(len(sel), NONE, dtype=np.int64)
        if len(order):
            key = win << 40 | st.correlation[sel]
            at = np.minimum(np.searchsorted(skey, key), len(order) - 1)
            hit = skey[at] == key
            rows[hit] = order[at[hit]]
        out[win] = Template(win, rows, st.name[sel].astype(np.int64))
    out |= templates(analysis, frozenset(out))
    analysed = [t for t in out.values() if (t.rows >= 0).any()]
    for win, t in list(out.items()):
        if not (t.rows >= 0).any():
            same = [a for a in analysed if np.array_equal(a.names, t.names)]
            if same:
                out[win] = Template(win, min(same, key=lambda a: abs(a.window - win)).rows, t.names)
    return out


def _continue_from(trace: Trace) -> dict[int, tuple[int, int, dict[int, int]]]:
    """Per folded segment: (its template window, the position its alignment continues at, device -> latest
    end), from the last fold of each segment."""
    f = trace.stream_folds
    out: dict[int, tuple[int, int, dict[int, int]]] = {}
    for i in range(len(f)):
        after = int(f.after_window[i])
        prev = out.get(after)
        ends = dict(prev[2]) if prev else {}
        ends[int(f.device[i])] = int(f.last_ns[i])
        out[after] = (int(f.template_window[i]), int(f.next_pos[i]), ends)
    return out


def _segment(stream: Table, rows: np.ndarray, after: int, agg: Table | None, trace: Trace) -> Segment:
    lo, hi, busy = [], [], 0
    if len(rows):
        lo.append(int(stream.start_ns[rows].min()))
        hi.append(int((stream.start_ns[rows] + stream.dur_ns[rows]).max()))
        busy += int(stream.dur_ns[rows].sum())
    agg_rows = busy_rows = np.empty(0, dtype=np.int64)
    folds = trace.stream_folds
    if agg is not None:
        agg_rows = np.nonzero(agg.after_window == after)[0]
        busy_rows = np.nonzero(trace.stream_busy.after_window == after)[0]
        busy += int(agg.dur_ns[agg_rows].sum())
        mine = folds.after_window == after
        if mine.any():
            lo.append(int(folds.first_ns[mine].min()))
            hi.append(int(folds.last_ns[mine].max()))
    return Segment(after, rows, min(lo), max(hi), busy, agg_rows, busy_rows)


def stream_view(analysis: Analysis, stream: Table | None = None, total_rows: int | None = None) -> StreamView:
    """Lines and regimes of the streamed kernels held raw (`stream`, the trace's by default) and of the
    folded aggregates, each segment aligned to its window's template."""
    trace = analysis.trace
    stream = trace.stream if stream is None else stream
    n = len(stream)
    stored = len(trace.stream_templates) > 0
    tmpl = _stored_templates(analysis) if stored else templates(analysis)
    order = sorted(tmpl)
    cont = _continue_from(trace)
    template_row = np.full(n, NONE, dtype=np.int64)
    confirmed = np.zeros(n, dtype=bool)
    gap = np.zeros(n, dtype=np.int64)
    agg = trace.stream_agg if len(trace.stream_agg) else None
    segs = set(np.unique(stream.after_window).tolist()) if n else set()
    segs |= set(np.unique(agg.after_window).tolist()) if agg is not None else set()
    segments: list[Segment] = []
    for after in sorted(segs):
        rows = np.nonzero(stream.after_window == after)[0] if n else np.empty(0, dtype=np.int64)
        rows = rows[np.argsort(stream.correlation[rows], kind="stable")]
        chosen, expect, ends = cont.get(after, (segment_template(after, order), 0, {}))
        t = tmpl.get(chosen)
        if len(rows):
            gap[rows], _ = idle_before(stream.start_ns[rows], stream.dur_ns[rows], stream.device[rows], ends)
        if t is not None and len(rows):
            pos, _ = align_from(stream.name[rows].astype(np.int64), t.key, expect)
            _match(rows, pos, t, tmpl.get(next_template(after, chosen, order)), template_row, confirmed)
        segments.append(_segment(stream, rows, after, agg, trace))
    line, regime = _line_regime(analysis, template_row)
    total = trace.stream_total if total_rows is None else total_rows
    view = StreamView(stream, template_row, line, regime, confirmed, segments, total, gap)
    return _with_agg(analysis, view, tmpl, order) if agg is not None else view


def _match(
    rows: np.ndarray,
    pos: np.ndarray,
    t: Template,
    nxt: Template | None,
    template_row: np.ndarray,
    confirmed: np.ndarray,
) -> None:
    """Rows aligned to template positions `pos`: their template rows, and whether the next window agrees."""
    hit = pos >= 0
    template_row[rows[hit]] = t.rows[pos[hit]]
    if nxt is not None:
        confirmed[rows[hit]] = _agrees(pos[hit], t, nxt)


def _agrees(p: np.ndarray, t: Template, nxt: Template) -> np.ndarray:
    same = p < len(nxt.names)
    agree = np.zeros(len(p), dtype=bool)
    agree[same] = nxt.names[p[same]] == t.names[p[same]]
    return agree


def _line_regime(analysis: Analysis, template_row: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    hit = template_row >= 0
    line = np.full(len(template_row), NONE, dtype=np.int64)
    regime = np.full(len(template_row), -1, dtype=np.int8)
    if hit.any():
        line[hit] = analysis.links.kernel_line[template_row[hit]]
        regime[hit] = analysis.kernel_regime[template_row[hit]]
    return line, regime


def _groups(key: np.ndarray) -> list[np.ndarray]:
    """Row indices per distinct key, in key order."""
    order = np.argsort(key, kind="stable")
    cuts = np.nonzero(np.diff(key[order]))[0] + 1
    return np.split(order, cuts) if len(order) else []


def _with_agg(
    analysis: Analysis, view: StreamView, tmpl: dict[int, Template], order: list[int]
) -> StreamView:
    """The view with its aggregates' template rows, lines, regimes and confirmations."""
    agg = analysis.trace.stream_agg
    template_row = np.full(len(agg), NONE, dtype=np.int64)
    confirmed = np.zeros(len(agg), dtype=bool)
    after_all, chosen_all = agg.after_window.astype(np.int64), agg.template_window.astype(np.int64)
    for sel in _groups((after_all + 1) << 32 | (chosen_all + 1)):
        after, chosen = int(after_all[sel[0]]), int(chosen_all[sel[0]])
        t = tmpl.get(chosen)
        if t is None:
            continue
        pos = agg.pos[sel].astype(np.int64)
        ok = (pos >= 0) & (pos < len(t.names))
        ok[ok] = t.names[pos[ok]] == agg.name[sel][ok]
        rows, pos = sel[ok], pos[ok]
        known = t.rows[pos] >= 0
        template_row[rows[known]] = t.rows[pos[known]]
        nxt = tmpl.get(next_template(after, chosen, order))
        if nxt is not None:
            confirmed[rows[known]] = _agrees(pos[known], t, nxt)
    line, regime = _line_regime(analysis, template_row)
    return StreamView(
        **{f: getattr(view, f) for f in view.__dataclass_fields__ if not f.startswith("agg") and f != "busy"},
        agg=agg,
        busy=analysis.trace.stream_busy,
        agg_template_row=template_row,
        agg_line=line,
        agg_regime=regime,
        agg_confirmed=confirmed,
    )


@dataclass(frozen=True)
class StreamLine:
    line: int  # line id
    gpu_ns: int
    kernels: int
    idle_ns: int  # GPU idle right before its kernels (the gap each of them ended)


@dataclass(frozen=True)
class StreamFigures:
    """The stream of the whole run as far as it is held: raw rows plus folded aggregates."""

    records: int  # rows the recording counts
    analysed: int  # rows held raw + rows folded
    folded: int
    gpu_ns: int
    idle_ns: int
    matched: int  # rows matched to a window's kernel
    confirmed: int
    lines: list[StreamLine]  # by GPU time, descending


def stream_figures(view: StreamView) -> StreamFigures:
    """Per-line GPU time, kernels and idle of every row held: the raw rows and the folded aggregates alike."""
    raw = view.stream
    gap = view.gap_ns if len(view.gap_ns) == len(raw) else np.zeros(len(raw), dtype=np.int64)
    parts = [(view.line, np.ones(len(raw), dtype=np.int64), raw.dur_ns, gap)]
    matched, confirmed = view.matched, int(view.confirmed.sum())
    if view.agg is not None:
        a = view.agg
        parts.append((view.agg_line, a["count"], a.dur_ns, a.gap_ns))
        matched += int(a["count"][view.agg_template_row >= 0].sum())
        confirmed += int(a["count"][view.agg_confirmed].sum())
    size = max((int(p[0].max()) + 1 for p in parts if len(p[0])), default=0)
    sums = np.zeros((3, max(size, 0)), dtype=np.int64)
    for lid, *values in parts:
        known = lid >= 0
        for k, v in enumerate(values):
            # float sums of integers stay exact below 2**53 ns (104 days of GPU time)
            sums[k] += np.bincount(lid[known], weights=v[known], minlength=size).astype(np.int64)
    ids = np.nonzero(sums[0])[0]
    out = [StreamLine(int(i), int(sums[1, i]), int(sums[0, i]), int(sums[2, i])) for i in ids.tolist()]
    out.sort(key=lambda s: (-s.gpu_ns, s.line))
    d = sum(int(p[2].sum()) for p in parts)
    g = sum(int(p[3].sum()) for p in parts)
    folded = view.folded_rows
    return StreamFigures(
        records=max(view.total_rows, len(raw) + folded),
        analysed=len(raw) + folded,
        folded=folded,
        gpu_ns=d,
        idle_ns=g,
        matched=matched,
        confirmed=confirmed,
        lines=out,
    )
