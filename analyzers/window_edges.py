"""The edges of a capture window: the profiler's stop at its end, which holds no work of the script.

A recorded window's closing stall is cut from its span (brrrtui knows how long it lasted); a foreign trace's
empty tail is only flagged in a note.
"""

from __future__ import annotations

from dataclasses import replace

import numpy as np

from analyzers.arrays import window_max
from analyzers.model import Table, Trace, WindowMode, flag_of
from analyzers.results import GAP_CAUSE_CODES, GapCause
from brrrtui.contract.units import fmt_ns, fmt_pct


def trim_close_stalls(trace: Trace) -> tuple[Trace, list[str]]:
    """Leave each recorded window's closing stall out of its span.

    brrrtui's recorder stamps a window's end after the profiler has stopped, so its last tens to hundreds of
    ms hold the stop itself: no kernel, launch or operator, and the training thread blocked. It records the
    stall (open + close) as `stall_ns`; the tail after the last recorded activity, up to that stall, is cut::

        window  |....kernels, launches, operators....| profiler stop (stall) |
        kept    |<---------------------------------->|  cut: min(tail, stall_ns)

    Foreign traces carry no stall; their tail is only flagged (see tail_notes).
    """
    w = trace.windows
    if not len(w) or not (w.stall_ns > 0).any():
        return trace, []
    ops = trace.ops
    is_real = flag_of(trace.string_flags(lambda s: "::" in s), ops.name)
    op_end = ops.start_ns + ops.dur_ns
    last = np.maximum.reduce(
        [
            window_max(trace.gpu.window, trace.gpu.start_ns + trace.gpu.dur_ns, w.window),
            window_max(trace.runtime.window, trace.runtime.start_ns + trace.runtime.dur_ns, w.window),
            window_max(ops.window, np.where(is_real, op_end, np.iinfo(np.int64).min), w.window),
        ]
    )
    del is_real, op_end
    new_end = w.end_ns.copy()
    notes: list[str] = []
    columns = (w.window, w.mode, w.start_ns, w.end_ns, w.stall_ns, last)
    for i, (win, mode, lo, hi, stall, mine) in enumerate(zip(*(c.tolist() for c in columns), strict=True)):
        if mode == WindowMode.FOREIGN or stall <= 0:
            continue
        last_end = mine if mine != np.iinfo(np.int64).min else lo
        cut = min(max(0, hi - max(last_end, lo)), stall)
        if cut > 0:
            new_end[i] = hi - cut
            notes.append(
                f"window {win}: left out its last {fmt_ns(cut)}, the profiler stopping (nothing ran)"
            )
    if not notes:
        return trace, []
    cols = dict(w.columns)
    cols["end_ns"] = new_end
    return replace(trace, windows=Table(cols)), notes


def tail_notes(trace: Trace, gaps: Table) -> list[str]:
    """Flag a window whose end holds no GPU work and no CPU operator: a foreign trace's profiler stop."""
    notes: list[str] = []
    if not len(gaps) or not len(trace.windows):
        return notes
    other = GAP_CAUSE_CODES[GapCause.OTHER]
    w = trace.windows
    order = np.argsort(w.window, kind="stable")
    pos = np.minimum(np.searchsorted(w.window[order], gaps.window), len(order) - 1)
    at = order[pos]  # each gap's window row
    tail = (
        (w.window[at] == gaps.window) & (gaps.start_ns + gaps.dur_ns == w.end_ns[at]) & (gaps.cause == other)
    )
    count = np.bincount(at[tail], minlength=len(w))
    tail_ns = np.bincount(at[tail], weights=gaps.dur_ns[tail], minlength=len(w))  # exact: far below 2**53 ns
    columns = (w.window, w.start_ns, w.end_ns, count, tail_ns)
    for win, lo, hi, n, total in zip(*(c.tolist() for c in columns), strict=True):
        if n:
            ns = int(total)
            if hi > lo and ns > 0.1 * (hi - lo):
                notes.append(
                    f"window {win}: its last {fmt_ns(ns)} ({fmt_pct(ns / (hi - lo))}) hold no GPU work and no"
                    " CPU operator (the profiler stopping?); they count as overhead"
                )
    return notes
