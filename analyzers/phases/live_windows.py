"""A live analysis at a flat cost per new window: which windows it takes, and their rows without a scan.

A live view gains a capture window every half minute or so, for hours. Analysing every window of the phase
on screen costs more with each window (~14 µs per kernel: a hundred windows of 25 k events take seconds per
new window on a small machine). So, while the script runs, a live analysis takes the newest `LIVE_WINDOWS`
windows of the phase shown (`live_windows`), and once it has ended all of them, as `brrrtui report` does.

The trace a live view holds grows by appending (brrrtui.recording.follow): a `WindowIndex` fed it after each
read learns the row ranges of each window from the rows appended since (each window's rows are one range per
batch), so cutting the chosen windows out costs their rows, not the recording's. The analysis of the cut is
the analysis of the whole trace restricted to the same windows::

    analyze(index.cut(trace, chosen), windows=chosen) == analyze(trace, windows=chosen)
    analyze(index.cut(trace, every window of the lead phase)) == analyze(trace)

The steps, windows, telemetry and capture-cost tables stay whole in the cut: phases are judged on the run's
steps and every window (tests/test_incremental.py).
"""

from __future__ import annotations

from dataclasses import replace

import numpy as np

from analyzers.analyze import choose_windows
from analyzers.phases.run_phases import Phase, TracePhases
from brrrtui.contract.model import Trace

LIVE_WINDOWS = 8  # windows of the phase shown that a live analysis takes while the script runs
ROW_TABLES = ("gpu", "runtime", "ops", "spans", "line_samples")  # the tables cut by window


class WindowIndex:
    """Row ranges of every capture window in the window tables of a trace that grows by appending rows."""

    def __init__(self) -> None:
        self.seen = dict.fromkeys(ROW_TABLES, 0)
        self.ranges: dict[str, dict[int, list[tuple[int, int]]]] = {t: {} for t in ROW_TABLES}

    def add(self, trace: Trace) -> None:
        """Index the rows past those seen (a trace with fewer rows than seen adds nothing)."""
        for name in ROW_TABLES:
            table = getattr(trace, name)
            lo, n = self.seen[name], len(table)
            if n <= lo:
                continue
            w = np.asarray(table.window[lo:n])
            cuts = np.flatnonzero(w[1:] != w[:-1]) + 1
            starts = np.concatenate(([0], cuts))
            ends = np.concatenate((cuts, [len(w)]))
            by_window = self.ranges[name]
            for win, a, b in zip(
                w[starts].tolist(), (starts + lo).tolist(), (ends + lo).tolist(), strict=True
            ):
                runs = by_window.setdefault(int(win), [])
                if runs and runs[-1][1] == a:
                    runs[-1] = (runs[-1][0], b)
                else:
                    runs.append((a, b))
            self.seen[name] = n

    def rows(self, name: str, windows: list[int], n: int) -> np.ndarray:
        """The rows of `windows` in table `name`, in row order, below `n` (the rows the trace at hand has)."""
        spans = sorted(r for w in windows for r in self.ranges[name].get(w, ()))
        parts = [np.arange(a, min(b, n), dtype=np.int64) for a, b in spans if a < n]
        return np.concatenate(parts) if parts else np.empty(0, dtype=np.int64)

    def cut(self, trace: Trace, windows: list[int]) -> Trace:
        """`trace` with only the rows of `windows` in its window tables (the rows select_windows keeps)."""
        tables = {n: getattr(trace, n) for n in ROW_TABLES}
        cut = {n: t.take(self.rows(n, windows, len(t))) for n, t in tables.items()}
        return replace(trace, _ids=None, **cut)


def live_windows(phases: TracePhases, phase: Phase | None, keep: int | None) -> tuple[list[int], int]:
    """The windows a live analysis takes: of `phase` (None: the phase the run leads with), the newest `keep`
    of them (None: all). Returns them, oldest first, and how many the phase has."""
    _, windows = choose_windows(phases, None, phase)
    ordered = sorted(windows)
    return (ordered if keep is None else ordered[-keep:]), len(ordered)


def bounded_note(taken: list[int], total: int, phase: Phase) -> str:
    """What an analysis of the newest windows only says about the windows it left out."""
    label = phase.label if phase is not Phase.UNKNOWN else "recorded"
    return (
        f"live: the newest {len(taken)} of {total} {label} windows are analysed (windows {taken[0]}–{taken[-1]});"
        " all of them once the script ends, and in brrrtui report"
    )
