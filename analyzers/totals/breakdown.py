"""Split each window's wall time into compute, memory, communication and overhead, and correct overhead for
the profiler.

Every nanosecond of a window goes to exactly one component (integer arithmetic, so the four sum to the span)::

    window  |<------------------------------------------------ span ------------------------------------------->|
    stream7     [gemm: compute ]   [add: memory]        [2us: overhead]             [relu: memory]
    stream8            [copy: memory ...........]
    verdict  idle| compute        |  memory     | idle  | overhead     |    idle     |  memory       | idle
             ovh                                  ovh                        ovh                      ovh

- while a kernel runs, the time is its regime's; when kernels on several streams overlap, the highest-priority
  regime wins: compute > memory > communication > overhead (overlapped memory work hides behind compute, as it
  does on the GPU);
- communication (NCCL kernels, analyzers.comm.collectives) therefore counts only where no compute or memory
  kernel runs beside it: the *exposed* collectives. The time a collective runs beside compute or memory work is
  *hidden*; it is given apart (`communication_hidden_ns`) and is not part of the sum::

    stream7   [gemm: compute ...........]        [add: memory]
    stream20             [ncclDevKernel_AllReduce .............]
    verdict   | compute                 |  comm  | memory     |    the all-reduce: hidden under the gemm,
                                                                  exposed alone, hidden under the add

- time with no busy GPU row (idle, including host<->device copies) is overhead: the article's "everything else";
  except the idle gaps a CPU-side collective covers (gloo, MPI, UCC: the gaps idle/gaps.py calls COMMUNICATION),
  which are communication: the rank waits for the others and moves the data through the host. They count in
  `communication_ns` (exposed: nothing runs beside them), not in overhead nor in `idle_ns`::

    stream7   [gemm: compute]                                   [adam: memory]
    CPU'                     [gloo:all_reduce ..............]
    verdict   | compute      |  comm (idle gap, COMMUNICATION)  | memory      |

The profiler slows the steps it records (a nanoGPT step: ~44 ms unprofiled, ~55 ms profiled), so the raw
share overstates overhead. GPU work runs at the same speed profiled or not, so per step:

    busy = (compute_ns + memory_ns + communication_ns) / steps   (the non-overhead GPU time of a step;
                                                   without steps: the same sum / span x profiled step)
    corrected overhead fraction = max(0, unprofiled_step_ns - busy) / unprofiled_step_ns

which is `(unprofiled - (profiled - overhead_per_step)) / unprofiled`; when profiled == unprofiled it equals
the raw fraction. Busy time per step is measured directly rather than as profiled step minus idle, because a
profiled step also absorbs the window's open and close stalls. Profiled step time is the mean step inside windows;
unprofiled is the median of steps wholly outside any window (median: the steps that absorb a window's start
or stop stall are outliers).
"""

from __future__ import annotations

import numpy as np

from analyzers.arrays import rows_per_window, unique_inverse
from analyzers.results import GAP_CAUSE_CODES, REGIME_CODES, Breakdown, GapCause, OverheadCorrection, Regime
from brrrtui.contract.model import Table, Trace, flag_of

_C, _M, _O, _X = (
    REGIME_CODES[r] for r in (Regime.COMPUTE, Regime.MEMORY, Regime.OVERHEAD, Regime.COMMUNICATION)
)
STEP_ANNOTATION = "Optimizer.step#"


_W = 1 << 16  # an idle gap inside a collective (span_breakdown's `waits`): no regime code, -1 included


def span_breakdown(
    lo: int,
    hi: int,
    start_ns: np.ndarray,
    end_ns: np.ndarray,
    regime: np.ndarray,
    waits: tuple[np.ndarray, np.ndarray] | None = None,
) -> Breakdown:
    """Breakdown of [lo, hi) given busy intervals and their regime codes (intervals are clipped to it).
    `waits`: (start, end) of idle gaps inside CPU-side collectives: communication, not overhead or idle."""
    span = max(0, int(hi) - int(lo))
    if span == 0:
        return Breakdown(0, 0, 0, 0, idle_ns=0)
    if waits is not None and len(waits[0]):
        start_ns = np.concatenate((start_ns, waits[0]))
        end_ns = np.concatenate((end_ns, waits[1]))
        regime = np.concatenate((regime.astype(np.int64), np.full(len(waits[0]), _W, np.int64)))
    s = np.clip(start_ns.astype(np.int64), lo, hi)
    e = np.clip(end_ns.astype(np.int64), lo, hi)
    keep = e > s
    s, e, reg = s[keep], e[keep], regime[keep]
    # The distinct interval ends cut the span into segments; a sweep counts each regime's intervals open
    # over each segment: +1 at the bound an interval starts on, -1 at the one it ends on.
    bounds, index = unique_inverse(np.concatenate(([lo, hi], s, e)))
    n, m = len(s), len(bounds)
    starts, ends = index[2 : 2 + n], index[2 + n :]
    seg = np.diff(bounds)
    on = {}
    for code in (_C, _M, _O, _X, _W):
        mine = reg == code
        opened = np.bincount(starts[mine], minlength=m) - np.bincount(ends[mine], minlength=m)
        on[code] = np.cumsum(opened[:-1]) > 0
    work = on[_C] | on[_M]
    compute = int(seg[on[_C]].sum())
    memory = int(seg[~on[_C] & on[_M]].sum())
    nothing = ~work & ~on[_X] & ~on[_O]
    comm = int(seg[~work & on[_X]].sum()) + int(seg[nothing & on[_W]].sum())
    idle = int(seg[nothing & ~on[_W]].sum())
    return Breakdown(
        span,
        compute,
        memory,
        span - compute - memory - comm,
        idle_ns=idle,
        communication_ns=comm,
        communication_hidden_ns=int(seg[work & on[_X]].sum()),
    )


def window_breakdowns(
    trace: Trace, busy: np.ndarray, regime: np.ndarray, gaps: Table | None = None
) -> dict[int, Breakdown]:
    """One Breakdown per window of `trace.windows`, from its busy GPU rows and, of its classified idle `gaps`
    (idle/gaps.py), those inside CPU-side collectives (`collective_waits`)."""
    gpu, w = trace.gpu, trace.windows
    out: dict[int, Breakdown] = {}
    wins = w.window.tolist()
    waits = {} if gaps is None else collective_waits(gaps)
    for win, lo, hi, rows in zip(
        wins, w.start_ns.tolist(), w.end_ns.tolist(), rows_per_window(gpu.window, wins), strict=True
    ):
        start, dur, mine = gpu.start_ns[rows], gpu.dur_ns[rows], busy[rows]
        out[int(win)] = span_breakdown(
            lo, hi, start[mine], start[mine] + dur[mine], regime[rows][mine], waits.get(int(win))
        )
    return out


def collective_waits(gaps: Table) -> dict[int, tuple[np.ndarray, np.ndarray]]:
    """Per window, (start, end) of the idle `gaps` that CPU-side collectives cover (cause COMMUNICATION)."""
    hit = gaps.cause == GAP_CAUSE_CODES[GapCause.COMMUNICATION]
    if not hit.any():
        return {}
    g0 = gaps.start_ns.astype(np.int64)
    g1 = g0 + gaps.dur_ns
    return {
        int(win): (g0[hit & (gaps.window == win)], g1[hit & (gaps.window == win)])
        for win in np.unique(gaps.window[hit]).tolist()
    }


def total(breakdowns: dict[int, Breakdown]) -> Breakdown:
    parts = list(breakdowns.values())
    return Breakdown(
        span_ns=sum(b.span_ns for b in parts),
        compute_ns=sum(b.compute_ns for b in parts),
        memory_ns=sum(b.memory_ns for b in parts),
        overhead_ns=sum(b.overhead_ns for b in parts),
        idle_ns=sum(b.idle_ns or 0 for b in parts),
        communication_ns=sum(b.communication_ns for b in parts),
        communication_hidden_ns=sum(b.communication_hidden_ns for b in parts),
    )


def steps_analysed(trace: Trace) -> int:
    """Optimizer steps completed inside the windows (0 for time-based windows)."""
    w = trace.windows
    ok = (w.first_step >= 0) & (w.last_step >= w.first_step)
    return int((w.last_step[ok] - w.first_step[ok] + 1).sum())


def _step_durations(trace: Trace) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(step, start_ns, end_ns) of every step whose previous step's end is known."""
    st = trace.steps
    if len(st) < 2:
        e = np.empty(0, dtype=np.int64)
        return e, e, e
    o = np.argsort(st.step, kind="stable")
    step, t = st.step[o], st.t_ns[o]
    consecutive = step[1:] == step[:-1] + 1
    return step[1:][consecutive], t[:-1][consecutive], t[1:][consecutive]


def profiled_step_ns(trace: Trace) -> float | None:
    """Mean duration of the steps recorded inside windows.

    Within a window the period between consecutive `Optimizer.step#...` annotation starts is preferred: a
    foreign trace's step-end times come from the annotation's end, which also holds whatever the step's hooks
    did (a profiler stop there stalls the last step by tens of ms). Otherwise steps of the steps table whose
    interval lies mostly inside a window.
    """
    ops, w = trace.ops, trace.windows
    periods: list[np.ndarray] = []
    is_step = flag_of(trace.string_flags(lambda s: s.startswith(STEP_ANNOTATION)), ops.name)
    wins = w.window.tolist()
    for rows in rows_per_window(ops.window, wins):
        starts = np.sort(ops.start_ns[rows][is_step[rows]])
        if len(starts) >= 2:
            periods.append(np.diff(starts))
    if periods:
        return float(np.concatenate(periods).mean())
    _, s0, s1 = _step_durations(trace)
    if not len(s0):
        return None
    inside = np.zeros(len(s0), dtype=bool)
    for lo, hi in zip(w.start_ns.tolist(), w.end_ns.tolist(), strict=True):
        overlap = np.clip(np.minimum(s1, hi) - np.maximum(s0, lo), 0, None)
        inside |= overlap * 2 > (s1 - s0)
    return float((s1 - s0)[inside].mean()) if inside.any() else None


def unprofiled_step_ns(trace: Trace) -> float | None:
    """Median duration of the steps that overlap no window of the run (None when there are none)."""
    _, s0, s1 = _step_durations(trace)
    if not len(s0):
        return None
    outside = np.ones(len(s0), dtype=bool)
    for lo, hi in zip(trace.windows.start_ns.tolist(), trace.windows.end_ns.tolist(), strict=True):
        outside &= (s1 <= lo) | (s0 >= hi)
    return float(np.median(s1[outside] - s0[outside])) if outside.any() else None


def overhead_correction(
    breakdown: Breakdown,
    profiled: float | None,
    unprofiled: float | None,
    steps: int = 0,
    replayed_idle_ns: float | None = None,
) -> OverheadCorrection:
    """`steps`: optimizer steps the windows hold. With them, the busy time per step is measured directly
    ((compute + memory + exposed communication) / steps), which no stall inside a profiled step can inflate;
    without them it is the busy share of the span times the profiled step.

    `replayed_idle_ns`: the idle the windows keep replayed at unprofiled speed (unprofiled_replay), a floor of
    the corrected share. Kernels run slightly longer inside a window than outside it, so the unprofiled step
    less the windows' busy time understates the idle of a GPU-bound step (HF GPT-2 on an H200: windows 55.6 ms
    of GPU a step against 55.0 ms in the stream's unprofiled steps, 0.5 % estimated against 4.8 % measured),
    where the replay keeps the idle that launch latency and the GPU's spacing between queued kernels leave."""
    raw = breakdown.overhead_ns / breakdown.span_ns if breakdown.span_ns else 0.0
    corrected: float | None = None
    busy = breakdown.busy_ns
    busy_per_step: float | None = None
    if steps > 0:
        busy_per_step = busy / steps
    elif profiled and breakdown.span_ns:
        busy_per_step = busy / breakdown.span_ns * profiled
    if unprofiled and busy_per_step is not None:
        corrected = min(1.0, max(0.0, (unprofiled - busy_per_step) / unprofiled))
        if replayed_idle_ns and busy + replayed_idle_ns > 0:
            corrected = max(corrected, replayed_idle_ns / (busy + replayed_idle_ns))
    return OverheadCorrection(
        profiled_step_ns=profiled,
        unprofiled_step_ns=unprofiled,
        raw_overhead_fraction=raw,
        corrected_overhead_fraction=corrected,
    )
