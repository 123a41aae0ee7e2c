"""The ranks of one distributed run side by side: step times per rank, time in communication, the straggler.

Every rank records its own trace, with its windows on the same step numbers (brrrtui.capture.lockstep), so a
window present on every rank covers the same work on each. Inside those common windows:

- **communication** is the wall time during which a collective is in flight on the rank: CPU-side
  collectives that span their whole operation (gloo's `gloo:all_reduce`, ...) and NCCL kernels on the GPU
  (`ncclKernel_*`, `ncclDevKernel_*`), merged where they overlap;
- **the straggler** is the rank that waits least in collectives. A collective ends on every rank when the
  last one arrives, so step times are equal across ranks in a synchronous loop (DDP, FSDP) and tell nothing;
  the time each rank spends inside collectives does: the ranks that arrive early wait for the late one. Its
  lateness per step is the other ranks' median wait minus its own. Durations only, so the ranks' clocks
  need not agree. Without collectives, the rank with the slowest median step is the straggler;
- **its line** (and **its kernel**): the source line the straggler's main thread was sampled on (the kernel it
  ran on the GPU, collectives aside) for the most time per step beyond what the other ranks spent on it.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Any

import numpy as np

from analyzers.arrays import length, merged
from analyzers.comm.collectives import (
    is_comm_kernel as is_comm_kernel,
    is_comm_op as is_comm_op,
    overlap_ns,
)
from analyzers.results import Finding, FindingKind
from brrrtui.contract.model import GpuKind, SourceLine, Trace, WindowMode

STRAGGLER_MIN_FRACTION = 0.05  # lateness under this share of the median step is noise, not a straggler


@dataclass(frozen=True)
class RankFigures:
    rank: int
    steps: int
    step_ns: float | None  # median step outside windows (unprofiled)
    step_p90_ns: float | None
    windows: int  # step windows recorded
    comm_ns_per_step: float | None  # in the common windows; None without any collective
    exposed_comm_ns_per_step: float | None  # NCCL kernel time no other kernel overlaps; None without NCCL
    busy_ns_per_step: float | None  # step time in the common windows less communication


@dataclass(frozen=True)
class Straggler:
    rank: int
    late_ns: float  # per step
    basis: str  # "communication" (others wait for it) or "step time" (no collective recorded)
    line: SourceLine | None  # where its extra time went, from the line sampler
    line_extra_ns: float  # per step, beyond the other ranks' median on that line
    kernel: str | None = None  # the kernel whose GPU time per step exceeds the other ranks' the most
    kernel_extra_ns: float = 0.0

    @property
    def cause(self) -> str:
        """ "line" when its line explains at least half of the lateness, "gpu" when its kernels do (the same
        kernels, slower: that GPU), else "unknown"."""
        if self.line is not None and self.line_extra_ns >= 0.5 * self.late_ns:
            return "line"
        if self.kernel is not None and self.kernel_extra_ns >= 0.5 * self.late_ns:
            return "gpu"
        return "unknown"


@dataclass(frozen=True)
class RankComparison:
    ranks: tuple[RankFigures, ...]
    common_windows: tuple[tuple[int, int], ...]  # (first step, last step) recorded on every rank
    unaligned_windows: int  # step windows some rank has and another has not
    straggler: Straggler | None
    median_step_ns: float | None
    imbalance: float | None  # busy time per step across ranks: slowest / mean - 1

    @property
    def exposed(self) -> RankFigures | None:
        """The rank with the least exposed communication per step (NCCL runs), if any: on the others it holds
        waiting for a later rank too, on this one mostly the transfer itself, which overlap can hide."""
        known = [r for r in self.ranks if r.exposed_comm_ns_per_step is not None]
        return min(known, key=lambda r: r.exposed_comm_ns_per_step or 0.0) if known else None


def _step_windows(trace: Trace) -> list[tuple[int, int, int]]:
    """(window id, first step, last step) of the step windows that covered at least one step."""
    w = trace.windows
    keep = (w.mode == int(WindowMode.STEPS)) & (w.first_step >= 0)
    return list(
        zip(w.window[keep].tolist(), w.first_step[keep].tolist(), w.last_step[keep].tolist(), strict=True)
    )


def _outside_steps(trace: Trace) -> np.ndarray:
    """Durations of the steps no window touched (nor the step right after one)."""
    t = np.sort(trace.steps.t_ns)
    if len(t) < 2:
        return np.empty(0)
    steps = np.arange(1, len(t))
    touched = np.zeros(len(steps), dtype=bool)
    for _, first, last in _step_windows(trace):
        touched |= (steps >= first) & (steps <= last + 1)
    return np.diff(t)[~touched].astype(float)


def _comm_ns(trace: Trace, window: int) -> tuple[int, int | None, bool]:
    """In one window: communication wall time; of it, NCCL kernel time no other kernel overlaps (exposed;
    None without NCCL kernels); whether any collective was seen at all."""
    op_flags = trace.string_flags(is_comm_op)
    ops = trace.ops
    sel = (ops.window == window) & (ops.name >= 0)
    sel[sel] = op_flags[ops.name[sel]]
    g = trace.gpu
    kernels = (g.window == window) & (g.kind == int(GpuKind.KERNEL)) & (g.name >= 0)
    comm = kernels.copy()
    comm[kernels] = trace.string_flags(is_comm_kernel)[g.name[kernels]]
    starts = np.concatenate([ops.start_ns[sel], g.start_ns[comm]]).astype(np.int64)
    ends = starts + np.concatenate([ops.dur_ns[sel], g.dur_ns[comm]]).astype(np.int64)
    total = length(merged(starts, ends))
    exposed = None
    if comm.any():
        gs, ge = g.start_ns[comm].astype(np.int64), (g.start_ns[comm] + g.dur_ns[comm]).astype(np.int64)
        on_gpu = merged(gs, ge)
        other = kernels & ~comm
        busy = merged(
            g.start_ns[other].astype(np.int64), (g.start_ns[other] + g.dur_ns[other]).astype(np.int64)
        )
        exposed = int((on_gpu[1] - on_gpu[0]).sum()) - overlap_ns(on_gpu, busy)
    return total, exposed, bool(len(starts))


def _window_step_ns(trace: Trace, first: int, last: int) -> int | None:
    t = dict(zip(trace.steps.step.tolist(), trace.steps.t_ns.tolist(), strict=True))
    if first - 1 not in t or last not in t:
        return None
    return int(t[last] - t[first - 1])


def _lines_ns(trace: Trace, windows: set[int]) -> dict[SourceLine, float]:
    """Main-thread time per source line in these windows: line samples x the sampling interval."""
    s = trace.line_samples
    keep = np.isin(s.window, list(windows)) & (s.line >= 0) & (s.line < len(trace.lines))
    if keep.sum() < 2:
        return {}
    order = np.lexsort((s.t_ns[keep], s.window[keep]))
    t, w = s.t_ns[keep][order], s.window[keep][order]
    gaps = np.diff(t)[np.diff(w) == 0]
    period = float(np.median(gaps)) if len(gaps) else 0.0
    ids, counts = np.unique(s.line[keep], return_counts=True)
    return {trace.lines[i]: c * period for i, c in zip(ids.tolist(), counts.tolist(), strict=True)}


def _kernels_ns(trace: Trace, windows: set[int]) -> dict[str, float]:
    """GPU time per kernel name in these windows, collectives left out (their time is waiting)."""
    g = trace.gpu
    keep = np.isin(g.window, list(windows)) & (g.kind == int(GpuKind.KERNEL)) & (g.name >= 0)
    keep[keep] = ~trace.string_flags(is_comm_kernel)[g.name[keep]]
    ids, inverse = np.unique(g.name[keep], return_inverse=True)
    sums = np.bincount(inverse, weights=g.dur_ns[keep].astype(float), minlength=len(ids))
    return {trace.strings[i]: float(v) for i, v in zip(ids.tolist(), sums.tolist(), strict=True)}


def _where_time_went(
    trace: Trace, windows: set[int], steps: int
) -> tuple[dict[Any, float], dict[Any, float]]:
    """Per step in these windows: main-thread time by source line, GPU time by kernel."""
    if not steps:
        return {}, {}
    lines = {k: v / steps for k, v in _lines_ns(trace, windows).items()}
    return lines, {k: v / steps for k, v in _kernels_ns(trace, windows).items()}


def compare_ranks(traces: dict[int, Trace]) -> RankComparison:
    """Every rank's figures, the windows they share and the straggler, if any."""
    by_rank = {r: {(f, last): w for w, f, last in _step_windows(tr)} for r, tr in traces.items()}
    spans = [set(v) for v in by_rank.values()]
    common = sorted(set.intersection(*spans)) if spans else []
    unaligned = len(set.union(*spans) - set(common)) if spans else 0
    figures, waits, busy, lines, kernels = [], {}, {}, {}, {}
    for r in sorted(traces):
        tr = traces[r]
        outside = _outside_steps(tr)
        comm = seen = 0
        step_total = covered = 0
        exposed: int | None = None
        for f, last in common:
            ns, exposed_ns, any_comm = _comm_ns(tr, by_rank[r][(f, last)])
            wall = _window_step_ns(tr, f, last)
            if wall is not None:
                comm, seen, step_total = comm + ns, seen or any_comm, step_total + wall
                covered += last - f + 1
                if exposed_ns is not None:
                    exposed = (exposed or 0) + exposed_ns
        if covered:
            busy[r] = (step_total - comm) / covered
            if seen:
                waits[r] = comm / covered
        lines[r], kernels[r] = _where_time_went(tr, {by_rank[r][c] for c in common}, covered)
        figures.append(
            RankFigures(
                rank=r,
                steps=len(tr.steps),
                step_ns=float(np.median(outside)) if len(outside) else None,
                step_p90_ns=float(np.percentile(outside, 90)) if len(outside) else None,
                windows=len(by_rank[r]),
                comm_ns_per_step=waits.get(r),
                exposed_comm_ns_per_step=exposed / covered if exposed is not None and covered else None,
                busy_ns_per_step=busy.get(r),
            )
        )
    medians = [f.step_ns for f in figures if f.step_ns is not None]
    median_step = float(np.median(medians)) if medians else None
    return RankComparison(
        ranks=tuple(figures),
        common_windows=tuple(common),
        unaligned_windows=unaligned,
        straggler=_straggler(figures, waits, (lines, kernels), median_step),
        median_step_ns=median_step,
        imbalance=_imbalance(busy),
    )


def _imbalance(busy: dict[int, float]) -> float | None:
    if len(busy) < 2:
        return None
    mean = float(np.mean(list(busy.values())))
    return max(busy.values()) / mean - 1 if mean > 0 else None


def _straggler(
    figures: list[RankFigures],
    waits: dict[int, float],
    where: tuple[dict[int, dict[Any, float]], dict[int, dict[Any, float]]],
    median_step: float | None,
) -> Straggler | None:
    """`where`: per rank, time per step by line and by kernel."""
    if len(waits) >= 2 and len(waits) == len(figures):
        rank = min(waits, key=lambda r: waits[r])
        late = float(np.median([w for r, w in waits.items() if r != rank])) - waits[rank]
        basis = "communication"
    else:
        steps = {f.rank: f.step_ns for f in figures if f.step_ns is not None}
        if len(steps) < 2:
            return None
        rank = max(steps, key=lambda r: steps[r])
        late = steps[rank] - float(np.median([s for r, s in steps.items() if r != rank]))
        basis = "step time"
    if median_step is None or late <= 0 or late < STRAGGLER_MIN_FRACTION * median_step:
        return None
    line, line_extra = _most_extra(rank, where[0])
    kernel, kernel_extra = _most_extra(rank, where[1])
    return Straggler(rank, late, basis, line, line_extra, kernel, kernel_extra)


def _most_extra(rank: int, per_rank: dict[int, dict[Any, float]]) -> tuple[Any, float]:
    """The straggler's line (or kernel) with the most time per step beyond the other ranks' median on it."""
    mine, others = per_rank.get(rank, {}), [v for r, v in per_rank.items() if r != rank]
    if not mine or not others:
        return None, 0.0
    extra = {k: v - float(np.median([o.get(k, 0.0) for o in others])) for k, v in mine.items()}
    best = max(extra, key=lambda k: extra[k])
    return (best, extra[best]) if extra[best] > 0 else (None, 0.0)


def name_straggler(findings: list[Finding], comparison: RankComparison, shown: int) -> list[Finding]:
    """The findings of rank `shown` with each communication finding waiting for the run's straggler (its
    rank, how late it is per step, and its line or kernel): what the rank waited for inside its collectives.
    Unchanged without a straggler, or on the straggler itself."""
    s = comparison.straggler
    if s is None or s.rank == shown:
        return findings
    return [
        dataclasses.replace(f, waits_for=s) if f.kind is FindingKind.COMMUNICATION else f for f in findings
    ]
