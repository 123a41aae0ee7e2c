"""CPU regions whose unprofiled duration the recorder measures in every step: the optimizer's step() and zero_grad().

Under the profiler both take far longer than without it (foreach ops over every parameter; a record_function
scope, `Optimizer.step#AdamW.step`, `Optimizer.zero_grad#AdamW.zero_grad`): on GPT-2 eager on an H200,
step() 14.2 ms and zero_grad() 6.3 ms in a window. The capture times both in every step
(brrrtui/capture/optimizer_timing.py, steps.optimizer_ns / zero_grad_ns), so the unprofiled replay can replay
the CPU time inside each scope at the measured ratio, unprofiled / profiled, instead of the one factor it fits
for the rest of the step.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from brrrtui.contract.model import Trace, flag_of

REGIONS = (("Optimizer.step#", "optimizer_ns"), ("Optimizer.zero_grad#", "zero_grad_ns"))
"""The record_function scope that marks a region in a window, and the steps column that times it unprofiled."""
CUT_NS = 100_000  # a scope ending this close to its window's end was cut by the profiler's stop


@dataclass(frozen=True)
class Region:
    """One kind of region: its scopes in the windows and the factor its CPU time is replayed at."""

    name: str
    window: np.ndarray  # per scope
    start: np.ndarray
    end: np.ndarray
    factor: float  # unprofiled / profiled median duration, at most 1
    profiled_ns: float
    unprofiled_ns: float


def _outside_windows(trace: Trace) -> np.ndarray:
    """Steps that ended outside every window, after a step that did too: unprofiled steps."""
    t = trace.steps.t_ns
    inside = np.zeros(len(t), dtype=bool)
    for lo, hi in zip(trace.windows.start_ns.tolist(), trace.windows.end_ns.tolist(), strict=True):
        inside |= (t >= lo) & (t <= hi)
    return ~inside & ~np.concatenate(([True], inside[:-1]))


def _starts_with(prefix: str) -> Callable[[str], bool]:
    return lambda name: name.startswith(prefix)


def measured_regions(trace: Trace) -> list[Region]:
    """The regions with both a profiled scope (not cut by a window's end) and unprofiled timings."""
    ops, w = trace.ops, trace.windows
    unprofiled_steps = _outside_windows(trace)
    end_of_window = dict(zip(w.window.tolist(), w.end_ns.tolist(), strict=True))
    out = []
    for prefix, column in REGIONS:
        timed = trace.steps[column][unprofiled_steps]
        timed = timed[timed >= 0]
        scopes = np.nonzero(flag_of(trace.string_flags(_starts_with(prefix)), ops.name))[0]
        if not len(timed) or not len(scopes):
            continue
        end = ops.start_ns[scopes] + ops.dur_ns[scopes]
        window_end = np.array([end_of_window.get(int(x), 0) for x in ops.window[scopes].tolist()])
        whole = end < window_end - CUT_NS
        if not whole.any():
            continue
        profiled = float(np.median(ops.dur_ns[scopes][whole]))
        unprofiled = float(np.median(timed))
        out.append(
            Region(
                name=prefix.rstrip("#"),
                window=ops.window[scopes],
                start=ops.start_ns[scopes],
                end=end,
                factor=min(1.0, unprofiled / profiled) if profiled > 0 else 1.0,
                profiled_ns=profiled,
                unprofiled_ns=unprofiled,
            )
        )
    return out
