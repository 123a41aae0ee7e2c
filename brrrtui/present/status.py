"""The header's status line and telemetry line."""

from __future__ import annotations

import math
import os
import signal
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any

import numpy as np

from analyzers.cost.peaks import datasheet_spec
from analyzers.phases.run_phases import Phase
from analyzers.results import Analysis
from brrrtui.contract.units import NA, fmt_flops, fmt_mem, fmt_ns
from brrrtui.present.snapshot import Snapshot
from brrrtui.present.sparkline import spark
from brrrtui.present.units import fmt_elapsed

Span = tuple[str, str]

CYCLE = (Phase.STEADY, Phase.WARMUP, Phase.SETUP)  # the order the phase key steps through
PHASE_KEY = "P"
PHASE_NAMES = {Phase.SETUP: "set-up", Phase.WARMUP: "warm-up", Phase.STEADY: "steady"}


@dataclass(frozen=True)
class PhaseView:
    """Which phase the verdicts on screen come from, and what else the run has to show."""

    shown: Phase
    windows: tuple[tuple[Phase, int], ...]  # (phase, windows recorded in it) for every phase that has some
    steps: int
    steady_from_step: int | None
    steady_step_ns: float | None  # the median steady step, or the mean where the host runs ahead
    picked: bool = False  # chosen with the phase key, not the automatic choice
    new: tuple[tuple[Phase, int], ...] = ()  # windows recorded in other phases since the pick
    host_ahead: bool = False  # the host runs ahead of a GPU-bound loop: its steps are the mean's

    def count(self, phase: Phase) -> int:
        return dict(self.windows).get(phase, 0)


def phases_with_windows(a: Analysis) -> list[Phase]:
    """The phases the phase key steps through: those with at least one window, steady first."""
    if a.phases is None or a.phases.run.steps == 0:
        return []
    return [p for p in CYCLE if a.phases.windows_in(p)]


def lead_phase(a: Analysis) -> Phase | None:
    """The phase an analysis without a pick shows (the steady state when it has a window)."""
    return a.phases.lead()[0] if a.phases is not None else None


def next_phase(a: Analysis) -> Phase | None:
    """The phase after the shown one, among those with windows; None when there is no other."""
    have = phases_with_windows(a)
    if len(have) < 2:
        return None
    k = have.index(a.phase) if a.phase in have else -1
    return have[(k + 1) % len(have)]


def phase_view(
    a: Analysis, picked: bool = False, seen: Mapping[Phase, int] | None = None
) -> PhaseView | None:
    """The header's phase, or None when the analysis has no phases (a stand-in analysis). `seen`: windows per
    phase when the user picked, so the header can say what arrived since."""
    if a.phases is None:
        return None
    run = a.phases.run
    windows = tuple((p, len(a.phases.windows_in(p))) for p in CYCLE if a.phases.windows_in(p))
    new: tuple[tuple[Phase, int], ...] = ()
    if picked and seen is not None:
        new = tuple((p, n - seen.get(p, 0)) for p, n in windows if p is not a.phase and n > seen.get(p, 0))
    return PhaseView(
        a.phase, windows, run.steps, run.steady_from_step, a.real_step_ns, picked, new, a.host_ahead
    )


def phase_text(v: PhaseView) -> str:
    """`steady state · from step 6 of 200 · 58 ms/step`, `warm-up only — no steady-state window`, …"""
    if v.steps == 0:
        return "no optimizer steps: every window analysed"
    if v.shown is Phase.STEADY:
        mean = " (mean: the host runs ahead)" if v.host_ahead else ""
        per = f" · {fmt_ns(v.steady_step_ns)}/step{mean}" if v.steady_step_ns else ""
        return f"steady state · from step {v.steady_from_step} of {v.steps}{per}"
    if v.shown is Phase.WARMUP:
        if not v.count(Phase.STEADY):
            return "warm-up only — no steady-state window"
        return f"warm-up (before step {v.steady_from_step} of {v.steps})"
    if v.shown is Phase.SETUP:
        return "set-up (before the first step)"
    return "windows of several phases"


def phase_hint(v: PhaseView) -> str:
    """How to see the other phases: `P for warm-up, set-up`, `P for steady (1 new), warm-up`; empty when
    none has windows."""
    new = dict(v.new)
    others = [
        f"{PHASE_NAMES[p]}{f' ({new[p]} new)' if new.get(p) else ''}"
        for p, _ in v.windows
        if p is not v.shown
    ]
    return f"{PHASE_KEY} for {', '.join(others)}" if others else ""


def phase_spans(v: PhaseView | None, following: bool = False) -> list[Span]:
    """The header's phase. `following`: a live run, whose view moves to the steady state by itself unless the
    user picked a phase (said as "(picked)")."""
    if v is None:
        return []
    spans: list[Span] = [("  " + phase_text(v), "label")]
    if v.picked and following:
        spans.append((" (picked)", "muted"))
    hint = phase_hint(v)
    if hint:
        spans.append(("  " + hint, "advice" if v.new else "muted"))
    return spans


def exit_line(exit_code: int, summary: str = "") -> str:
    """The log's line when the script ends: `script finished, exit 1: ValueError: bad` / `killed by SIGKILL`."""
    how = (
        f"script killed by {signal_name(-exit_code)}"
        if exit_code < 0
        else f"script finished, exit {exit_code}"
    )
    return f"{how}: {summary}" if summary else how


def signal_name(number: int) -> str:
    """SIGTERM for 15; `signal 99` for a number this platform does not name."""
    try:
        return signal.Signals(number).name
    except ValueError:
        return f"signal {number}"


@dataclass(frozen=True)
class Loading:
    """Before the first analysis of a file: reading it (`read_bytes` of `size_bytes` when the reader's file
    position shows it), then analysing `events` events. `elapsed_s` since the UI started."""

    stage: str  # "reading" | "analysing"
    elapsed_s: float
    size_bytes: int | None = None
    read_bytes: int | None = None
    events: int | None = None


def loading_text(ld: Loading) -> str:
    if ld.stage == "reading":
        size = f" {fmt_mem(ld.size_bytes)}" if ld.size_bytes else ""
        done = ""
        if ld.read_bytes and ld.size_bytes:
            done = f" {min(ld.read_bytes / ld.size_bytes, 1.0):.0%} of"
        return f"reading{done}{size}… {ld.elapsed_s:.1f} s"
    events = f" {ld.events:,} events" if ld.events is not None else ""
    return f"analysing{events}… {ld.elapsed_s:.1f} s"


@dataclass(frozen=True)
class RunState:
    """What the header says about the run. Live: updated from feed events; view: read from the recording."""

    name: str  # the script, or the file being viewed
    live: bool
    running: bool = False
    exit_code: int | None = None
    steps: int | None = None  # optimizer steps completed (None: unknown)
    windows: int = 0
    elapsed_s: float | None = None
    paused: bool = False
    analysing: bool = False
    device: str | None = None
    error: str | None = None
    phase: PhaseView | None = None  # the phase the verdicts on screen come from
    loading: Loading | None = None  # a file being read and analysed, before its first analysis
    rank: str | None = None  # "rank 1 of 2": the rank of a distributed run on screen
    ended: str | None = None  # view: how the recorded run ended, when not plainly (meta `status`)

    def with_(self, **kw: object) -> RunState:
        return replace(self, **kw)  # type: ignore[arg-type]


def state_after_analysis(state: RunState, snap: Snapshot, phase: PhaseView | None = None) -> RunState:
    """The run state once an analysis is shown. A finished recording states its own windows (of every phase),
    steps, exit code and wall time; live, the feed's counts stand unless the analysis has seen more. `phase`:
    what the header says of the phase shown (default: the automatic choice's)."""
    trace = snap.trace
    a = snap.analysis
    recorded = len(a.phases.windows) if a.phases is not None else len(snap.windows)
    kw: dict[str, object] = {"error": None, "device": trace.device.name, "phase": phase or phase_view(a)}
    kw["loading"] = None
    kw["rank"] = rank_label(trace.meta)
    if not state.live:
        meta = trace.meta
        kw["windows"] = recorded
        kw["steps"] = len(trace.steps) if len(trace.steps) else (snap.analysis.steps_analysed or None)
        kw["exit_code"] = meta.get("exit_code")
        kw["ended"] = ended_text(meta.get("status"))
        t0, t1 = meta.get("started_at_ns"), meta.get("ended_at_ns")
        if isinstance(t0, int) and isinstance(t1, int):
            kw["elapsed_s"] = (t1 - t0) / 1e9
    else:
        kw["windows"] = max(state.windows, recorded)
        if state.steps is None and len(trace.steps):
            kw["steps"] = len(trace.steps)
    return state.with_(**kw)


STATUS_CHARS = 80  # of a recorded status shown in the header


def ended_text(status: object) -> str | None:
    """A recording's `status` for the header when it says more than "finished" (an exception, a signal, an
    exit code, a write error, an incomplete file); None for a plain or missing one."""
    if not isinstance(status, str) or status in ("finished", "running", ""):
        return None
    return status if len(status) <= STATUS_CHARS else status[: STATUS_CHARS - 1] + "…"


def rank_label(meta: dict[str, Any]) -> str | None:
    """`rank 1 of 2` for a rank of a distributed run (meta `rank_set` of brrrtui.recording.ranks), else None;
    the other ranks are side by side in `brrrtui report`."""
    rank_set = meta.get("rank_set")
    if not isinstance(rank_set, dict) or not isinstance(rank_set.get("files"), dict):
        return None
    shown = rank_set.get("shown")
    return f"rank {shown} of {len(rank_set['files'])}" if isinstance(shown, int) else None


ROOF_NAMES = {"tensor_flops_per_s": "tensor", "fp32_flops_per_s": "fp32"}  # Peaks' FLOP roofs as the text names them


def raised_roof_why(a: Analysis, field: str) -> str | None:
    """Why FLOP roof `field` of the analysis's peaks is what it is when a kernel of the run raised it:
    "reached by a GEMM of this run; the calibration gave 667 TFLOP/s"; None when it was not raised."""
    before = dict(a.peaks.raised_from).get(field)
    if before is None:
        return None
    recorded, spec = a.trace.peaks, datasheet_spec(a.trace.device.name)
    if recorded is not None and recorded.source == "measured" and getattr(recorded, field) == before:
        origin = "the calibration gave"
    elif spec is not None and getattr(spec, field) == before:
        origin = "the datasheet gives"
    else:
        origin = "it was"
    return f"reached by a GEMM of this run; {origin} {fmt_flops(before)}"


def opening_lines(snap: Snapshot, path: str | None, file_notes: Sequence[str] = ()) -> list[str]:
    """What the log says when the first analysis is shown: what was read, each FLOP roof a kernel of the run
    raised and why, what the reader should know about the file itself (`file_notes`: incomplete, a rank of a
    run, the job's notes), the analysis's notes."""
    a, trace = snap.analysis, snap.trace
    name = os.path.basename(trace.source or path or "")
    windows = f"{len(snap.windows)} window(s)"
    if a.phases is not None and a.phase in PHASE_NAMES:
        windows = f"{len(snap.windows)} {PHASE_NAMES[a.phase]} window(s) of {len(a.phases.windows)}"
    raised = [
        f"{ROOF_NAMES[f]} roof {fmt_flops(getattr(a.peaks, f))}: {why}"
        for f in ROOF_NAMES
        if (why := raised_roof_why(a, f))
    ]
    return [
        f"{name}: {len(trace.gpu):,} GPU activities in {windows}, "
        f"{a.steps_analysed} step(s) analysed; roofs from {a.peaks.source}",
        *raised,
        *file_notes,
        *a.notes,
    ]


def status_spans(s: RunState) -> list[Span]:
    spans: list[Span] = [("brrrtui ", "title"), (s.name, "name"), ("  ", "")]
    if s.rank:
        spans.append((f"{s.rank}  ", "label"))
    if s.live and s.running:
        spans.append(("▶ running", "running"))
    elif s.live and s.exit_code is not None and s.exit_code < 0:
        spans.append((f"■ killed by {signal_name(-s.exit_code)}", "failed"))
    elif s.live and s.exit_code is not None:
        spans.append((f"■ finished, exit {s.exit_code}", "ok" if s.exit_code == 0 else "failed"))
    elif s.live:
        spans.append(("■ stopped", "muted"))
    elif s.ended:
        spans.append((f"▣ recording: {s.ended}", "failed"))
    else:
        spans.append(("▣ recording" if s.exit_code is None else f"▣ recording, exit {s.exit_code}", "muted"))
    if s.elapsed_s is not None:
        spans.append((f" {fmt_elapsed(s.elapsed_s)}", "muted"))
    spans.append((f"  steps {s.steps if s.steps is not None else NA}", "label"))
    spans.append((f"  windows {s.windows}", "label"))
    if s.paused:
        spans.append(("  ⏸ PAUSED", "paused"))
    if s.error:
        spans.append((f"  {s.error}", "failed"))
    spans += phase_spans(s.phase, following=s.live and s.running)
    if s.loading is not None:
        spans.append((f"  {loading_text(s.loading)}", "running"))
    elif s.analysing:
        spans.append(("  analysing…", "muted"))
    if s.device:
        spans.append((f"  {s.device}", "muted"))
    return spans


@dataclass(frozen=True)
class Metric:
    label: str
    values: np.ndarray
    lo: float | None
    hi: float | None
    fmt: str  # "pct", "bytes", "watts", "mhz"


def _fmt(x: float, kind: str) -> str:
    if math.isnan(x):
        return NA
    if kind == "pct":
        return f"{x:.0f}%"
    if kind == "bytes":
        return fmt_mem(x)
    if kind == "watts":
        return f"{x:.0f} W"
    return f"{x:.0f} MHz"


def telemetry_metrics(
    t_ns: np.ndarray,
    util: np.ndarray,
    mem: np.ndarray,
    power: np.ndarray,
    sm_mhz: np.ndarray,
    mem_total_bytes: float | None = None,
) -> list[Metric]:
    del t_ns  # samples are evenly spaced by the recorder; kept for a future time axis
    return [
        Metric("util", util, 0.0, 100.0, "pct"),
        Metric("mem", mem, 0.0, mem_total_bytes, "bytes"),
        Metric("power", power, 0.0, None, "watts"),
        Metric("SM", sm_mhz, 0.0, None, "mhz"),
    ]


def telemetry_spans(metrics: list[Metric], width: int) -> list[Span]:
    """`util ▁▃▇█ 98%  mem ▃▃▄ 41.2 GiB  power ▅▆ 612 W  SM ▇▇ 1980 MHz`, sparklines sized to fit `width`."""
    if not metrics or all(len(m.values) == 0 for m in metrics):
        return [("no GPU telemetry in this recording", "muted")]
    texts = []
    for m in metrics:
        finite = m.values[np.isfinite(m.values)] if len(m.values) else m.values
        last = float(finite[-1]) if len(finite) else float("nan")
        texts.append((m, _fmt(last, m.fmt)))
    fixed = sum(len(m.label) + 1 + 1 + len(v) + 2 for m, v in texts)
    cells = max(0, min(24, (width - fixed) // len(texts)))
    spans: list[Span] = []
    for m, v in texts:
        spans.append((m.label + " ", "label"))
        if cells >= 3:
            spans.append((spark(m.values, cells, m.lo, m.hi) + " ", "spark"))
        spans.append((v + "  ", "value"))
    return spans
