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
"""

from __future__ import annotations

import bisect
from dataclasses import dataclass, field

import numpy as np

from analyzers.model import NONE, Table, Trace
from analyzers.results import Analysis


@dataclass(frozen=True)
class Template:
    window: int
    rows: np.ndarray  # gpu rows of the window, in launch order
    names: np.ndarray  # their name ids
    positions: dict[int, list[int]]  # name id -> template positions holding it, ascending


@dataclass(frozen=True)
class Segment:
    """The kernels streamed between two windows (after_window NONE: before the first)."""

    after_window: int
    rows: np.ndarray  # stream rows, in launch order
    start_ns: int
    end_ns: int
    busy_ns: int  # GPU time of its kernels (summed; overlapping streams counted once each)


@dataclass(frozen=True)
class StreamView:
    stream: Table
    template_row: np.ndarray  # stream row -> the window's gpu row it was matched to (NONE: unmatched)
    line: np.ndarray  # stream row -> line id (NONE)
    regime: np.ndarray  # stream row -> regime code of its template kernel (-1: unmatched)
    confirmed: np.ndarray  # bool: the next window's template agrees
    segments: list[Segment] = field(default_factory=list)
    total_rows: int = 0  # rows in the recording (the view may hold only the newest)

    @property
    def matched(self) -> int:
        return int((self.template_row >= 0).sum())


def templates(analysis: Analysis) -> dict[int, Template]:
    trace, links = analysis.trace, analysis.links
    out: dict[int, Template] = {}
    w = trace.windows
    for i, win in enumerate(w.window.tolist()):
        rows = np.nonzero(trace.gpu.window == win)[0]
        if not len(rows):
            continue
        rows = _last_step(trace, links.kernel_launch, rows, int(w.first_step[i]), int(w.last_step[i]))
        rows = rows[np.argsort(trace.gpu.correlation[rows], kind="stable")]
        names = trace.gpu.name[rows]
        positions: dict[int, list[int]] = {}
        for pos, name in enumerate(names.tolist()):
            positions.setdefault(name, []).append(pos)
        out[int(win)] = Template(int(win), rows, names, positions)
    return out


def _last_step(
    trace: Trace, kernel_launch: np.ndarray, rows: np.ndarray, first: int, last: int
) -> np.ndarray:
    """The rows launched during the window's last optimizer step (all rows if the window has no step)."""
    if first < 0 or last < 0 or not len(trace.steps):
        return rows
    t = dict(zip(trace.steps.step.tolist(), trace.steps.t_ns.tolist(), strict=True))
    if last not in t:
        return rows
    lo = t.get(last - 1, -(1 << 62))
    launch = kernel_launch[rows]
    ok = launch >= 0
    at = np.where(ok, trace.runtime.start_ns[np.maximum(launch, 0)], -1) if len(trace.runtime) else launch
    mine = rows[ok & (at > lo) & (at <= t[last])]
    return mine if len(mine) else rows


def align(names: list[int], template: Template) -> list[int]:
    """Template position per kernel name (NONE when the template lacks the name), greedy in launch order."""
    out: list[int] = []
    expect = 0
    positions = template.positions
    for name in names:
        pos = positions.get(name)
        if pos is None:
            out.append(NONE)
            continue
        k = bisect.bisect_left(pos, expect)
        j = pos[k] if k < len(pos) else pos[0]  # none left in this step: the next step began
        out.append(j)
        expect = j + 1
    return out


def stream_view(analysis: Analysis, stream: Table | None = None, total_rows: int | None = None) -> StreamView:
    trace = analysis.trace
    stream = trace.stream if stream is None else stream
    n = len(stream)
    template_row = np.full(n, NONE, dtype=np.int64)
    confirmed = np.zeros(n, dtype=bool)
    tmpl = templates(analysis)
    order = sorted(tmpl)
    segments: list[Segment] = []
    for after in np.unique(stream.after_window).tolist() if n else []:
        rows = np.nonzero(stream.after_window == after)[0]
        rows = rows[np.argsort(stream.correlation[rows], kind="stable")]
        before = [w for w in order if w <= after]
        later = [w for w in order if w > after]
        t = tmpl[before[-1]] if before else tmpl[later[0]] if later else None
        if t is not None:
            pos = np.asarray(align(stream.name[rows].tolist(), t), dtype=np.int64)
            hit = pos >= 0
            template_row[rows[hit]] = t.rows[pos[hit]]
            nxt = tmpl[later[0]] if later and later[0] != t.window else None
            if nxt is not None:
                p = pos[hit]
                same = p < len(nxt.names)
                agree = np.zeros(len(p), dtype=bool)
                agree[same] = nxt.names[p[same]] == t.names[p[same]]
                confirmed[rows[hit]] = agree
        ends = stream.start_ns[rows] + stream.dur_ns[rows]
        start, end, busy = int(stream.start_ns[rows].min()), int(ends.max()), int(stream.dur_ns[rows].sum())
        segments.append(Segment(int(after), rows, start, end, busy))
    hit = template_row >= 0
    line = np.full(n, NONE, dtype=np.int64)
    regime = np.full(n, -1, dtype=np.int8)
    if hit.any():
        line[hit] = analysis.links.kernel_line[template_row[hit]]
        regime[hit] = analysis.kernel_regime[template_row[hit]]
    total = trace.stream_total if total_rows is None else total_rows
    return StreamView(stream, template_row, line, regime, confirmed, segments, total)
