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
  multiplied by a factor f, the time it waited off it outside torch (a `time.sleep`, I/O, a data loader's
  queue: analyzers/idle/cpu_waits.py) is kept as it was;
- a kernel (copy, memset) starts at max(its replayed launch + the launch latency, the end of the row before it
  on its stream + the gap the GPU leaves between queued kernels), both as the window shows them
  (_gpu_spacing: ~1.5 us and ~1.3 us on an H200), and lasts what it lasted; its launch is the return of the
  launch call (a first call's module load happens inside it);
- a synchronising call holds the CPU until every stream has finished;
- f is the largest factor (0..1, bisection) for which the replayed windows last no longer than the unprofiled
  steps the recorder timed (their median).

Each gap of the window keeps the replayed idle before the row that ends it (the trailing gap of a window: the
replayed CPU time left after the GPU's last row), charged to the line the window charged it to.

Measured on the H200 against the kernel stream's unprofiled steps (validation/unprofiled_lines.py, four
workloads): without the queued kernels' gap the replay left GPT-2's forward lines 6-20 points under; a
recording without the thread's CPU clock (older ones, other platforms) replays all of the work time at f, and
there a 20 ms `time.sleep` is charged 16 ms a step instead of 19.8.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from analyzers.arrays import lexsort, rows_per_window
from analyzers.idle.cpu_waits import Waits
from analyzers.idle.gap_evidence import SYNC_RUNTIME, Intervals
from analyzers.idle.measured_regions import measured_regions
from analyzers.link.links import Links
from brrrtui.contract.model import NONE, Table, Trace, flag_of

LAUNCH_LATENCY_NS = 4_000  # launch call to kernel start on an idle GPU, where a window shows too few
MIN_MEDIAN_ROWS = 8  # rows a window needs for its own median launch latency and queued gap
BISECT_STEPS = 30
CALIBRATION_ROWS = 50_000  # f is found on the first windows holding about this many rows


@dataclass(frozen=True)
class _Window:
    """One window's busy rows in launch order, with what the replay needs; times relative to its start.

    Of the CPU's work time (wall time less the time blocked in syncs) up to a launch, a sync and the window's
    end, a part is not replayed at f (`*_fixed`: waits off the CPU, replayed as they were; the measured
    regions, replayed at their own factor), and lasts `*_kept` replayed."""

    window: int
    rows: np.ndarray  # gpu rows, by launch time
    work: np.ndarray  # CPU work time of each row's launch (ns)
    work_fixed: np.ndarray  # the part of it not replayed at f (waits, measured regions)
    work_kept: np.ndarray  # and what that part lasts replayed
    dur: np.ndarray
    gap: np.ndarray  # the least time from the end of the row before it (on its stream) to its start
    latency: float  # from a launch's return to its kernel's start on an idle GPU
    by_stream: list[np.ndarray]  # per (sync segment, stream): indices into rows, in launch order
    segment_of: list[int]  # the sync segment of each by_stream group
    stream_of: list[int]  # and its stream
    sync_work: np.ndarray  # CPU work time at each synchronising call's start, ascending
    sync_fixed: np.ndarray
    sync_kept: np.ndarray
    end_work: float  # CPU work time at the window's end
    end_fixed: float
    end_kept: float
    steps: int  # steps the window holds (0: unknown)


def _work_time(blocked: Intervals, t: np.ndarray) -> np.ndarray:
    """CPU work time at t: t less the time blocked in synchronising calls before it."""
    out: np.ndarray = (t - blocked.covered_until(t)).astype(np.float64)
    return out


class _Fixed:
    """In one window, as functions of work time: the CPU time not replayed at f, and what it lasts replayed.
    Waits off the CPU (cpu_waits) last what they lasted; the measured regions (the optimizer's step() and
    zero_grad(): measured_regions) last their time times their factor."""

    def __init__(
        self, blocked: Intervals, t: np.ndarray, waited: np.ndarray, regions: list[tuple[Intervals, float]]
    ):
        self.work = _work_time(blocked, t)  # t: the window's sample times, relative to its start
        self.waited = waited  # the wait time up to each sample
        # each region's scopes in work time (a scope holds no sync worth removing: a blocked call in it is rare)
        self.regions = [
            (
                Intervals(
                    _work_time(blocked, iv.s).astype(np.int64), _work_time(blocked, iv.e).astype(np.int64)
                ),
                k,
            )
            for iv, k in regions
        ]

    def at(self, work: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        waited = np.interp(work, self.work, self.waited) if len(self.work) >= 2 else np.zeros(len(work))
        fixed, kept = waited.copy(), waited.copy()
        w = work.astype(np.int64)
        for scopes, factor in self.regions:
            inside = scopes.covered_until(w).astype(np.float64)
            fixed += inside
            kept += factor * inside
        return fixed, kept


class _ByWindow:
    """Rows of one table grouped by window: `of(w)` gives window w's rows (indices into the table)."""

    def __init__(self, rows: np.ndarray, window: np.ndarray):
        order = np.argsort(window[rows], kind="stable")
        self.rows, self.keys = rows[order], window[rows][order]

    def of(self, win: int) -> np.ndarray:
        rows: np.ndarray = self.rows[
            np.searchsorted(self.keys, win, "left") : np.searchsorted(self.keys, win, "right")
        ]
        return rows


def _intervals(start: np.ndarray, dur: np.ndarray, rows: np.ndarray, w0: int) -> Intervals:
    return Intervals(start[rows] - w0, start[rows] + dur[rows] - w0)


@dataclass(frozen=True)
class _Pending:
    """A window's replay inputs before its per-row arrays are built (`build`): the replay builds each window's
    when it comes to it and drops them after, so only one window's (and the calibration's) are held at once,
    not every row's (~60 bytes a row)."""

    trace: Trace
    window: int
    rows: np.ndarray
    launch_t: np.ndarray  # every gpu row's launch time (shared by the windows)
    blocked: Intervals
    off: _Fixed
    span: tuple[int, int]
    steps: int

    def build(self) -> _Window:
        w0 = self.span[0]
        return _window(
            self.trace,
            self.window,
            self.rows,
            self.launch_t[self.rows] - w0,
            self.blocked,
            self.off,
            self.span,
            self.steps,
        )


def _prepare(trace: Trace, links: Links, busy: np.ndarray, waits: Waits) -> list[_Pending]:
    gpu, rt, w = trace.gpu, trace.runtime, trace.windows
    launch = links.kernel_launch
    has = launch >= 0
    launch_t = gpu.start_ns.copy()  # when its launch returned; a row without one: its own start
    launched = launch[has]
    launch_t[has] = rt.start_ns[launched] + rt.dur_ns[launched]
    del launched
    sync = flag_of(trace.string_flags(lambda s: bool(SYNC_RUNTIME.match(s))), rt.name)
    launch_tid = rt.tid[launch[has]]
    for tid in np.unique(rt.tid[sync]).tolist():  # a sync holds the CPU only on a thread that launches
        if not (launch_tid == tid).any():
            sync &= rt.tid != tid
    rows_all = np.nonzero(busy)[0]
    rows_all = rows_all[lexsort((launch_t[rows_all], gpu.window[rows_all]))]
    win_of_row = gpu.window[rows_all]
    syncs = _ByWindow(np.nonzero(sync)[0], rt.window)
    regions = [(r, _ByWindow(np.arange(len(r.window)), r.window)) for r in measured_regions(trace)]
    wins = w.window.tolist()
    out = []
    for win, w0, w1, first, last, stretch in zip(
        wins,
        w.start_ns.tolist(),
        w.end_ns.tolist(),
        w.first_step.tolist(),
        w.last_step.tolist(),
        rows_per_window(win_of_row, wins),  # win_of_row is sorted: slices
        strict=True,
    ):
        rows = rows_all[stretch]
        if not len(rows):
            continue
        blocked = _intervals(rt.start_ns, rt.dur_ns, syncs.of(win), w0)
        t, waited = waits.of_window(win)
        scopes = [
            (Intervals(r.start[i] - w0, r.end[i] - w0), r.factor) for r, by in regions if len(i := by.of(win))
        ]
        off = _Fixed(blocked, (t - w0).astype(np.int64), waited, scopes)
        steps = last - first + 1 if first >= 0 and last >= first else 0
        out.append(_Pending(trace, win, rows, launch_t, blocked, off, (w0, w1), steps))
    return out


def _window(
    trace: Trace,
    win: int,
    rows: np.ndarray,
    launch_t: np.ndarray,
    blocked: Intervals,
    off: _Fixed,
    span: tuple[int, int],
    steps: int,
) -> _Window:
    """One window's rows prepared for the replay (launch_t relative to span[0], the window's start)."""
    work = np.maximum(_work_time(blocked, launch_t), 0.0)
    gap, latency = _gpu_spacing(trace.gpu.start_ns[rows] - span[0], trace.gpu.dur_ns[rows], launch_t)
    sync_work = _work_time(blocked, blocked.s)
    end_work = float(_work_time(blocked, np.array([span[1] - span[0]]))[0])
    segment = np.searchsorted(sync_work, work, "right")
    stream = trace.gpu.stream[rows]
    key = segment.astype(np.int64) << 32 | (stream.astype(np.int64) & 0xFFFFFFFF)
    order = np.argsort(key, kind="stable")
    groups = np.split(order, np.nonzero(np.diff(key[order]))[0] + 1)
    (work_fixed, work_kept), (sync_fixed, sync_kept) = off.at(work), off.at(sync_work)
    end_fixed, end_kept = off.at(np.array([end_work]))
    return _Window(
        window=int(win),
        rows=rows,
        work=work,
        work_fixed=work_fixed,
        work_kept=work_kept,
        dur=trace.gpu.dur_ns[rows].astype(np.float64),
        gap=gap,
        latency=latency,
        by_stream=groups,
        segment_of=[int(segment[g[0]]) for g in groups],
        stream_of=[int(stream[g[0]]) for g in groups],
        sync_work=sync_work,
        sync_fixed=sync_fixed,
        sync_kept=sync_kept,
        end_work=end_work,
        end_fixed=float(end_fixed[0]),
        end_kept=float(end_kept[0]),
        steps=steps,
    )


def _gpu_spacing(start: np.ndarray, dur: np.ndarray, launch_t: np.ndarray) -> tuple[np.ndarray, float]:
    """(each row's least gap after the row before it, the launch latency), as the window shows them; times
    relative to the window's start.

    A kernel launched while the GPU is still busy does not start when the one before it ends: ~1.3 us pass on an
    H200 (more after a memset or a copy), ~1,000 times a GPT-2 step. A row launched before the previous row
    ended (queued) keeps the gap it had; any other row gets the median of the queued ones (0 with fewer than
    MIN_MEDIAN_ROWS). On an idle GPU a kernel starts the median delay after its launch call returns that the
    rows launched onto an idle GPU show (~1.5 us on an H200; LAUNCH_LATENCY_NS with too few of them)."""
    order = np.argsort(start, kind="stable")
    s, e, launch = start[order], start[order] + dur[order], launch_t[order]
    prev_end = np.concatenate(([-np.inf], np.maximum.accumulate(e)[:-1]))
    queued = launch < prev_end
    gap_sorted = np.maximum(s - prev_end, 0.0)
    typical = float(np.median(gap_sorted[queued])) if queued.sum() >= MIN_MEDIAN_ROWS else 0.0
    delay = (s - launch)[~queued]
    delay = delay[delay > 0]  # a row without a launch call has its own start as "launch"
    latency = float(np.median(delay)) if len(delay) >= MIN_MEDIAN_ROWS else float(LAUNCH_LATENCY_NS)
    gap = np.empty(len(start))
    gap[order] = np.where(queued, gap_sorted, typical)
    return gap, latency


def _replay(win: _Window, f: float) -> tuple[np.ndarray, float, float]:
    """(replayed start of each row of win.rows, the replayed window's length, the GPU's last end)."""
    start = np.empty(len(win.rows))
    ends: dict[int, float] = {}
    base = wbase = fbase = kbase = 0.0  # replayed CPU time, and the work, fixed and kept time it stands for

    def cpu(
        work: np.ndarray | float, fixed: np.ndarray | float, kept: np.ndarray | float
    ) -> np.ndarray | float:
        return base + f * (work - fixed - (wbase - fbase)) + (kept - kbase)

    gi = 0
    n_groups = len(win.by_stream)
    for seg in range(len(win.sync_work) + 1):
        while gi < n_groups and win.segment_of[gi] == seg:
            idx, stream = win.by_stream[gi], win.stream_of[gi]
            d, g = win.dur[idx], win.gap[idx]
            launch = np.asarray(cpu(win.work[idx], win.work_fixed[idx], win.work_kept[idx])) + win.latency
            # where each row would start if all were queued behind the first: after the rows before it and
            # their gaps
            before = np.concatenate(([0.0], np.cumsum(d)[:-1])) + np.cumsum(g) - g[0]
            if stream in ends:
                launch[0] = max(launch[0], ends[stream] + g[0])
            st = before + np.maximum.accumulate(launch - before)
            start[idx] = st
            ends[stream] = float(st[-1] + d[-1])
            gi += 1
        if seg < len(win.sync_work):
            cpu_at = float(cpu(win.sync_work[seg], win.sync_fixed[seg], win.sync_kept[seg]))
            base = max(cpu_at, max(ends.values(), default=0.0))
            wbase, fbase, kbase = (float(a[seg]) for a in (win.sync_work, win.sync_fixed, win.sync_kept))
    gpu_end = max(ends.values(), default=0.0)
    cpu_end = float(cpu(win.end_work, win.end_fixed, win.end_kept))
    return start, max(cpu_end, gpu_end), gpu_end


def _calibration_windows(windows: list[_Pending]) -> list[_Pending]:
    """The first windows with known steps, whole, up to about CALIBRATION_ROWS rows."""
    chosen, rows = [], 0
    for win in windows:
        if win.steps <= 0:
            continue
        chosen.append(win)
        rows += len(win.rows)
        if rows >= CALIBRATION_ROWS:
            break
    return chosen


def _calibrate(chosen: list[_Window], unprofiled_step_ns: float) -> float | None:
    """The CPU factor f for which the `chosen` windows (_calibration_windows) replay in the unprofiled step
    time; None without a window."""
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
    trace: Trace,
    links: Links,
    gaps: Table,
    busy: np.ndarray,
    unprofiled_step_ns: float | None,
    waits: Waits,
) -> Table | None:
    """`gaps` (device-wide, gaps.find_gaps) with each dur_ns replaced by the idle the replay leaves there
    (`waits`: the main thread's, cpu_waits.main_thread_waits);
    None when the run cannot be replayed (no unprofiled step time, no window with known steps)."""
    if not unprofiled_step_ns or not len(gaps):
        return None
    windows = _prepare(trace, links, busy, waits)
    built = {p.window: p.build() for p in _calibration_windows(windows)}
    f = _calibrate(list(built.values()), unprofiled_step_ns)
    if f is None:
        return None
    idle_of_row = np.full(len(trace.gpu), np.nan)
    trailing: dict[int, float] = {}  # per window: the replayed CPU time left after the GPU's last row
    for pending in windows:
        win = built.pop(pending.window, None) or pending.build()
        start, length, gpu_end = _replay(win, f)
        idle_of_row[win.rows] = _idle_before(start, win.dur)
        trailing[win.window] = max(0.0, length - gpu_end)
    nxt = gaps["next_row"]
    replayed = np.where(nxt >= 0, idle_of_row[np.maximum(nxt, 0)], np.nan)
    tails = np.nonzero(nxt == NONE)[0]  # a window's trailing gap (one a window)
    replayed[tails] = [trailing.get(int(w), np.nan) for w in gaps.window[tails].tolist()]
    unknown = ~np.isfinite(replayed)
    # never more than the window's; in place (a column of every gap: 8 MB at 1 M)
    dur = np.minimum(replayed, gaps.dur_ns, out=replayed)
    dur[unknown] = 0.0
    cols = {k: gaps[k] for k in gaps.columns}
    cols["dur_ns"] = np.rint(dur, out=dur).astype(np.int64)
    return Table(cols)
