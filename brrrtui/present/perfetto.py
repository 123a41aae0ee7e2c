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
(brrrtui/recording/chrome/brrrtui_block.py) restores it, which is what makes the round trip exact.
Times are microseconds after `baseTimeNanoseconds` (the earliest event), so a float keeps every ns.
`write_perfetto` writes the document as it goes (brrrtui/present/perfetto_events.py: ~10 M events for 1 M
kernels); `to_perfetto` parses what it writes, for a caller that wants the document itself.
"""

from __future__ import annotations

import io
import json
from collections.abc import Iterator
from typing import Any, TextIO

import numpy as np

from analyzers.results import Analysis
from brrrtui.contract.model import Trace
from brrrtui.present.perfetto_block import GPU_PID, STEPS_TID, WINDOWS_TID, block, device_props, names
from brrrtui.present.perfetto_events import (
    REGIME_TID,
    STREAM_TID,
    Clock,
    Events,
    Strings,
    cpu_events,
    flows,
    gap_events,
    gpu_events,
    regime_band,
    row_facts,
    step_events,
    stream_events,
    text,
)

__all__ = ["EXPORT_HEADS", "GENERATOR", "REGIME_TID", "STREAM_TID", "to_perfetto", "write_perfetto"]

GENERATOR = "brrrtui"
EXPORT_HEADS = (
    '{"otherData":{"generator":"brrrtui"}',
    '{"schemaVersion":1,"displayTimeUnit":"ns","baseTimeNanoseconds":',  # written before the generator was
)
"""How every trace `write_perfetto` writes begins: what `brrrtui export` may replace without --force."""

TELEMETRY = (
    ("gpu_util_pct", "GPU utilisation", "%"),
    ("mem_used_bytes", "GPU memory used", "bytes"),
    ("power_w", "GPU power", "W"),
    ("sm_clock_mhz", "SM clock", "MHz"),
)


def _counters(trace: Trace, pid: int, clock: Clock) -> Events:
    t = trace.telemetry
    for column, name, unit in TELEMETRY:
        values = t[column]
        rows = np.nonzero(np.isfinite(values))[0].tolist()
        yield [
            text(
                {
                    "ph": "C",
                    "name": name,
                    "pid": pid,
                    "ts": clock.us(int(t.t_ns[i])),
                    "args": {unit: float(values[i])},
                }
            )
            for i in rows
        ]


def _windows(trace: Trace, phases: dict[int, str], pid: int, clock: Clock) -> list[str]:
    """The capture windows, with their phase, on a thread of their own."""
    w = trace.windows
    out = []
    for i, win in enumerate(w.window.tolist()):
        start, end = int(w.start_ns[i]), int(w.end_ns[i])
        ev: dict[str, Any] = {
            "ph": "X",
            "cat": "brrrtui_window",
            "name": f"window {win}: {phases.get(win, 'unknown')}",
        }
        ev |= {"pid": pid, "tid": WINDOWS_TID, "ts": clock.us(start), "dur": (end - start) / 1000}
        out.append(
            text(ev | {"args": {"first_step": int(w.first_step[i]), "last_step": int(w.last_step[i])}})
        )
    return out


def write_perfetto(out: TextIO, trace: Trace, analyses: list[Analysis], phases: dict[int, str]) -> int:
    """Write the whole recording `trace` as one Chrome trace document to `out`; the number of events.
    `analyses` cover its windows (the lead phase and the phases reported apart,
    analyzers.analyze.analyze_with_other_phases); `phases`: window -> phase name."""
    firsts = (
        trace.windows.start_ns,
        trace.gpu.start_ns,
        trace.telemetry.t_ns,
        trace.steps.t_ns,
        trace.stream.start_ns,
    )
    starts = [int(c.min()) for c in firsts if len(c)]  # the earliest event: no negative timestamps
    clock = Clock(min(starts) if starts else 0)
    raw_pid = trace.meta.get("pid")
    pid = raw_pid if isinstance(raw_pid, int) and 0 < raw_pid < GPU_PID else 1
    facts, strings = row_facts(trace, analyses), Strings(trace)
    devices = sorted(
        {int(v) for v in trace.gpu.device.tolist()} | {int(v) for v in trace.stream.device.tolist()} or {0}
    )
    streams = set(trace.gpu.stream.tolist())
    threads = {int(s): f"stream {int(s)}" for s in streams}
    threads |= {REGIME_TID + int(s): f"stream {int(s)}: regime" for s in streams}
    threads |= {
        STREAM_TID + int(s): f"stream {int(s)} (between windows)" for s in set(trace.stream.stream.tolist())
    }
    head = {
        "otherData": {"generator": GENERATOR},  # first: `export` knows a trace it wrote by its first bytes
        "schemaVersion": 1,
        "displayTimeUnit": "ns",
        "baseTimeNanoseconds": clock.base_ns,
        "traceName": trace.source,
        "deviceProperties": device_props(trace),
    }
    out.write(text(head)[:-1] + ',"traceEvents":[')
    families: list[Iterator[list[str]]] = [
        iter([[text(ev) for ev in names(trace, pid, devices, threads)], _windows(trace, phases, pid, clock)]),
        step_events(trace, pid, STEPS_TID, clock),
        cpu_events(trace, strings, pid, clock),
        gpu_events(trace, strings, facts, clock),
        regime_band(trace, strings, facts, clock),
        flows(analyses, pid, clock),
        gap_events(analyses, strings, clock),
        stream_events(trace, strings, clock),
        _counters(trace, GPU_PID + devices[0], clock),
    ]
    written = 0
    for family in families:
        for chunk in family:
            if chunk:
                out.write(("," if written else "") + ",".join(chunk))
                written += len(chunk)
    out.write('],"brrrtui":' + text(block(trace)) + "}")
    return written


def to_perfetto(trace: Trace, analyses: list[Analysis], phases: dict[int, str]) -> dict[str, Any]:
    """The document write_perfetto writes, parsed."""
    buffer = io.StringIO()
    write_perfetto(buffer, trace, analyses, phases)
    doc: dict[str, Any] = json.loads(buffer.getvalue())
    return doc
