"""Each capture window's timeline lanes, built the first time the window is asked for.

The timeline shows one window at a time, while a recording can hold dozens: the 49 windows of a 1 M-kernel
recording hold ~217 MiB of lanes and took ~0.5 s to build, all before the first analysis reached the screen.
A snapshot builds the window it opens on; another window is built when the user (or a details pane) first
needs it, in ~5 ms. The KEEP windows asked for last are kept (a view that pages through every window of that
recording would otherwise hold all 217 MiB); one asked for again after that is built again. What every
window's lanes need (which ops waited for the GPU, each table's rows per window) is found once, when the
first window is built.

A snapshot is shared by the UI thread and the workers: the one lock makes a window built once while it is
kept, whoever asks first; the inputs (the analysis) are immutable.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Iterator, Mapping

import numpy as np

from analyzers.arrays import rows_per_window
from analyzers.results import Analysis
from brrrtui.present.lanes import WindowLanes, WindowRows, as_rows, build_lanes, op_sync

# Windows whose lanes stay built: the one shown, the pages the user steps back and forth between, and those a
# details pane looks up. ~4.4 MiB a window of 20 k kernels.
KEEP = 8


class LanesByWindow(Mapping[int, WindowLanes]):
    """window id -> WindowLanes for `windows` (the keys, in their order), each built on first access; the
    `keep` asked for last stay built."""

    def __init__(self, analysis: Analysis, windows: list[int], keep: int = KEEP):
        self._analysis = analysis
        self._windows = list(windows)
        self._position = {w: k for k, w in enumerate(self._windows)}
        self._keep = max(keep, 1)
        self._lock = threading.Lock()
        self._built: OrderedDict[int, WindowLanes] = OrderedDict()  # the last asked for last
        self._shared: tuple[np.ndarray, list[list[slice | np.ndarray]]] | None = None

    def __getitem__(self, window: int) -> WindowLanes:
        k = self._position[window]  # KeyError for a window the snapshot does not have
        with self._lock:
            lanes = self._built.get(window)
            if lanes is None:
                sync, per_table = self._inputs()
                rows: WindowRows = tuple(as_rows(table[k]) for table in per_table)  # type: ignore[assignment]
                lanes = self._built[window] = build_lanes(self._analysis, window, sync, rows)
                if len(self._built) > self._keep:
                    self._built.popitem(last=False)
            else:
                self._built.move_to_end(window)
        return lanes

    def __contains__(self, window: object) -> bool:  # without building it (Mapping's would)
        return window in self._position

    def __iter__(self) -> Iterator[int]:
        return iter(self._windows)

    def __len__(self) -> int:
        return len(self._windows)

    def built(self) -> list[int]:
        """The windows whose lanes are built and kept, in window order."""
        with self._lock:
            return [w for w in self._windows if w in self._built]

    def _inputs(self) -> tuple[np.ndarray, list[list[slice | np.ndarray]]]:
        """Which ops waited for the GPU, and the gpu, op and gap rows of every window (one search of each
        table, kept as slices where the table is in window order). Called under the lock."""
        if self._shared is None:
            a = self._analysis
            columns = (a.trace.gpu.window, a.trace.ops.window, a.gaps.window)
            self._shared = op_sync(a), [rows_per_window(c, self._windows) for c in columns]
        return self._shared
