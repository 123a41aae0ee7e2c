"""Everything the screens draw from, built once per analysis off the UI thread.

The UI never reads a live object: a `Snapshot` is immutable once built, and "pause" just means the app keeps
showing the one it has.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field

import numpy as np

from analyzers.model import SourceLine, Trace
from analyzers.results import Analysis, Finding, KernelStat, LineStat
from analyzers.userfiles import is_user_file
from brrrtui.render.lanes import WindowLanes, build_lanes, window_ids


@dataclass
class Snapshot:
    analysis: Analysis
    windows: list[int]
    lanes: dict[int, WindowLanes]
    lines_by_id: dict[int, LineStat]
    lines_by_source: dict[SourceLine, LineStat]
    hot_lines: list[
        LineStat
    ]  # user lines by GPU time (+ idle caused), heaviest first; by CPU time if cpu_only
    kernels_by_name: dict[str, KernelStat]
    findings: list[Finding]  # by estimated saving, largest first
    fused_lines: frozenset[SourceLine]
    total_gpu_ns: int
    per_step: bool  # LineStat.per_step_gpu_ns is known
    version: int = 0
    cpu_only: bool = False  # the analysis holds no GPU work
    search_dirs: tuple[str, ...] = field(default=())

    @property
    def trace(self) -> Trace:
        return self.analysis.trace

    @property
    def latest_window(self) -> int | None:
        return self.windows[-1] if self.windows else None

    def kernel_name(self, row: int) -> str:
        return self.trace.name(int(self.trace.gpu.name[row]))

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
    lanes = {w: build_lanes(analysis, w) for w in windows}
    by_id = {s.line_id: s for s in analysis.lines}
    hot = sorted(
        (s for s in analysis.lines if s.gpu_ns + s.idle_ns > 0), key=lambda s: -(s.gpu_ns + s.idle_ns)
    )
    cpu_only = not hot
    if cpu_only:  # no GPU work at all (a CPU run, or a trace without kernels): rank the lines by CPU time
        hot = sorted(
            (s for s in analysis.lines if s.cpu_ns > 0 and is_user_file(s.line.file)), key=lambda s: -s.cpu_ns
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
    return Snapshot(
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
    )
