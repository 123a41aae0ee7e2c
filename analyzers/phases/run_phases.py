"""Phases of a training run: setup, warm-up and steady state, from the time of every optimizer step.

A run's first steps are not its steady state: the caching allocator grows, cuBLAS and cuDNN pick their
algorithms, lazy modules initialise, and `torch.compile` compiles. On an H200, GPT-2 small's first step took
1.6 s and its next ones 44 ms; a profiled warm-up step took 445-614 ms. A verdict drawn from such a step says
"overhead" for a model that is GPU-bound in steady state, so every window is labelled with its phase and the
report leads with the steady ones::

    steps    |s0------|s1|s2-|s3|s|s|s|s|s|s|s|s|s|s|s|s|
             ^ first step ends
    setup    |<- before it: construction, data, .to(device)
    warm-up           |<------>|  durations still settling
    steady                     |<- every duration within `tolerance` of the steady median from here on

Step durations are the gaps between consecutive step ends (the recorder logs every step, profiled or not).
The steady median is taken over the run's second half, where warm-up is over in any run long enough to have
a steady state. Warm-up ends at the first step from which `settle_steps` consecutive durations lie within
`tolerance` of that median; steps that ran inside a profiler window are slower by design and are skipped, not
held against the run.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import Enum

import numpy as np

from brrrtui.contract.schema import NONE

TOLERANCE = 0.25  # a settled step is within ±25 % of the steady median
SETTLE_STEPS = 3  # this many settled steps in a row end the warm-up


class Phase(str, Enum):
    SETUP = "setup"  # before the first optimizer step ended
    WARMUP = "warmup"  # steps before the durations settle
    STEADY = "steady"  # the rest of the run
    UNKNOWN = "unknown"  # a run without optimizer steps: no step times to tell phases by

    @property
    def label(self) -> str:
        return "warm-up" if self is Phase.WARMUP else self.value


@dataclass(frozen=True)
class RunPhases:
    steps: int  # optimizer steps in the run
    first_step_end_ns: int | None  # end of step 0: setup is everything before it
    steady_from_step: int | None  # first step of the steady state; None: never reached (or no steps)
    steady_from_ns: int | None  # when that step started (the end of the one before it)
    steady_step_ns: float | None  # median step duration in the steady state
    reached: bool  # the durations settled before the run ended

    def phase_of_step(self, step: int) -> Phase:
        if self.steps == 0:
            return Phase.UNKNOWN
        if self.steady_from_step is None or step < self.steady_from_step:
            return Phase.WARMUP
        return Phase.STEADY


def step_durations_ns(step_end_ns: np.ndarray) -> np.ndarray:
    """Durations of steps 1..n-1 (index i is step i+1): step 0 has no start in the record."""
    return np.diff(np.asarray(step_end_ns, dtype=np.int64))


def detect_phases(
    step_end_ns: np.ndarray,
    perturbed: np.ndarray | None = None,
    tolerance: float = TOLERANCE,
    settle_steps: int = SETTLE_STEPS,
) -> RunPhases:
    """Phases from every step's end time; `perturbed[i]` marks step i as run inside a profiler window."""
    ends = np.asarray(step_end_ns, dtype=np.int64)
    n = len(ends)
    if n == 0:
        return RunPhases(0, None, None, None, None, False)
    first_end = int(ends[0])
    durations = step_durations_ns(ends).astype(np.float64)
    hit = np.zeros(n - 1, dtype=bool) if perturbed is None else np.asarray(perturbed, dtype=bool)[1:]
    clean = durations[~hit]
    if len(clean) < settle_steps:
        return RunPhases(n, first_end, None, None, None, False)
    second_half = durations[len(durations) // 2 :][~hit[len(durations) // 2 :]]
    reference = float(np.median(second_half if len(second_half) else clean))
    settled = np.abs(durations - reference) <= tolerance * reference
    steady_from = _first_settled_run(settled, hit, settle_steps)
    if steady_from is None:
        return RunPhases(n, first_end, None, None, reference, False)
    steady = durations[steady_from:][~hit[steady_from:]]
    # durations[i] is step i+1, which started when step i ended
    return RunPhases(n, first_end, steady_from + 1, int(ends[steady_from]), float(np.median(steady)), True)


def _first_settled_run(settled: np.ndarray, perturbed: np.ndarray, run: int) -> int | None:
    """Index of the first duration that starts `run` settled ones in a row, perturbed ones skipped."""
    count, start = 0, None
    for i in range(len(settled)):
        if perturbed[i]:
            continue
        if settled[i]:
            start = i if count == 0 else start
            count += 1
            if count >= run:
                return start
        else:
            count, start = 0, None
    return None


def perturbed_steps(
    step_end_ns: np.ndarray, window_start_ns: np.ndarray, window_end_ns: np.ndarray
) -> np.ndarray:
    """True for each step whose end falls inside a profiler window or ends the first step after one."""
    ends = np.asarray(step_end_ns, dtype=np.int64)
    out = np.zeros(len(ends), dtype=bool)
    for start, end in zip(np.asarray(window_start_ns), np.asarray(window_end_ns), strict=True):
        out |= (ends >= start) & (ends <= end)
        after = np.searchsorted(ends, end, side="right")
        if after < len(ends):
            out[after] = True  # its duration holds the window's closing stall
    return out


def window_phases(phases: RunPhases, first_step: np.ndarray, window_start_ns: np.ndarray) -> list[Phase]:
    """The phase of each window: setup before the first step ended, else that of its first step."""
    out = []
    for step, start in zip(np.asarray(first_step), np.asarray(window_start_ns), strict=True):
        if phases.steps == 0:
            out.append(Phase.UNKNOWN)
        elif phases.first_step_end_ns is not None and int(start) < phases.first_step_end_ns and step == NONE:
            out.append(Phase.SETUP)
        elif step == NONE:  # a time window between steps (the optimizer went quiet)
            steady = phases.steady_from_ns is not None and int(start) >= phases.steady_from_ns
            out.append(Phase.STEADY if steady else Phase.WARMUP)
        else:
            out.append(phases.phase_of_step(int(step)))
    return out


@dataclass(frozen=True)
class TracePhases:
    """A recording's phases: the run's, and each window's (window id -> phase)."""

    run: RunPhases
    windows: dict[int, Phase]

    def windows_in(self, phase: Phase) -> list[int]:
        return [w for w, p in self.windows.items() if p is phase]

    def lead(self) -> tuple[Phase, list[int]]:
        """The phase a report leads with: the steady state, else the warm-up, else the set-up, else all."""
        for phase in (Phase.STEADY, Phase.WARMUP, Phase.SETUP):
            windows = self.windows_in(phase)
            if windows:
                return phase, windows
        return Phase.UNKNOWN, list(self.windows)


def trace_phases(
    step_end_ns: np.ndarray,
    window_ids: np.ndarray,
    window_start_ns: np.ndarray,
    window_end_ns: np.ndarray,
    first_step: np.ndarray,
) -> TracePhases:
    """Phases of a recording from its steps and windows tables (columns passed as arrays)."""
    ends = np.sort(np.asarray(step_end_ns, dtype=np.int64))
    run = detect_phases(ends, perturbed_steps(ends, window_start_ns, window_end_ns))
    labels = window_phases(run, first_step, window_start_ns)
    return TracePhases(run, {int(w): p for w, p in zip(np.asarray(window_ids), labels, strict=True)})
