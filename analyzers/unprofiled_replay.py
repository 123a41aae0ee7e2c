"""The windows replayed as unprofiled steps would run them: how much of each idle gap is left without the profiler.

The profiler slows the CPU, not the GPU, and not evenly: a line that runs much Python between few kernels (an
optimizer's step, gradient clipping) is slowed far more than the GPU work it waits on. Scaling every gap by one
ratio (lines.unprofiled_idle_scale) then charges such a line idle that unprofiled steps never have: on GPT-2
eager (H200) `opt.step()` showed 15.8 ms of idle a step in the window, 0.84 ms after the uniform scaling, and
0.03 ms in the unprofiled steps the kernel stream measured.

The replay keeps the window's order of events and the GPU's durations and makes the CPU faster::

    window    CPU  |launch a ....... python ....... launch b|sync....|launch c
              GPU      [a]                             [b]           [c]
    replay    CPU  |launch a . python . launch b|sync|launch c            (CPU work time x f)
              GPU      [a]          [b]                  [c]          (each after its launch and its stream)

- the CPU's work time of each launch: wall time since the window began, less the time it was blocked in
  synchronising calls (gap_evidence.SYNC_RUNTIME); of it, the time the main thread was on the CPU is
  multiplied by a factor f, the time it was off it (a `time.sleep`, a wait for I/O or the data loader; the
  line sampler's thread CPU clock tells them apart) is kept as it was;
- a kernel (copy, memset) starts at max(its replayed launch + LAUNCH_LATENCY_NS, the end of the row before it
  on its stream), and lasts what it lasted; its launch is the return of the launch call (a first call's module
  load happens inside it);
- a synchronising call holds the CPU until every stream has finished;
- f is the largest factor (0..1, bisection) for which the replayed windows last no longer than the unprofiled
  steps the recorder timed (their median).

Each gap of the window keeps the replayed idle before the row that ends it (the trailing gap of a window: the
replayed CPU time left after the GPU's last row), charged to the line the window charged it to.

Off-CPU time is measured between two line samples (every ~2 ms): the wall time they span, less the main
thread's CPU time over it and less the time blocked in syncs (a sync spins on the CPU by default). A recording
without the thread's CPU clock (older ones, other platforms) replays all of the work time at f: there a 20 ms
`time.sleep` is charged ~15 ms.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from analyzers.arrays import lexsort
from analyzers.gap_evidence import SYNC_RUNTIME, Intervals
from analyzers.links import Links
from analyzers.model import NONE, Table, Trace, flag_of

LAUNCH_LATENCY_NS = 4_000  # launch call to kernel start on an idle GPU (the replay barely depends on it)
BISECT_STEPS = 30
CALIBRATION_ROWS = 50_000  # f is found on the first windows holding about this many rows


@dataclass(frozen=True)
class _Window:
    """One window's busy rows in launch order, with what the replay needs; times relative to its start.

    The CPU's work time (wall time less the time blocked in syncs) at a launch, a sync and the window's end is
    split into on-CPU time (`*_on`, replayed at f) and off-CPU time (`*_off`, replayed as it was)."""

    window: int
    rows: np.ndarray  # gpu rows, by launch time
    work: np.ndarray  # CPU work time of each row's launch (ns)
    work_off: np.ndarray  # the part of it spent off the CPU
    dur: np.ndarray
    by_stream: list[np.ndarray]  # per (sync segment, stream): indices into rows, in launch order
    segment_of: list[int]  # the sync segment of each by_stream group
    stream_of: list[int]  # and its stream
    sync_work: np.ndarray  # CPU work time at each synchronising call's start, ascending
    sync_off: np.ndarray
    end_work: float  # CPU work time at the window's end
    end_off: float
    steps: int  # steps the window holds (0: unknown)


def _work_time(blocked: Intervals, t: np.ndarray) -> np.ndarray:
    """CPU work time at t: t less the time blocked in synchronising calls before it."""
    out: np.ndarray = (t - blocked.covered_until(t)).astype(np.float64)
    return out


class _OffCpu:
    """Off-CPU time of the main thread, as a function of work time, from one window's line samples
    (t relative to the window's start, the thread's CPU clock; linear between two samples)."""

    def __init__(self, blocked: Intervals, t: np.ndarray, cpu: np.ndarray):
        known = cpu >= 0
        t, cpu = t[known], cpu[known]
        order = np.argsort(t, kind="stable")
        t, cpu = t[order], cpu[order]
        self.work = _work_time(blocked, t)
        # time between two samples not on the CPU, outside syncs: a spinning sync counts as on-CPU time
        off = np.clip(np.minimum(np.diff(t) - np.diff(cpu), np.diff(self.work)), 0.0, None)
        self.off = np.concatenate(([0.0], np.cumsum(off)))

    def at(self, work: np.ndarray) -> np.ndarray:
        if len(self.work) < 2:
            return np.zeros(len(work))
        out: np.ndarray = np.interp(work, self.work, self.off)
        return out


def _window_samples(trace: Trace) -> tuple[np.ndarray, np.ndarray]:
    """Line samples ordered by window, and their windows."""
    s = trace.line_samples
    order = np.argsort(s.window, kind="stable")
    return order, s.window[order]


def _prepare(trace: Trace, links: Links, busy: np.ndarray) -> list[_Window]:
    gpu, rt, w = trace.gpu, trace.runtime, trace.windows
    launch = links.kernel_launch
    has = launch >= 0
    returned = rt.start_ns + rt.dur_ns
    launch_t = np.where(has, returned[np.maximum(launch, 0)] if len(rt) else 0, gpu.start_ns)
    sync = flag_of(trace.string_flags(lambda s: bool(SYNC_RUNTIME.match(s))), rt.name)
    launch_tid = rt.tid[launch[has]]
    for tid in np.unique(rt.tid[sync]).tolist():  # a sync holds the CPU only on a thread that launches
        if not (launch_tid == tid).any():
            sync &= rt.tid != tid
    rows_all = np.nonzero(busy)[0]
    rows_all = rows_all[lexsort((launch_t[rows_all], gpu.window[rows_all]))]
    win_of_row = gpu.window[rows_all]
    sync_all = np.nonzero(sync)[0]
    sync_all = sync_all[np.argsort(rt.window[sync_all], kind="stable")]
    win_of_sync = rt.window[sync_all]
    samples_all, win_of_sample = _window_samples(trace)
    out = []
    for win, w0, w1, first, last in zip(
        w.window.tolist(),
        w.start_ns.tolist(),
        w.end_ns.tolist(),
        w.first_step.tolist(),
        w.last_step.tolist(),
        strict=True,
    ):
        rows = rows_all[np.searchsorted(win_of_row, win, "left") : np.searchsorted(win_of_row, win, "right")]
        if not len(rows):
            continue
        srows = sync_all[
            np.searchsorted(win_of_sync, win, "left") : np.searchsorted(win_of_sync, win, "right")
        ]
        blocked = Intervals(rt.start_ns[srows] - w0, rt.start_ns[srows] + rt.dur_ns[srows] - w0)
        samples = samples_all[
            np.searchsorted(win_of_sample, win, "left") : np.searchsorted(win_of_sample, win, "right")
        ]
        off = _OffCpu(blocked, trace.line_samples.t_ns[samples] - w0, trace.line_samples.cpu_ns[samples])
        steps = last - first + 1 if first >= 0 and last >= first else 0
        out.append(_window(trace, win, rows, launch_t[rows] - w0, blocked, off, w1 - w0, steps))
    return out


def _window(
    trace: Trace,
    win: int,
    rows: np.ndarray,
    launch_t: np.ndarray,
    blocked: Intervals,
    off: _OffCpu,
    length: int,
    steps: int,
) -> _Window:
    work = np.maximum(_work_time(blocked, launch_t), 0.0)
    sync_work = _work_time(blocked, blocked.s)
    end_work = float(_work_time(blocked, np.array([length]))[0])
    segment = np.searchsorted(sync_work, work, "right")
    stream = trace.gpu.stream[rows]
    key = segment.astype(np.int64) << 32 | (stream.astype(np.int64) & 0xFFFFFFFF)
    order = np.argsort(key, kind="stable")
    groups = np.split(order, np.nonzero(np.diff(key[order]))[0] + 1)
    return _Window(
        window=int(win),
        rows=rows,
        work=work,
        work_off=off.at(work),
        dur=trace.gpu.dur_ns[rows].astype(np.float64),
        by_stream=groups,
        segment_of=[int(segment[g[0]]) for g in groups],
        stream_of=[int(stream[g[0]]) for g in groups],
        sync_work=sync_work,
        sync_off=off.at(sync_work),
        end_work=end_work,
        end_off=float(off.at(np.array([end_work]))[0]),
        steps=steps,
    )


def _replay(win: _Window, f: float) -> tuple[np.ndarray, float, float]:
    """(replayed start of each row of win.rows, the replayed window's length, the GPU's last end)."""
    start = np.empty(len(win.rows))
    ends: dict[int, float] = {}
    base = wbase = obase = 0.0  # replayed CPU time, and the work and off-CPU time it stands for

    def cpu(work: np.ndarray | float, off: np.ndarray | float) -> np.ndarray | float:
        return base + f * (work - off - (wbase - obase)) + (off - obase)

    gi = 0
    n_groups = len(win.by_stream)
    for seg in range(len(win.sync_work) + 1):
        while gi < n_groups and win.segment_of[gi] == seg:
            idx, stream = win.by_stream[gi], win.stream_of[gi]
            d = win.dur[idx]
            launch = np.asarray(cpu(win.work[idx], win.work_off[idx])) + LAUNCH_LATENCY_NS
            before = np.concatenate(([0.0], np.cumsum(d)[:-1]))
            launch[0] = max(launch[0], ends.get(stream, 0.0))
            st = before + np.maximum.accumulate(launch - before)
            start[idx] = st
            ends[stream] = float(st[-1] + d[-1])
            gi += 1
        if seg < len(win.sync_work):
            cpu_at = float(cpu(win.sync_work[seg], win.sync_off[seg]))
            base = max(cpu_at, max(ends.values(), default=0.0))
            wbase, obase = float(win.sync_work[seg]), float(win.sync_off[seg])
    gpu_end = max(ends.values(), default=0.0)
    cpu_end = float(cpu(win.end_work, win.end_off))
    return start, max(cpu_end, gpu_end), gpu_end


def _calibrate(windows: list[_Window], unprofiled_step_ns: float) -> float | None:
    """The CPU factor f for which the first windows (about CALIBRATION_ROWS rows, whole windows with known
    steps) replay in the unprofiled step time; None without such a window."""
    chosen, rows = [], 0
    for win in windows:
        if win.steps <= 0:
            continue
        chosen.append(win)
        rows += len(win.rows)
        if rows >= CALIBRATION_ROWS:
            break
    if not chosen:
        return None
    target = unprofiled_step_ns * sum(win.steps for win in chosen)

    def span(f: float) -> float:
        return sum(_replay(win, f)[1] for win in chosen)

    # the largest f whose replay fits: where the GPU sets the pace, a faster CPU would not shorten the step,
    # and the CPU is taken no faster than the step needs
    lo, hi = 0.0, 1.0
    if span(hi) <= target:
        return hi
    if span(lo) > target:
        return lo
    for _ in range(BISECT_STEPS):
        mid = (lo + hi) / 2
        lo, hi = (mid, hi) if span(mid) <= target else (lo, mid)
    return lo


def _idle_before(start: np.ndarray, dur: np.ndarray) -> np.ndarray:
    """Device-wide idle before each row (replayed start times; the window starts at 0)."""
    o = np.argsort(start, kind="stable")
    s, e = start[o], start[o] + dur[o]
    reach = np.concatenate(([0.0], np.maximum.accumulate(e)[:-1]))
    idle = np.empty(len(start))
    idle[o] = np.maximum(0.0, s - reach)
    return idle


def unprofiled_gaps(
    trace: Trace, links: Links, gaps: Table, busy: np.ndarray, unprofiled_step_ns: float | None
) -> Table | None:
    """`gaps` (device-wide, gaps.find_gaps) with each dur_ns replaced by the idle the replay leaves there;
    None when the run cannot be replayed (no unprofiled step time, no window with known steps)."""
    if not unprofiled_step_ns or not len(gaps):
        return None
    windows = _prepare(trace, links, busy)
    f = _calibrate(windows, unprofiled_step_ns)
    if f is None:
        return None
    idle_of_row = np.full(len(trace.gpu), np.nan)
    trailing: dict[int, float] = {}  # per window: the replayed CPU time left after the GPU's last row
    for win in windows:
        start, length, gpu_end = _replay(win, f)
        idle_of_row[win.rows] = _idle_before(start, win.dur)
        trailing[win.window] = max(0.0, length - gpu_end)
    nxt = gaps["next_row"]
    replayed = np.where(nxt >= 0, idle_of_row[np.maximum(nxt, 0)], np.nan)
    tails = np.nonzero(nxt == NONE)[0]  # a window's trailing gap (one a window)
    replayed[tails] = [trailing.get(int(w), np.nan) for w in gaps.window[tails].tolist()]
    dur = np.where(
        np.isfinite(replayed), np.minimum(replayed, gaps.dur_ns), 0.0
    )  # never more than the window's
    cols = {k: gaps[k] for k in gaps.columns}
    cols["dur_ns"] = np.rint(dur).astype(np.int64)
    return Table(cols)
