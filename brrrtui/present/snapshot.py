"""Everything the screens draw from, built once per analysis off the UI thread.

The UI never reads a live object: a `Snapshot` is immutable once built (frozen; its tables are shared, not
copied, so nothing may write to them either), and "pause" just means the app keeps showing the one it has.
The one thing it adds to later is the timeline's lanes of the windows not yet shown: each is built the first
time it is asked for (brrrtui.present.lanes_by_window), from the same immutable analysis. The kernel stream
between windows moves faster than the windows: `with_stream` derives a new snapshot that shares the
analysis and replaces only the stream's rows, view and pages.
"""

from __future__ import annotations

import dataclasses
import os
from collections.abc import Mapping
from dataclasses import dataclass, field

import numpy as np

from analyzers.results import Analysis, Finding, KernelStat, LineStat
from analyzers.stream.lines import StreamView, stream_figures, stream_view
from analyzers.totals.lines import by_host_time
from brrrtui.contract.model import SourceLine, Table, Trace
from brrrtui.contract.schema import COMPILED_CALL_PREFIX
from brrrtui.present.lanes import PageKey, WindowLanes, build_stream_lanes, window_ids
from brrrtui.present.lanes_by_window import LanesByWindow


@dataclass(frozen=True)
class Snapshot:
    analysis: Analysis
    windows: list[int]
    lanes: Mapping[int, WindowLanes]  # capture windows' lanes, each built when first asked for
    lines_by_id: dict[int, LineStat]
    lines_by_source: dict[SourceLine, LineStat]
    # user lines by GPU time (+ idle caused), heaviest first; if cpu_only by CPU-side time, as the report
    hot_lines: list[LineStat]
    kernels_by_name: dict[str, KernelStat]
    findings: list[Finding]  # by estimated saving, largest first
    fused_lines: frozenset[SourceLine]
    total_gpu_ns: int
    per_step: bool  # LineStat.per_step_gpu_ns is known
    version: int = 0
    cpu_only: bool = False  # the analysis holds no GPU work: no regimes, no idle; lines by CPU-side time
    search_dirs: tuple[str, ...] = field(default=())
    # the kernel stream between windows (lines and regimes inferred); None: the trace has none
    stream: StreamView | None = None
    stream_lanes: dict[int, WindowLanes] = field(default_factory=dict)  # after_window -> its page
    stream_names: dict[int, str] = field(default_factory=dict)  # strings newer than the analysed trace's
    stream_lines: dict[int, tuple[int, int]] = field(default_factory=dict)  # line id -> (kernels, GPU ns)
    pages: list[PageKey] = field(default_factory=list)  # windows and stream pages, in time order
    # a first look (the newest window alone, brrrtui.session.first_look): the phase's windows being analysed
    first_look: tuple[int, ...] = ()

    @property
    def trace(self) -> Trace:
        return self.analysis.trace

    @property
    def latest_page(self) -> PageKey | None:
        return self.pages[-1] if self.pages else None

    @property
    def default_page(self) -> PageKey | None:
        """The page to open on when not following: the newest capture window (else the newest page)."""
        return PageKey(self.windows[-1]) if self.windows else self.latest_page

    def window_place(self, window: int) -> tuple[int, int]:
        """(k, n): `window` is the k-th of the n windows analysed (of a first look: being analysed); k is n
        for a window not among them."""
        windows = list(self.first_look) or self.windows
        n = len(windows)
        return (windows.index(window) + 1 if window in windows else n), n

    def page_lanes(self, page: PageKey | None) -> WindowLanes | None:
        if page is None:
            return None
        return self.stream_lanes.get(page.window) if page.stream else self.lanes.get(page.window)

    def stream_name(self, sid: int) -> str:
        """The name of a streamed kernel (its string may be newer than the analysed trace)."""
        strings = self.trace.strings
        return strings[sid] if 0 <= sid < len(strings) else self.stream_names.get(sid, "?")

    def stream_rowid(self, row: int) -> int:
        """The recording's rowid of a row of `stream.stream` (the rows held are the newest, contiguous)."""
        assert self.stream is not None
        return self.stream.total_rows - len(self.stream.stream) + 1 + row

    def stream_row(self, rowid: int) -> int | None:
        """The row of `stream.stream` holding a rowid; None when it is not (or no longer) held."""
        if self.stream is None:
            return None
        row = rowid - (self.stream.total_rows - len(self.stream.stream) + 1)
        return row if 0 <= row < len(self.stream.stream) else None

    def kernel_name(self, row: int) -> str:
        return self.trace.name(int(self.trace.gpu.name[row]))

    def op_name(self, sid: int) -> str:
        """An op's name as shown: the capture's scope around a compiled call reads as what it is."""
        name = self.trace.name(sid)
        return "torch.compile'd call" if name.startswith(COMPILED_CALL_PREFIX) else name

    def line_of_kernel(self, row: int) -> LineStat | None:
        lid = int(self.analysis.links.kernel_line[row]) if row >= 0 else -1
        return self.lines_by_id.get(lid)

    def resolve(self, file: str) -> str | None:
        """The path of a source file on this machine, or None. A file below the recording's cwd is looked for
        first below the current directory (a recording copied from the GPU box into a local checkout, or a
        fixture opened from another clone), then where it was recorded; relative paths are tried against the
        recording's cwd, the script's folder and the trace's folder."""
        if os.path.isabs(file):
            cwd = self.trace.meta.get("cwd")
            if isinstance(cwd, str) and file.startswith(cwd.rstrip(os.sep) + os.sep):
                local = os.path.join(os.getcwd(), os.path.relpath(file, cwd))
                if os.path.isfile(local):
                    return local
            return file if os.path.isfile(file) else None
        for d in self.search_dirs:
            p = os.path.join(d, file)
            if os.path.isfile(p):
                return p
        return None


def build_snapshot(analysis: Analysis, script: str | None = None, version: int = 0) -> Snapshot:
    trace = analysis.trace
    windows = window_ids(trace)
    lanes = LanesByWindow(analysis, windows)
    if windows:
        lanes.get(windows[-1])  # the page the view opens on, built here and not on the UI thread
    by_id = {s.line_id: s for s in analysis.lines}
    cpu_only = not analysis.has_gpu
    if cpu_only:  # no GPU work at all (a CPU run, or a trace without kernels): the lines the report lists
        hot = by_host_time(analysis.lines)
    else:
        hot = sorted(
            (s for s in analysis.lines if s.gpu_ns + s.idle_ns > 0), key=lambda s: -(s.gpu_ns + s.idle_ns)
        )
    findings = sorted(analysis.findings, key=lambda f: -(f.saving_ns or 0.0))
    fused = frozenset(ln for f in findings if f.kind == "fusion" for ln in f.lines)
    dirs = []
    cwd = trace.meta.get("cwd")
    if isinstance(cwd, str):
        dirs.append(cwd)
    argv = trace.meta.get("argv")
    if isinstance(argv, list) and argv and isinstance(argv[0], str):
        dirs.append(os.path.dirname(os.path.abspath(argv[0])))
    if script:
        dirs.append(os.path.dirname(os.path.abspath(script)))
    if trace.source:
        dirs.append(os.path.dirname(os.path.abspath(trace.source)))
    dirs.append(os.getcwd())
    snap = Snapshot(
        analysis=analysis,
        windows=windows,
        lanes=lanes,
        lines_by_id=by_id,
        lines_by_source={s.line: s for s in analysis.lines},
        hot_lines=hot,
        kernels_by_name={k.name: k for k in analysis.kernels},
        findings=findings,
        fused_lines=fused,
        total_gpu_ns=int(np.sum(trace.gpu.dur_ns)) if len(trace.gpu) else 0,
        per_step=any(s.per_step_gpu_ns is not None for s in analysis.lines),
        version=version,
        cpu_only=cpu_only,
        search_dirs=tuple(dict.fromkeys(dirs)),
        pages=[PageKey(w) for w in windows],
    )
    if len(trace.stream):
        snap = with_stream(snap, trace.stream, trace.stream_total)
    return snap


def with_stream(
    snap: Snapshot, rows: Table, total_rows: int, names: dict[int, str] | None = None
) -> Snapshot:
    """`snap` with the stream replaced by `rows` (the newest of the recording's `total_rows`): lines and
    regimes re-inferred, stream pages rebuilt; the analysis, windows and window pages are shared."""
    view = stream_view(snap.analysis, rows, total_rows)
    stream_lanes = {seg.after_window: build_stream_lanes(view, seg) for seg in view.segments}
    pages = sorted([PageKey(w) for w in snap.windows] + [PageKey(w, True) for w in stream_lanes])
    # per line, the rows held raw and the folded aggregates (the whole run when the recorder folded)
    stream_lines = {s.line: (s.kernels, s.gpu_ns) for s in stream_figures(view).lines}
    return dataclasses.replace(
        snap,
        stream=view,
        stream_lanes=stream_lanes,
        stream_names=dict(names if names is not None else snap.stream_names),
        stream_lines=stream_lines,
        pages=pages,
    )
