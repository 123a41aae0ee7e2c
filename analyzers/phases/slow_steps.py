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

CUDA launches are asynchronous, so a GPU-bound loop's steps on the CPU's clock are not its steps on the GPU's:
the host runs ahead, queueing kernels in a step far shorter than the GPU's work, until the launch queue is full
or a sync (a `.item()`) makes it wait for the GPU, and that step is long::

    CPU's clock   |q|q|q|q|w--|w--|w--|W----------|q|q|q|q|...    q: queue only, w: a full queue, W: a sync
    GPU busy      |===========================================|   the GPU's work a step > the median step

No step is slow there: the GPU is busy through the long ones, and the run's real step is the mean (on an
H100, a ResNet-18 whose steps read 7.5 ms median and 11.0 ms mean on the CPU's clock, its kernels 11.1 ms a
step, took 12.0 ms a step synchronised, with gc.freeze() or without). The recording holds the GPU's work only
inside windows: its busy time a step is read from the profiled steady step windows (the union of their GPU
rows on the busiest device, over the steps they hold). That work bounds the mean step from below, so where it
exceeds the median step by more than AHEAD the typical step is the GPU's, not the median: slow steps are those
over SLOW times it, and the time lost is the mean's excess over it. When nothing is lost but the mean still
exceeds the median by MIN_LOSS, the finding has no saving and says the loop is GPU-bound. Genuinely slow steps
(a garbage collection: the GPU idle while the host pauses) leave the GPU's work a step under the median step,
and are measured against the median. The mean of a run that ends with the host ahead leaves out the work still
queued at its last step, so it can read a little under the GPU's step.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

import numpy as np

from analyzers.arrays import length, median as sorted_median, merged
from analyzers.findings.facts import SlowStepsFacts
from analyzers.phases.run_phases import TOLERANCE, Phase, RunPhases, perturbed_steps, window_phases
from analyzers.results import Finding, FindingKind
from brrrtui.contract.model import Trace, WindowMode

SLOW = 1.0 + TOLERANCE  # a slow step takes over this times the typical step (outside the phases' tolerance)
MIN_LOSS = 0.02  # reported when the run loses at least this share of the typical step to them
MIN_SLOW = 2  # and at least this many slow steps show it
PERIODIC = 0.8  # share of the spacings between slow steps that must be multiples of the commonest one
# the host runs ahead when the GPU's work a step exceeds the median step by this much (kernels run ~1 % longer in
# a profiled window than outside one: HF GPT-2 on an H200, 55.6 ms against 55.0 ms a step)
AHEAD = 1.05


@dataclass(frozen=True)
class SlowSteps:
    steps: int  # steady steps looked at
    median_ns: float
    mean_ns: float
    slow: tuple[int, ...]  # step numbers (optimizer steps from 0) of the slow steps (over SLOW x typical_ns)
    slow_ns: tuple[float, ...]  # their durations
    period: int | None  # the slow steps recur every `period` steps
    gpu_step_ns: float | None = None  # the GPU's busy time a step in the steady step windows (None: none)

    @property
    def host_ahead(self) -> bool:
        """The GPU works longer a step than the median step takes on the CPU's clock: the host runs ahead of a
        GPU-bound loop, and the median step is the time to queue a step's work, not to run it."""
        return self.gpu_step_ns is not None and self.gpu_step_ns >= AHEAD * self.median_ns

    @property
    def typical_ns(self) -> float:
        """The step the slow ones are measured against: the median step, or the GPU's work a step when the
        host runs ahead (no step of a steady loop can be shorter on average)."""
        return self.gpu_step_ns if self.gpu_step_ns is not None and self.host_ahead else self.median_ns

    @property
    def real_step_ns(self) -> float:
        """The steady step's real time: the mean when the host runs ahead (the median is then a step that only
        queued its work), else the median (the slow steps are then the script's own and lose time)."""
        return self.mean_ns if self.host_ahead else self.median_ns

    @property
    def lost_ns(self) -> float:
        """Time lost a step, on average, against a run whose every step took the typical step."""
        return max(self.mean_ns - self.typical_ns, 0.0)

    @property
    def worth_reporting(self) -> bool:
        return len(self.slow) >= MIN_SLOW and self.lost_ns >= MIN_LOSS * self.typical_ns

    @property
    def gpu_bound(self) -> bool:
        """The host runs ahead, the mean step exceeds the median by at least MIN_LOSS and the GPU's work
        accounts for it: nothing is lost, but the median step understates the real one, the mean."""
        return (
            self.host_ahead
            and not self.worth_reporting
            and self.mean_ns - self.median_ns >= MIN_LOSS * self.median_ns
        )


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
    measured = SlowSteps(len(d), median, float(d.mean()), (), (), None, gpu_step_ns(trace, run))
    slow = step[keep][d > SLOW * measured.typical_ns]
    return replace(
        measured,
        slow=tuple(int(s) for s in slow.tolist()),
        slow_ns=tuple(float(x) for x in durations[slow].tolist()),
        period=_period(slow),
    )


def gpu_step_ns(trace: Trace, run: RunPhases) -> float | None:
    """The GPU's busy time a step in the steady step windows: the union of their GPU rows (kernels, copies,
    memsets) on the busiest device, over the optimizer steps they hold; None without such a window."""
    w = trace.windows
    held = w.last_step - w.first_step + 1
    steady = np.asarray([p is Phase.STEADY for p in window_phases(run, w.first_step, w.start_ns)], dtype=bool)
    chosen = steady & (w.mode == int(WindowMode.STEPS)) & (w.first_step >= 0) & (held > 0)
    if not chosen.any():
        return None
    g = trace.gpu
    rows = np.nonzero(np.isin(g.window, w.window[chosen]))[0]
    if not len(rows):
        return None
    start, end = g.start_ns[rows], g.start_ns[rows] + np.maximum(g.dur_ns[rows], 0)
    device, window = g.device[rows], g.window[rows]
    order = np.lexsort((start, window, device))
    start, end, device, window = start[order], end[order], device[order], window[order]
    cut = np.nonzero((device[1:] != device[:-1]) | (window[1:] != window[:-1]))[0] + 1
    busy: dict[int, int] = {}
    for lo, hi in zip([0, *cut.tolist()], [*cut.tolist(), len(start)], strict=True):
        dev = int(device[lo])
        busy[dev] = busy.get(dev, 0) + length(merged(start[lo:hi], end[lo:hi]))
    return max(busy.values()) / int(held[chosen].sum())


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
    """A finding when the slow steps cost the run at least MIN_LOSS of its typical step; one without a saving
    when the loop is GPU-bound with the host running ahead (`SlowSteps.gpu_bound`): its real step is the mean."""
    if s is None:
        return None
    if s.worth_reporting:
        return Finding(FindingKind.SLOW_STEPS, (), s.lost_ns, SlowStepsFacts(s, streamed))
    if s.gpu_bound:
        return Finding(FindingKind.SLOW_STEPS, (), None, SlowStepsFacts(s, streamed))
    return None
