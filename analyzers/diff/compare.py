"""Two analyses of the same script, before and after a change: what changed per step, per line and per kernel,
and whether each change is beyond the run-to-run noise of the step times (`brrrtui diff`).

Figures are per optimizer step when both runs have step times (GPU time: the analysed windows' kernels over
the steps they hold), else per second of analysed time. The step time is the median duration of the
steady-state steps that no profiler window touched (analyzers.phases.run_phases: `perturbed_steps`); its noise is the
robust spread of those durations, sigma = 1.4826 x their median absolute deviation. A change counts as beyond
the noise when it exceeds 2 x sqrt(sigma_before^2 + sigma_after^2): for the step time that is the step-to-step
spread of two runs, and for a line's or a kernel's GPU time, whose own spread is smaller, it is a
conservative bar.

Without GPU activity in either run, lines compare their CPU-side time (LineStat.host_ns: the main thread's
sampled time on the line, or its time in torch calls where that is more, so a removed `time.sleep` or Python
loop shows) and carry no regime.

Lines are matched by file and source text (analyzers.diff.line_match), so inserting lines above a hot line does
not break its match; where no text is available, by file and line number.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from analyzers.diff.line_match import LineMap, LineMatch
from analyzers.phases.run_phases import Phase, perturbed_steps
from analyzers.results import REGIMES_BY_CODE, Analysis, LineStat, Regime
from brrrtui.contract.model import SourceLine

MAD_TO_SIGMA = 1.4826  # a normal distribution's sigma per median absolute deviation
NOISE_FACTOR = 2.0


@dataclass(frozen=True)
class StepTimes:
    """The steady, unprofiled step durations of one run."""

    steps: int  # durations measured
    median_ns: float | None
    sigma_ns: float | None  # robust spread (1.4826 x MAD)


@dataclass(frozen=True)
class Change:
    """One figure before and after (ns per unit; None where a run lacks it)."""

    what: str
    before: float | None
    after: float | None
    beyond_noise: bool | None  # None: no noise estimate (no step times)

    @property
    def delta(self) -> float | None:
        if self.before is None or self.after is None:
            return None
        return self.after - self.before

    @property
    def relative(self) -> float | None:
        d = self.delta
        return None if d is None or not self.before else d / self.before


@dataclass(frozen=True)
class LineChange:
    before: SourceLine | None
    after: SourceLine | None
    matched_by: LineMatch | None  # None: the line has figures in one run only (or no match was found)
    time: Change  # the line's own time: GPU time of its kernels, or its CPU-side time (RunDiff.measure "CPU")
    idle: Change  # GPU idle charged to the line (unprofiled estimate); 0 for measure "CPU"
    regime_before: Regime | None
    regime_after: Regime | None

    @property
    def total(self) -> Change:
        def add(a: float | None, b: float | None) -> float | None:
            return None if a is None and b is None else (a or 0.0) + (b or 0.0)

        return Change(
            "line",
            add(self.time.before, self.idle.before),
            add(self.time.after, self.idle.after),
            self.time.beyond_noise,
        )


@dataclass(frozen=True)
class KernelChange:
    name: str
    calls_before: float | None  # per unit
    calls_after: float | None
    gpu: Change
    regime_before: Regime | None
    regime_after: Regime | None


@dataclass(frozen=True)
class RunDiff:
    unit: str  # "step" or "s"
    measure: str  # "GPU"; "CPU" when neither run has GPU activity (then lines compare CPU-side time)
    before_steps: StepTimes
    after_steps: StepTimes
    noise_ns: float | None  # the bar a change must clear (per unit)
    run: list[Change]  # step time, GPU time by regime, idle
    lines: list[LineChange]  # by |change of GPU + idle| descending
    kernels: list[KernelChange]  # by |change of GPU time| descending
    notes: list[str]


def step_times(a: Analysis) -> StepTimes:
    """The steady-state steps of `a`'s run that no window touched (all unperturbed steps when the run never
    settled)."""
    t = a.trace
    ends = np.sort(t.steps.t_ns.astype(np.int64))
    if len(ends) < 2:
        return StepTimes(0, None, None)
    hit = perturbed_steps(ends, t.windows.start_ns, t.windows.end_ns)[1:]
    durations = np.diff(ends).astype(np.float64)
    first = a.phases.run.steady_from_step if a.phases is not None else None
    keep = ~hit
    if first is not None:
        keep &= np.arange(1, len(ends)) >= first  # durations[i] is step i + 1
    d = durations[keep]
    if not len(d):
        return StepTimes(0, None, None)
    median = float(np.median(d))
    return StepTimes(len(d), median, MAD_TO_SIGMA * float(np.median(np.abs(d - median))))


def _per_unit(a: Analysis, per_step: bool) -> float:
    """What one unit is in `a`'s analysed windows: steps (per_step) or seconds of analysed span."""
    if per_step:
        return float(max(a.steps_analysed, 1))
    return max(a.breakdown.span_ns, 1) / 1e9


def _beyond(before: float | None, after: float | None, noise: float | None) -> bool | None:
    if noise is None or before is None or after is None:
        return None
    return abs(after - before) > noise


def _gpu_by_regime(a: Analysis) -> dict[Regime, float]:
    g = a.trace.gpu
    kernels = g.kind == 0
    return {
        r: float(g.dur_ns[kernels & (a.kernel_regime == code)].sum()) for code, r in REGIMES_BY_CODE.items()
    }


def _run_changes(
    b: Analysis, a: Analysis, ub: float, ua: float, sb: StepTimes, sa: StepTimes, noise: float | None
) -> list[Change]:
    out = [Change("step time", sb.median_ns, sa.median_ns, _beyond(sb.median_ns, sa.median_ns, noise))]
    gb, ga = _gpu_by_regime(b), _gpu_by_regime(a)
    for r in Regime:
        if r is Regime.COMMUNICATION and not (gb[r] or ga[r]):
            continue  # a run without collectives: no line for them
        vb, va = gb[r] / ub, ga[r] / ua
        out.append(Change(f"GPU {r.value}", vb, va, _beyond(vb, va, noise)))
    ib, ia = _idle(b, ub, sb), _idle(a, ua, sa)
    out.append(Change("GPU idle", ib, ia, _beyond(ib, ia, noise)))
    return out


def _idle(a: Analysis, unit: float, st: StepTimes) -> float:
    """GPU idle per unit: an unprofiled step's time less the GPU busy time a profiled step measured (the
    profiler slows the CPU, not the GPU); without step times, the idle measured in the windows."""
    bd = a.breakdown
    busy = (bd.span_ns - (bd.idle_ns or 0)) / unit
    if st.median_ns is not None and a.steps_analysed:
        return max(0.0, st.median_ns - busy)
    return (bd.idle_ns or 0) / unit


def _line_changes(
    b: Analysis, a: Analysis, ub: float, ua: float, lines: LineMap, noise: float | None, cpu: bool
) -> list[LineChange]:
    after = {(s.line.file, s.line.line): s for s in a.lines}
    used: set[tuple[str, int]] = set()
    out: list[LineChange] = []
    for s in b.lines:
        found = lines.find(s.line.file, s.line.line)
        t = after.get(found[:2]) if found is not None else None
        if t is not None and found is not None:
            used.add(found[:2])
        how = found[2] if found is not None and t is not None else None
        out.append(_line_change(s.line, t.line if t else None, how, s, t, (ub, ua), noise, cpu))
    for key, t in after.items():
        if key not in used:
            out.append(_line_change(None, t.line, None, None, t, (ub, ua), noise, cpu))
    return sorted(out, key=lambda c: -abs(c.total.delta or 0.0))


def _line_change(
    lb: SourceLine | None,
    la: SourceLine | None,
    how: LineMatch | None,
    sb: LineStat | None,
    sa: LineStat | None,
    units: tuple[float, float],
    noise: float | None,
    cpu: bool,
) -> LineChange:
    """GPU time and idle per unit; for runs without GPU activity, the CPU-side time (and no idle or regime)."""
    busy = "host_ns" if cpu else "gpu_ns"
    gb = getattr(sb, busy) / units[0] if sb else 0.0
    ga = getattr(sa, busy) / units[1] if sa else 0.0
    ib = sb.idle_ns / units[0] if sb and not cpu else 0.0
    ia = sa.idle_ns / units[1] if sa and not cpu else 0.0
    return LineChange(
        lb,
        la,
        how,
        Change("CPU-side" if cpu else "GPU", gb, ga, _beyond(gb + ib, ga + ia, noise)),
        Change("idle", ib, ia, _beyond(ib, ia, noise)),
        sb.regime if sb and not cpu else None,
        sa.regime if sa and not cpu else None,
    )


def _kernel_changes(
    b: Analysis, a: Analysis, ub: float, ua: float, noise: float | None
) -> list[KernelChange]:
    kb, ka = {k.name: k for k in b.kernels}, {k.name: k for k in a.kernels}
    out = []
    for name in sorted(set(kb) | set(ka)):
        x, y = kb.get(name), ka.get(name)
        gb, ga = (x.gpu_ns / ub if x else 0.0), (y.gpu_ns / ua if y else 0.0)
        out.append(
            KernelChange(
                name,
                x.calls / ub if x else 0.0,
                y.calls / ua if y else 0.0,
                Change("GPU", gb, ga, _beyond(gb, ga, noise)),
                x.regime if x else None,
                y.regime if y else None,
            )
        )
    return sorted(out, key=lambda c: -abs(c.gpu.delta or 0.0))


def diff_runs(before: Analysis, after: Analysis, lines: LineMap) -> RunDiff:
    """What changed from `before` to `after` (analyses of the same script's two runs)."""
    sb, sa = step_times(before), step_times(after)
    per_step = before.steps_analysed > 0 and after.steps_analysed > 0
    ub, ua = _per_unit(before, per_step), _per_unit(after, per_step)
    noise = None
    if sb.sigma_ns is not None and sa.sigma_ns is not None:
        noise = NOISE_FACTOR * math.hypot(sb.sigma_ns, sa.sigma_ns)
    notes = []
    for label, x in (("before", before), ("after", after)):
        if x.phase is not Phase.STEADY and x.phase is not Phase.UNKNOWN:
            notes.append(
                f"the {label} run has no steady-state window: its figures come from the {x.phase.label}"
            )
    if not per_step:
        notes.append("a run without optimizer steps: figures are per second of analysed time, noise unknown")
    cpu = not before.trace.has_gpu and not after.trace.has_gpu
    if cpu:
        notes.append(
            "no GPU activity in either run: lines compare their CPU-side time inside the profiled windows (the "
            "main thread's sampled time on the line, a sleep or a Python loop included, or its time in torch "
            "calls where that is more; the profiler's cost included), not judged against the noise"
        )
    return RunDiff(
        unit="step" if per_step else "s",
        measure="CPU" if cpu else "GPU",
        before_steps=sb,
        after_steps=sa,
        noise_ns=noise if per_step else None,
        run=_run_changes(before, after, ub, ua, sb, sa, noise if per_step else None)[: 1 if cpu else None],
        # CPU-side time inside the windows carries the profiler's own cost: step noise says nothing about it
        lines=_line_changes(before, after, ub, ua, lines, noise if per_step and not cpu else None, cpu),
        kernels=_kernel_changes(before, after, ub, ua, noise if per_step else None),
        notes=notes,
    )
