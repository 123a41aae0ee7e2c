"""The edges of a capture window: the profiler's stop at its end, which holds no work of the script.

A recorded window's closing stall is cut from its span (brrrtui knows how long it lasted); a foreign trace's
empty tail is only flagged in a note.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace

import numpy as np

from analyzers.arrays import window_max
from analyzers.results import GAP_CAUSE_CODES, GapCause
from brrrtui.contract.model import Table, Trace, WindowMode, flag_of
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
    cuts: list[tuple[int, int]] = []  # (window, ns cut)
    columns = (w.window, w.mode, w.start_ns, w.end_ns, w.stall_ns, last)
    for i, (win, mode, lo, hi, stall, mine) in enumerate(zip(*(c.tolist() for c in columns), strict=True)):
        if mode == WindowMode.FOREIGN or stall <= 0:
            continue
        last_end = mine if mine != np.iinfo(np.int64).min else lo
        cut = min(max(0, hi - max(last_end, lo)), stall)
        if cut > 0:
            new_end[i] = hi - cut
            cuts.append((win, cut))
    if not cuts:
        return trace, []
    cols = dict(w.columns)
    cols["end_ns"] = new_end
    wins, ns = (list(c) for c in zip(*cuts, strict=True))
    if len(cuts) == 1:
        note = f"window {wins[0]}: left out its last {fmt_ns(ns[0])}, the profiler stopping (nothing ran)"
    else:  # one note for every window (a long run has a hundred)
        note = (
            f"{len(wins)} windows ({window_ids_text(wins)}): left out the last {_span(ns)} of each, the profiler"
            " stopping (nothing ran)"
        )
    return replace(trace, windows=Table(cols)), [note]


def tail_notes(trace: Trace, gaps: Table) -> list[str]:
    """Flag the windows whose end holds no GPU work and no CPU operator: a foreign trace's profiler stop."""
    if not len(gaps) or not len(trace.windows):
        return []
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
    tails: list[tuple[int, int, float]] = []  # (window, ns, share of the window)
    columns = (w.window, w.start_ns, w.end_ns, count, tail_ns)
    for win, lo, hi, n, total in zip(*(c.tolist() for c in columns), strict=True):
        if n:
            idle = int(total)
            if hi > lo and idle > 0.1 * (hi - lo):
                tails.append((win, idle, idle / (hi - lo)))
    if not tails:
        return []
    wins, ns, share = (list(c) for c in zip(*tails, strict=True))
    what = "hold no GPU work and no CPU operator (the profiler stopping?); they count as overhead"
    if len(tails) == 1:
        return [f"window {wins[0]}: its last {fmt_ns(ns[0])} ({fmt_pct(share[0])}) {what}"]
    pct = _span(share, fmt_pct)
    return [f"{len(wins)} windows ({window_ids_text(wins)}): the last {_span(ns)} ({pct}) of each {what}"]


def window_ids_text(ids: list[int]) -> str:
    """`1–49`, `0, 2, 4–7`: window ids in order, each run of consecutive ones as a range."""
    return ", ".join(id_ranges(ids))


def id_ranges(ids: list[int]) -> list[str]:
    """`["0", "2", "4–7"]`: ids in order, each run of consecutive ones as one range."""
    runs: list[list[int]] = []
    for i in ids:
        if runs and i == runs[-1][1] + 1:
            runs[-1][1] = i
        else:
            runs.append([i, i])
    return [str(a) if a == b else f"{a}–{b}" for a, b in runs]


def _span(values: list[int] | list[float], fmt: Callable[[float], str] = fmt_ns) -> str:
    """`50 µs`, or `12 µs–1.30 ms` where they differ (as written)."""
    lo, hi = fmt(min(values)), fmt(max(values))
    return lo if lo == hi else f"{lo}–{hi}"
