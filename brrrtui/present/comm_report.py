"""The run's collectives (analyzers.comm.collectives) as report text and as the JSON member `communication`.

    communication (collectives, per step; 2 ranks)
      exposed 30 ms (30% of the time) · hidden under compute or memory 22 ms
      kind            side  calls  time      exposed   bytes/call  algbw        busbw
      all_reduce      gpu       1  50 ms     28 ms     2.1 MB      41.9 MB/s    41.9 MB/s

`side`: gpu for NCCL kernels, cpu for the CPU-side collectives (gloo's ops, which span the whole collective,
waiting included). Bandwidths follow nccl-tests' convention (analyzers.comm.collectives); a time that includes
waiting for a later rank lowers them.
"""

from __future__ import annotations

import math
from typing import Any

from analyzers.comm.collectives import CollectiveStat, Communication
from analyzers.results import Analysis
from brrrtui.contract.units import fmt_bw, fmt_bytes, fmt_ns, fmt_pct


def _num(x: float | int | None) -> float | int | None:
    if x is None or isinstance(x, int):
        return x
    return float(x) if math.isfinite(x) else None


def comm_json(c: Communication | None, steps: int = 0) -> dict[str, Any] | None:
    """The JSON member `communication` (null without collectives); its times are totals over the analysed
    windows, which hold `steps` optimizer steps (0: time-based windows)."""
    if c is None:
        return None
    return {
        "steps": int(steps),
        "kernel_ns": int(c.kernel_ns),
        "exposed_ns": int(c.exposed_ns),
        "hidden_ns": int(c.hidden_ns),
        "ranks": c.ranks,
        "collectives": [_collective_json(s) for s in c.collectives],
    }


def _collective_json(s: CollectiveStat) -> dict[str, Any]:
    return {
        "kind": s.kind,
        "side": s.side,
        "calls": int(s.calls),
        "time_ns": int(s.time_ns),
        "exposed_ns": None if s.exposed_ns is None else int(s.exposed_ns),
        "bytes": _num(s.bytes),
        "sized_calls": int(s.sized_calls),
        "algbw_bytes_per_s": _num(s.algbw_bytes_per_s),
        "busbw_bytes_per_s": _num(s.busbw_bytes_per_s),
    }


def comm_text(a: Analysis) -> list[str]:
    """The report's communication section (nothing without collectives)."""
    c = a.communication
    if c is None:
        return []
    per = a.steps_analysed or 1
    unit = "per step" if a.steps_analysed else "in the windows"
    ranks = f"; {c.ranks} ranks" if c.ranks else ""
    out = ["", f"communication (collectives, {unit}{ranks})"]
    span = a.breakdown.span_ns
    if c.kernel_ns:
        out.append(
            f"  exposed {fmt_ns(c.exposed_ns / per)} ({fmt_pct(c.exposed_ns / span if span else None)} of the "
            f"time) · hidden under compute or memory {fmt_ns(c.hidden_ns / per)}"
        )
    out.append(
        f"  {'kind':<15} {'side':<4} {'calls':>6}  {'time':<9} {'exposed':<9} {'bytes/call':<11} "
        f"{'algbw':<12} busbw"
    )
    for s in c.collectives:
        exposed = "-" if s.exposed_ns is None else fmt_ns(s.exposed_ns / per)
        size = fmt_bytes(s.bytes / s.sized_calls) if s.bytes is not None and s.sized_calls else "?"
        out.append(
            f"  {s.kind:<15} {s.side:<4} {s.calls / per:>6.3g}  {fmt_ns(s.time_ns / per):<9} {exposed:<9} "
            f"{size:<11} {fmt_bw(s.algbw_bytes_per_s):<12} {fmt_bw(s.busbw_bytes_per_s)}"
        )
    if any(s.side == "cpu" for s in c.collectives):
        out.append("  (cpu: the collective's op on the CPU, waiting for the other ranks included)")
    return out
