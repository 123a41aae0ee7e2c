"""The header's status line and telemetry line."""

from __future__ import annotations

import math
import os
from dataclasses import dataclass, replace

import numpy as np

from brrrtui.contract.units import NA, fmt_mem
from brrrtui.present.snapshot import Snapshot
from brrrtui.present.sparkline import spark
from brrrtui.present.units import fmt_elapsed

Span = tuple[str, str]


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

    def with_(self, **kw: object) -> RunState:
        return replace(self, **kw)  # type: ignore[arg-type]


def state_after_analysis(state: RunState, snap: Snapshot) -> RunState:
    """The run state once an analysis is shown. A finished recording states its own windows, steps, exit code
    and wall time; live, the feed's counts stand unless the analysis has seen more."""
    trace = snap.trace
    kw: dict[str, object] = {"error": None, "device": trace.device.name}
    if not state.live:
        meta = trace.meta
        kw["windows"] = len(snap.windows)
        kw["steps"] = len(trace.steps) if len(trace.steps) else (snap.analysis.steps_analysed or None)
        kw["exit_code"] = meta.get("exit_code")
        t0, t1 = meta.get("started_at_ns"), meta.get("ended_at_ns")
        if isinstance(t0, int) and isinstance(t1, int):
            kw["elapsed_s"] = (t1 - t0) / 1e9
    else:
        kw["windows"] = max(state.windows, len(snap.windows))
        if state.steps is None and len(trace.steps):
            kw["steps"] = len(trace.steps)
    return state.with_(**kw)


def opening_lines(snap: Snapshot, path: str | None) -> list[str]:
    """What the log says when the first analysis is shown: what was read, and the analysis's notes."""
    a, trace = snap.analysis, snap.trace
    name = os.path.basename(trace.source or path or "")
    return [
        f"{name}: {len(trace.gpu):,} GPU activities in {len(snap.windows)} window(s), "
        f"{a.steps_analysed} step(s) analysed; roofs from {a.peaks.source}",
        *a.notes,
    ]


def status_spans(s: RunState) -> list[Span]:
    spans: list[Span] = [("brrrtui ", "title"), (s.name, "name"), ("  ", "")]
    if s.live and s.running:
        spans.append(("▶ running", "running"))
    elif s.live and s.exit_code is not None and s.exit_code < 0:
        spans.append((f"■ killed by signal {-s.exit_code}", "failed"))
    elif s.live and s.exit_code is not None:
        spans.append((f"■ finished, exit {s.exit_code}", "ok" if s.exit_code == 0 else "failed"))
    elif s.live:
        spans.append(("■ stopped", "muted"))
    else:
        spans.append(("▣ recording" if s.exit_code is None else f"▣ recording, exit {s.exit_code}", "muted"))
    if s.elapsed_s is not None:
        spans.append((f" {fmt_elapsed(s.elapsed_s)}", "muted"))
    spans.append((f"  steps {s.steps if s.steps is not None else NA}", "label"))
    spans.append((f"  windows {s.windows}", "label"))
    if s.device:
        spans.append((f"  {s.device}", "muted"))
    if s.paused:
        spans.append(("  ⏸ PAUSED", "paused"))
    if s.analysing:
        spans.append(("  analysing…", "muted"))
    if s.error:
        spans.append((f"  {s.error}", "failed"))
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
