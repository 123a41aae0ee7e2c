"""The parts of an exported Chrome trace that are not events: the device's properties (as torch.profiler
writes them) and the `brrrtui` block, what the round trip needs and a Chrome trace has no event for (the
recording's windows, steps, measured ceilings, lines, line samples and telemetry rows;
brrrtui/recording/chrome/brrrtui_block.py reads it back)."""

from __future__ import annotations

import math
from collections.abc import Iterable
from typing import Any

from brrrtui.contract.model import Trace

FORMAT = 1  # of the `brrrtui` block
GPU_PID = 1_000_000_000  # + device: GPU processes, apart from any CPU pid
IDLE_TID = 1_000_000_000  # the "GPU idle" thread of a GPU process
WINDOWS_TID, STEPS_TID = 1_000_000_001, 1_000_000_002


def num(x: float) -> float | None:
    """A finite float, else None (JSON has no NaN)."""
    return float(x) if math.isfinite(x) else None


def _rows(table: Any) -> list[tuple[Any, ...]]:
    return list(zip(*(c.tolist() for c in table.columns.values()), strict=True))


def block(trace: Trace) -> dict[str, Any]:
    """What the round trip needs and a Chrome trace has no event for (brrrtui/recording/chrome/brrrtui_block.py reads it back)."""
    p, d = trace.peaks, trace.device
    peak_keys = ("tensor_flops_per_s", "fp32_flops_per_s", "bytes_per_s", "source", "l2_bytes")
    meta_keys = ("argv", "cwd", "torch_version", "status", "exit_code")
    return {
        "format": FORMAT,
        "windows": [list(map(int, r)) for r in _rows(trace.windows)],
        "steps": [list(map(int, r)) for r in _rows(trace.steps)],
        "peaks": None if p is None else {k: getattr(p, k) for k in peak_keys},
        "device": {"l2_bytes": d.l2_bytes, "driver": d.driver, "cuda": d.cuda},
        "lines": [[ln.file, ln.line, ln.function] for ln in trace.lines],
        "line_samples": [list(map(int, r)) for r in _rows(trace.line_samples)],
        "telemetry": [[int(r[0]), *(num(float(v)) for v in r[1:])] for r in _rows(trace.telemetry)],
        "meta": {k: trace.meta[k] for k in meta_keys if k in trace.meta},
        "span_scopes": _span_scopes(trace),
    }


def _span_scopes(trace: Trace) -> list[list[Any]]:
    """[tid, start_ns, dur_ns, module chain or None, library line index or -1] of each span that has either (the
    Chrome reader keeps a frame's time and thread, not these)."""
    sp = trace.spans
    out: list[list[Any]] = []
    for i in ((sp.module >= 0) | (sp.lib_line >= 0)).nonzero()[0].tolist():
        module = trace.name(int(sp.module[i])) if int(sp.module[i]) >= 0 else None
        out.append([int(sp.tid[i]), int(sp.start_ns[i]), int(sp.dur_ns[i]), module, int(sp.lib_line[i])])
    return out


def device_props(trace: Trace) -> list[dict[str, Any]]:
    d = trace.device
    props: dict[str, Any] = {"id": 0}
    if d.name:
        props["name"] = d.name
    if d.num_sms:
        props["numSms"] = d.num_sms
    if d.compute_capability and "." in d.compute_capability:
        major, minor = d.compute_capability.split(".", 1)
        if major.isdigit() and minor.isdigit():
            props["computeMajor"], props["computeMinor"] = int(major), int(minor)
    if d.total_memory_bytes:
        props["totalGlobalMem"] = d.total_memory_bytes
    return [props]


def names(trace: Trace, pid: int, devices: Iterable[int], threads: dict[int, str]) -> list[dict[str, Any]]:
    """Metadata events: the CPU and GPU processes and their named threads."""
    argv = trace.meta.get("argv")
    script = " ".join(str(a) for a in argv) if isinstance(argv, list) else (trace.source or "trace")
    gpu = trace.device.name or "GPU"
    out: list[dict[str, Any]] = [
        {"ph": "M", "name": "process_name", "pid": pid, "args": {"name": f"CPU: {script}"}}
    ]
    for d in devices:
        out.append(
            {"ph": "M", "name": "process_name", "pid": GPU_PID + d, "args": {"name": f"GPU {d}: {gpu}"}}
        )
        out.append(
            {
                "ph": "M",
                "name": "thread_name",
                "pid": GPU_PID + d,
                "tid": IDLE_TID,
                "args": {"name": "GPU idle"},
            }
        )
        for s in threads:
            name = threads[s]
            out.append(
                {"ph": "M", "name": "thread_name", "pid": GPU_PID + d, "tid": s, "args": {"name": name}}
            )
    for tid, name in ((WINDOWS_TID, "capture windows"), (STEPS_TID, "optimizer steps")):
        out.append({"ph": "M", "name": "thread_name", "pid": pid, "tid": tid, "args": {"name": name}})
    return out
