"""Slow steps: the time a run loses to steady-state steps far slower than its typical step.

brrrtui's per-line figures describe the typical steady step: the windows' profiled steps are replayed at the
median unprofiled step's speed (unprofiled_replay). A run whose steps are mostly alike but now and then much
slower (a garbage collection, a data loader falling behind, a checkpoint, logging every N steps) spends time
that no line's figure shows. The recorder logs every step's end, profiled or not, so the steps are read from
the whole run: the steady steps outside every window, its conversion and the step after it (brrrtui's own
stalls, which are not the script's)::

    steady steps   |s|s|s|S-----|s|s|s|s|S------|s|s|      S: slow (over SLOW x the median step)
    lost a step    mean - median duration, over those steps

The loss is the mean less the median, not the slow steps' excess alone: a step that waits for the GPU (a
`loss.item()` every 10 steps) is slow on the CPU's clock while the GPU stays busy, and the steps after it are
quicker by as much, the queue having drained (H200, HF GPT-2 logging every 10 steps: every 10th step 74-90 ms
against a 57.8 ms median, mean 57.8 ms: nothing lost). The slow steps are the evidence shown with the loss, and
a fixed spacing between them points at code that runs every N steps.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from analyzers.arrays import median as sorted_median
from analyzers.findings.facts import SlowStepsFacts
from analyzers.phases.run_phases import TOLERANCE, RunPhases, perturbed_steps
from analyzers.results import Finding, FindingKind
from brrrtui.contract.model import Trace

SLOW = 1.0 + TOLERANCE  # a slow step takes longer than this times the median (outside the phases' tolerance)
MIN_LOSS = 0.02  # reported when the run loses at least this share of the median step to them
MIN_SLOW = 2  # and at least this many slow steps show it
PERIODIC = 0.8  # share of the spacings between slow steps that must be multiples of the commonest one


@dataclass(frozen=True)
class SlowSteps:
    steps: int  # steady steps looked at
    median_ns: float
    mean_ns: float
    slow: tuple[int, ...]  # step numbers (optimizer steps from 0) of the slow steps, in order
    slow_ns: tuple[float, ...]  # their durations
    period: int | None  # the slow steps recur every `period` steps

    @property
    def lost_ns(self) -> float:
        """Time lost a step, on average, against a run whose every step took the median."""
        return max(self.mean_ns - self.median_ns, 0.0)

    @property
    def worth_reporting(self) -> bool:
        return len(self.slow) >= MIN_SLOW and self.lost_ns >= MIN_LOSS * self.median_ns


def slow_steps(trace: Trace, run: RunPhases) -> SlowSteps | None:
    """The steady steps of the whole run (all windows of `trace`, not only the analysed ones); None without a
    steady state or with fewer than three clean steps in it."""
    if not run.reached or run.steady_from_step is None:
        return None
    ends = np.sort(np.asarray(trace.steps.t_ns, dtype=np.int64))
    w = trace.windows
    convert = dict(
        zip(trace.capture_costs.window.tolist(), trace.capture_costs.convert_ns.tolist(), strict=True)
    )
    busy_until = w.end_ns + np.array(
        [max(int(convert.get(int(k), 0)), 0) for k in w.window.tolist()], np.int64
    )
    clean = ~perturbed_steps(ends, w.start_ns, busy_until)
    step = np.arange(len(ends))
    keep = clean & (step >= run.steady_from_step)
    keep[0] = False  # step 0 has no start
    durations = np.zeros(len(ends), dtype=np.float64)
    durations[1:] = np.diff(ends)
    d = durations[keep]
    if len(d) < 3:
        return None
    median = sorted_median(d)
    slow = step[keep][d > SLOW * median]
    return SlowSteps(
        steps=len(d),
        median_ns=median,
        mean_ns=float(d.mean()),
        slow=tuple(int(s) for s in slow.tolist()),
        slow_ns=tuple(float(x) for x in durations[slow].tolist()),
        period=_period(slow),
    )


def _period(slow: np.ndarray) -> int | None:
    """The commonest spacing between slow steps, if nearly all spacings are multiples of it (a window can hide
    one slow step: its neighbours are then two periods apart)."""
    if len(slow) < 3:
        return None
    gaps = np.diff(slow)
    values, counts = np.unique(gaps, return_counts=True)
    period = int(values[np.argmax(counts)])
    if period < 2 or np.mean(gaps % period == 0) < PERIODIC:
        return None
    return period


def slow_steps_finding(s: SlowSteps | None, streamed: bool) -> Finding | None:
    """A finding when the slow steps cost the run at least MIN_LOSS of its median step."""
    if s is None or not s.worth_reporting:
        return None
    return Finding(FindingKind.SLOW_STEPS, (), s.lost_ns, SlowStepsFacts(s, streamed))
