"""The parts of an exported Chrome trace that are not events: the device's properties (as torch.profiler
writes them) and the `brrrtui` block, what the round trip needs and a Chrome trace has no event for (the
recording's windows, steps, measured ceilings, lines, line samples and telemetry rows;
brrrtui/recording/chrome_extras.py reads it back)."""

from __future__ import annotations

import math
from typing import Any

from analyzers.model import Trace

FORMAT = 1  # of the `brrrtui` block


def num(x: float) -> float | None:
    """A finite float, else None (JSON has no NaN)."""
    return float(x) if math.isfinite(x) else None


def _rows(table: Any) -> list[tuple[Any, ...]]:
    return list(zip(*(c.tolist() for c in table.columns.values()), strict=True))


def block(trace: Trace) -> dict[str, Any]:
    """What the round trip needs and a Chrome trace has no event for (chrome_extras.py reads it back)."""
    p, d = trace.peaks, trace.device
    peak_keys = ("tensor_flops_per_s", "fp32_flops_per_s", "bytes_per_s", "source", "l2_bytes")
    meta_keys = ("argv", "cwd", "torch_version", "status", "exit_code")
    steps = trace.steps
    return {
        "format": FORMAT,
        "windows": [list(map(int, r)) for r in _rows(trace.windows)],
        "steps": [[int(s), int(t)] for s, t in zip(steps.step.tolist(), steps.t_ns.tolist(), strict=True)],
        "peaks": None if p is None else {k: getattr(p, k) for k in peak_keys},
        "device": {"l2_bytes": d.l2_bytes, "driver": d.driver, "cuda": d.cuda},
        "lines": [[ln.file, ln.line, ln.function] for ln in trace.lines],
        "line_samples": [list(map(int, r)) for r in _rows(trace.line_samples)],
        "telemetry": [[int(r[0]), *(num(float(v)) for v in r[1:])] for r in _rows(trace.telemetry)],
        "meta": {k: trace.meta[k] for k in meta_keys if k in trace.meta},
    }


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
