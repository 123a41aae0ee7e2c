"""A recording as a Chrome / Perfetto trace (`brrrtui export --perfetto OUT.json RUN.brrr`).

The document opens in ui.perfetto.dev and chrome://tracing, and `brrrtui view`/`report` read it back with the
same verdicts. What it holds::

    process "GPU <device>"  one thread per CUDA stream: kernels (cat "kernel,<regime>", coloured by `cname`,
                            args: regime, line, FLOPs, bytes, rates), copies and memsets; a thread "GPU idle"
                            with each device-wide idle gap (cat "gpu_idle", its cause and line); a thread per
                            stream of kernels streamed between windows (cat "kernel_stream", no regime);
                            counter tracks of the recorder's telemetry (utilisation, memory, power, clock)
    process "CPU ..."       per thread: the user's lines as Python frames (`file(line): function`), torch
                            operators (cat "cpu_op", with shapes), CUDA runtime calls; flows (cat "ac2g") from
                            each launch to its kernel; a thread "windows" (each capture window and its phase)
                            and a thread "steps" (every optimizer step of the run)

`cname` is the colour chrome://tracing (Catapult) paints a slice: compute green, memory yellow, overhead red.
Perfetto's UI colours slices by name and ignores `cname` by design (google/perfetto issues 208 and 620): there a
thread "stream N: regime" under each stream repeats its kernels as slices named `compute`, `memory` or
`overhead` (cat "gpu_regime"), one colour each, and the regime is also the kernel's category's second part and
`args.regime`, for its search and SQL (`select sum(dur) from slice where category = 'kernel,memory'`).

The top-level `brrrtui` object carries what a Chrome trace has no event for (the recording's windows, its
step times, measured ceilings, line samples, telemetry rows); trace viewers ignore it and brrrtui's loader
(brrrtui/recording/chrome_extras.py) restores it, which is what makes the round trip exact.
Times are microseconds after `baseTimeNanoseconds` (the earliest event), so a float keeps every ns.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

import numpy as np

from analyzers.model import NONE, GpuKind, Trace
from analyzers.results import GAP_CAUSE_CODES, REGIMES_BY_CODE, Analysis, Regime
from brrrtui.present.perfetto_block import (
    GPU_PID,
    IDLE_TID,
    STEPS_TID,
    WINDOWS_TID,
    block,
    device_props,
    names,
    num,
)

STREAM_TID = 2_000_000_000  # + stream: kernels streamed between windows
REGIME_TID = 3_000_000_000  # + stream: the stream's regime band (one slice per kernel, named by its regime)
# Chrome's reserved colour names (trace-viewer's color_scheme): compute green, memory yellow, overhead red,
# communication (collectives) blue
COLOURS = {
    Regime.COMPUTE: "good",
    Regime.MEMORY: "yellow",
    Regime.OVERHEAD: "terrible",
    Regime.COMMUNICATION: "rail_load",
}
IDLE_COLOUR = "grey"
CAUSES = {code: cause.value for cause, code in GAP_CAUSE_CODES.items()}
TELEMETRY = (
    ("gpu_util_pct", "GPU utilisation", "%"),
    ("mem_used_bytes", "GPU memory used", "bytes"),
    ("power_w", "GPU power", "W"),
    ("sm_clock_mhz", "SM clock", "MHz"),
)


@dataclass
class _RowFacts:
    """Per GPU row of the whole trace, gathered from the analyses that cover its window."""

    regime: np.ndarray  # int8 regime code, -1 where no analysis covers the row
    line: np.ndarray  # line id or NONE
    flops: np.ndarray
    bytes: np.ndarray
    flops_rate: np.ndarray
    bytes_rate: np.ndarray
    roof: np.ndarray


def _row_facts(trace: Trace, analyses: Iterable[Analysis]) -> _RowFacts:
    n = len(trace.gpu)
    nan = np.full(n, np.nan)
    facts = _RowFacts(np.full(n, -1, np.int8), np.full(n, NONE, np.int64), *(nan.copy() for _ in range(5)))
    for a in analyses:
        rows = np.nonzero(np.isin(trace.gpu.window, np.asarray(a.windows, dtype=np.int64)))[0]
        if len(rows) != len(a.trace.gpu):
            continue  # not an analysis of this trace's rows
        facts.regime[rows] = a.kernel_regime
        facts.line[rows] = a.links.kernel_line
        facts.flops[rows], facts.bytes[rows] = a.kernel_flops, a.kernel_bytes
        rates = a.kernel_rates()
        if rates is not None:
            facts.flops_rate[rows], facts.bytes_rate[rows], facts.roof[rows] = rates
    return facts


class _Clock:
    def __init__(self, base_ns: int):
        self.base_ns = base_ns

    def us(self, t_ns: int) -> float:
        return round((t_ns - self.base_ns) / 1000.0, 3)


def _shape(trace: Trace, sid: int) -> list[int] | None:
    if sid < 0:
        return None
    try:
        return [int(v) for v in trace.name(sid).split(",")]
    except ValueError:
        return None


def _line_text(trace: Trace, line_id: int) -> str | None:
    if not 0 <= line_id < len(trace.lines):
        return None
    ln = trace.lines[line_id]
    return f"{ln.file}:{ln.line} {ln.function}"


def _gpu_events(trace: Trace, facts: _RowFacts, clock: _Clock) -> list[dict[str, Any]]:
    g = trace.gpu
    out: list[dict[str, Any]] = []
    cats = {GpuKind.MEMCPY: "gpu_memcpy", GpuKind.MEMSET: "gpu_memset"}
    for i in range(len(g)):
        kind = GpuKind(int(g.kind[i]))
        args: dict[str, Any] = {
            "device": int(g.device[i]),
            "stream": int(g.stream[i]),
            "correlation": int(g.correlation[i]),
            "window": int(g.window[i]),
        }
        ev: dict[str, Any] = {
            "ph": "X",
            "name": trace.name(int(g.name[i])),
            "pid": GPU_PID + int(g.device[i]),
        }
        ev |= {"tid": int(g.stream[i]), "ts": clock.us(int(g.start_ns[i])), "dur": int(g.dur_ns[i]) / 1000.0}
        for key, sid in (("grid", int(g.grid[i])), ("block", int(g.block[i]))):
            if (shape := _shape(trace, sid)) is not None:
                args[key] = shape
        if int(g.bytes[i]) >= 0:
            args["bytes"] = int(g.bytes[i])
        code = int(facts.regime[i])
        regime = REGIMES_BY_CODE.get(code)
        ev["cat"] = cats.get(kind, "kernel") + (
            f",{regime.value}" if regime and kind == GpuKind.KERNEL else ""
        )
        if regime is not None:
            args["regime"] = regime.value
            ev["cname"] = COLOURS[regime]
        if (text := _line_text(trace, int(facts.line[i]))) is not None:
            args["line"] = text
        for key, column in (
            ("flops", facts.flops),
            ("bytes_moved", facts.bytes),
            ("achieved_flops_per_s", facts.flops_rate),
            ("achieved_bytes_per_s", facts.bytes_rate),
            ("roof_fraction", facts.roof),
        ):
            if (v := num(float(column[i]))) is not None:
                args[key] = v
        ev["args"] = args
        out.append(ev)
    return out


def _regime_band(trace: Trace, facts: _RowFacts, clock: _Clock) -> list[dict[str, Any]]:
    """Per stream, a track of slices named `compute`, `memory` or `overhead` over each GPU row: Perfetto colours
    slices by name, so this band shows the regimes in three colours where the kernels' own names cannot."""
    g = trace.gpu
    out: list[dict[str, Any]] = []
    for i in np.nonzero(facts.regime >= 0)[0].tolist():
        regime = REGIMES_BY_CODE[int(facts.regime[i])]
        ev: dict[str, Any] = {"ph": "X", "cat": "gpu_regime", "name": regime.value, "cname": COLOURS[regime]}
        ev |= {"pid": GPU_PID + int(g.device[i]), "tid": REGIME_TID + int(g.stream[i])}
        ev |= {"ts": clock.us(int(g.start_ns[i])), "dur": int(g.dur_ns[i]) / 1000.0}
        out.append(ev | {"args": {"kernel": trace.name(int(g.name[i])), "window": int(g.window[i])}})
    return out


def _cpu_events(trace: Trace, pid: int, clock: _Clock) -> list[dict[str, Any]]:
    """Runtime calls, operators and the user's lines, in the shapes torch.profiler writes them."""
    out: list[dict[str, Any]] = []
    rt, ops, spans = trace.runtime, trace.ops, trace.spans
    for i in range(len(rt)):
        out.append(
            _x("cuda_runtime", trace.name(int(rt.name[i])), pid, int(rt.tid[i]), rt, i, clock)
            | {"args": {"correlation": int(rt.correlation[i])}}
        )
    for i in range(len(ops)):
        args: dict[str, Any] = {}
        for key, sid in (("Input Dims", int(ops.shapes[i])), ("Input type", int(ops.dtypes[i]))):
            if sid >= 0:
                args[key] = json.loads(trace.name(sid))
        for key, v in (("Sequence number", int(ops.seq[i])), ("Fwd thread id", int(ops.fwd_tid[i]))):
            if v >= 0:
                args[key] = v
        if (flops := num(float(ops.flops[i]))) is not None:
            args["flops"] = flops
        out.append(
            _x("cpu_op", trace.name(int(ops.name[i])), pid, int(ops.tid[i]), ops, i, clock) | {"args": args}
        )
    for i in range(len(spans)):
        ln = trace.lines[int(spans.line[i])]
        ev = _x(
            "python_function", f"{ln.file}({ln.line}): {ln.function}", pid, int(spans.tid[i]), spans, i, clock
        )
        scope = {
            "module": trace.name(int(spans.module[i])),
            "library_line": _line_text(trace, int(spans.lib_line[i])),
        }
        out.append(ev | {"args": {k: v for k, v in scope.items() if v}})
    return out


def _x(cat: str, name: str, pid: int, tid: int, table: Any, i: int, clock: _Clock) -> dict[str, Any]:
    start, dur = int(table.start_ns[i]), int(table.dur_ns[i])
    return {
        "ph": "X",
        "cat": cat,
        "name": name,
        "pid": pid,
        "tid": tid,
        "ts": clock.us(start),
        "dur": dur / 1000,
    }


def _flows(trace: Trace, analyses: Iterable[Analysis], pid: int, clock: _Clock) -> list[dict[str, Any]]:
    """One flow per linked kernel: from its launch on the CPU thread to its start on the GPU stream."""
    out: list[dict[str, Any]] = []
    n = 0
    for a in analyses:
        g, rt = a.trace.gpu, a.trace.runtime
        for i in np.nonzero(a.links.kernel_launch >= 0)[0].tolist():
            r = int(a.links.kernel_launch[i])
            n += 1
            base = {"cat": "ac2g", "name": "launch", "id": n}
            out.append(
                base | {"ph": "s", "pid": pid, "tid": int(rt.tid[r]), "ts": clock.us(int(rt.start_ns[r]))}
            )
            out.append(
                base
                | {
                    "ph": "f",
                    "bp": "e",
                    "pid": GPU_PID + int(g.device[i]),
                    "tid": int(g.stream[i]),
                    "ts": clock.us(int(g.start_ns[i])),
                }
            )
    return out


def _gap_events(analyses: Iterable[Analysis], clock: _Clock) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = []
    for a in analyses:
        gaps, device = a.gaps, int(a.trace.gpu.device[0]) if len(a.trace.gpu) else 0
        for i in range(len(gaps)):
            cause = CAUSES.get(int(gaps.cause[i]), "other")
            args: dict[str, Any] = {"cause": cause, "window": int(gaps.window[i])}
            if (text := _line_text(a.trace, int(gaps.line[i]))) is not None:
                args["line"] = text
            out.append(
                _x("gpu_idle", f"idle: {cause}", GPU_PID + device, IDLE_TID, gaps, i, clock)
                | {"cname": IDLE_COLOUR, "args": args}
            )
    return out


def _stream_events(trace: Trace, clock: _Clock) -> list[dict[str, Any]]:
    """Kernels streamed between windows (`--stream`): no CPU side, so no regime, line or flow of their own."""
    s = trace.stream
    return [
        {
            "ph": "X",
            "cat": "kernel_stream",
            "name": trace.name(int(s.name[i])),
            "pid": GPU_PID + int(s.device[i]),
            "tid": STREAM_TID + int(s.stream[i]),
            "ts": clock.us(int(s.start_ns[i])),
            "dur": int(s.dur_ns[i]) / 1000,
            "args": {"after_window": int(s.after_window[i]), "stream": int(s.stream[i])},
        }
        for i in range(len(s))
    ]


def _counters(trace: Trace, pid: int, clock: _Clock) -> list[dict[str, Any]]:
    t = trace.telemetry
    out: list[dict[str, Any]] = []
    for column, name, unit in TELEMETRY:
        values = t[column]
        for i in np.nonzero(np.isfinite(values))[0].tolist():
            out.append(
                {
                    "ph": "C",
                    "name": name,
                    "pid": pid,
                    "ts": clock.us(int(t.t_ns[i])),
                    "args": {unit: float(values[i])},
                }
            )
    return out


def _run_events(trace: Trace, phases: dict[int, str], pid: int, clock: _Clock) -> list[dict[str, Any]]:
    """The capture windows (with their phase) and every optimizer step, each on a thread of its own."""
    w = trace.windows
    out: list[dict[str, Any]] = []
    for i, win in enumerate(w.window.tolist()):
        start, end = int(w.start_ns[i]), int(w.end_ns[i])
        ev: dict[str, Any] = {
            "ph": "X",
            "cat": "brrrtui_window",
            "name": f"window {win}: {phases.get(win, 'unknown')}",
        }
        ev |= {"pid": pid, "tid": WINDOWS_TID, "ts": clock.us(start), "dur": (end - start) / 1000}
        out.append(ev | {"args": {"first_step": int(w.first_step[i]), "last_step": int(w.last_step[i])}})
    ends = trace.steps.t_ns.tolist()
    for k in range(1, len(ends)):
        step: dict[str, Any] = {"ph": "X", "cat": "brrrtui_step", "name": f"step {int(trace.steps.step[k])}"}
        out.append(
            step
            | {
                "pid": pid,
                "tid": STEPS_TID,
                "ts": clock.us(ends[k - 1]),
                "dur": (ends[k] - ends[k - 1]) / 1000,
            }
        )
    return out


def to_perfetto(trace: Trace, analyses: list[Analysis], phases: dict[int, str]) -> dict[str, Any]:
    """The whole recording `trace` as one Chrome trace document. `analyses` cover its windows (the lead phase
    and the phases reported apart, analyzers.analyze.analyze_with_other_phases); `phases`: window -> phase name."""
    firsts = (
        trace.windows.start_ns,
        trace.gpu.start_ns,
        trace.telemetry.t_ns,
        trace.steps.t_ns,
        trace.stream.start_ns,
    )
    starts = [int(c.min()) for c in firsts if len(c)]  # the earliest event: no negative timestamps
    clock = _Clock(min(starts) if starts else 0)
    raw_pid = trace.meta.get("pid")
    pid = raw_pid if isinstance(raw_pid, int) and 0 < raw_pid < GPU_PID else 1
    facts = _row_facts(trace, analyses)
    devices = sorted(
        {int(v) for v in trace.gpu.device.tolist()} | {int(v) for v in trace.stream.device.tolist()} or {0}
    )
    threads = {int(s): f"stream {int(s)}" for s in set(trace.gpu.stream.tolist())}
    threads |= {REGIME_TID + int(s): f"stream {int(s)}: regime" for s in set(trace.gpu.stream.tolist())}
    threads |= {
        STREAM_TID + int(s): f"stream {int(s)} (between windows)" for s in set(trace.stream.stream.tolist())
    }
    events = [
        *names(trace, pid, devices, threads),
        *_run_events(trace, phases, pid, clock),
        *_cpu_events(trace, pid, clock),
        *_gpu_events(trace, facts, clock),
        *_regime_band(trace, facts, clock),
        *_flows(trace, analyses, pid, clock),
        *_gap_events(analyses, clock),
        *_stream_events(trace, clock),
        *_counters(trace, GPU_PID + devices[0], clock),
    ]
    return {
        "schemaVersion": 1,
        "displayTimeUnit": "ns",
        "baseTimeNanoseconds": clock.base_ns,
        "traceName": trace.source,
        "deviceProperties": device_props(trace),
        "traceEvents": events,
        "brrrtui": block(trace),
    }
