"""When the main thread waited off the CPU outside torch: a `time.sleep`, I/O, a lock, a data loader's queue.

The line sampler (brrrtui/capture/lines.py) reads the main thread's CPU clock with each sample, ~2 ms apart.
Between two samples of a window (a stretch), the time off the CPU is the wall time less the thread's CPU time,
and less the time a torch call or op ran (the main thread waits off the CPU inside `loss.backward()` while the
autograd thread works) or a synchronising call blocked (a sync spins on the CPU by default)::

    samples       87        87        87        88
    CPU clock     |=|.......|.........|=====|===|      = on the CPU, . off it
    stretch       <-- wait --><-- wait --><- work ->

Only a stretch mostly off the CPU (WAIT_SHARE, alone or with a neighbouring stretch: a short sleep straddles
a sample) is a wait. The short waits of code that runs (the GIL handed to the sampler, an allocator's lock)
are part of the profiled work.

Inside its stretch a wait is placed in the time outside torch calls and syncs, the longest free stretch of time
first: the sampler says how long the thread was off the CPU, not when, and a sleep is one long torch-free
stretch where the Python between a loop's torch calls is many short ones. Spread over the whole stretch, part
of a 2 ms sleep went to the GPU gaps of the tanh loop before it (H200: 1.73 ms of ~2.1 charged to the sleep).
Recordings without the clock (older ones, other platforms) have no waits.

The unprofiled replay keeps a wait's time as it was (the profiler does not slow a sleep), and a GPU gap that
waits cover is a WAIT gap, charged to the line the thread waited on (gaps.classify_gaps).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from analyzers.arrays import lexsort, window_groups
from analyzers.idle.gap_evidence import Intervals
from brrrtui.contract.model import NONE, Trace, flag_of

WAIT_SHARE = 0.5  # a stretch this much off the CPU (of its time outside torch) is a wait
MIN_PIECE_NS = 100_000  # a free stretch of time this long can hold a wait on its own
_DTYPES = (np.int64, np.int64, np.int64, np.float64)  # Pieces' columns


@dataclass(frozen=True)
class Pieces:
    """Stretches of time a wait fills evenly, in (window, time) order; a stretch's leftover spread over all of
    it overlaps its other pieces."""

    window: np.ndarray
    start: np.ndarray  # ns
    end: np.ndarray  # ns
    off: np.ndarray  # ns of wait in it

    def cumulative(self, rows: slice | np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """(times, the wait up to each), a piecewise-linear function of time for np.interp: the pieces'
        densities (wait per ns) summed where they overlap."""
        s, e, off = self.start[rows], self.end[rows], self.off[rows]
        density = off / np.maximum(e - s, 1)
        t = np.concatenate((s, e))
        order = np.argsort(t, kind="stable")
        t = t[order]
        rate = np.cumsum(np.concatenate((density, -density))[order])  # the density after each time
        waited = np.concatenate(([0.0], np.cumsum(rate[:-1] * np.diff(t)))) if len(t) else np.zeros(0)
        return t, waited


@dataclass(frozen=True)
class Waits:
    """The stretches between consecutive line samples of each window, in (window, time) order."""

    window: np.ndarray
    start: np.ndarray  # ns, the earlier sample
    end: np.ndarray  # ns, the later sample
    off: np.ndarray  # ns the thread waited off the CPU in it (0 for a stretch that is not a wait)
    line: np.ndarray  # the line sampled at its end
    pieces: Pieces  # where the waits lie: their stretches' free time, longest first

    def __len__(self) -> int:
        return len(self.start)

    def of_window(self, win: int) -> tuple[np.ndarray, np.ndarray]:
        """(times in ns, the wait time up to each) of the window's waits, for interpolation: each piece's start
        and end, flat between pieces; empty without waits."""
        p = self.pieces
        lo, hi = np.searchsorted(p.window, win, "left"), np.searchsorted(p.window, win, "right")
        return p.cumulative(slice(lo, hi))

    def waited(self, g0: np.ndarray, g1: np.ndarray) -> np.ndarray:
        """Wait time inside each [g0, g1)."""
        t, waited = self.pieces.cumulative(slice(None))  # it orders the pieces' times itself
        if not len(t):
            return np.zeros(len(g0))
        base = t[0]  # wall-clock ns lose their last digits as float64
        xs = (t - base).astype(np.float64)
        at = [np.interp((g - base).astype(np.float64), xs, waited) for g in (g0, g1)]
        out: np.ndarray = at[1] - at[0]
        return out

    def line_at(self, t: np.ndarray) -> np.ndarray:
        """The line of the wait stretch holding each time t (sampled at its end), else NONE."""
        keep = np.nonzero(self.off > 0)[0]
        keep = keep[np.argsort(self.start[keep], kind="stable")]
        i = np.searchsorted(self.start[keep], t, "right") - 1
        inside = (i >= 0) & (t < self.end[keep][np.maximum(i, 0)]) if len(keep) else np.zeros(len(t), bool)
        out: np.ndarray = np.where(inside, self.line[keep][np.maximum(i, 0)] if len(keep) else NONE, NONE)
        return out


def is_wait(off: np.ndarray, free: np.ndarray, window: np.ndarray | None = None) -> np.ndarray:
    """Which stretches are waits: off the CPU for WAIT_SHARE of their time outside torch, alone or together
    with the stretch before or after in the same window."""

    def mostly(o: np.ndarray, f: np.ndarray) -> np.ndarray:
        out: np.ndarray = o >= WAIT_SHARE * np.maximum(f, 1.0)
        return out

    w = np.zeros(len(off), dtype=np.int64) if window is None else window.astype(np.int64)
    apart = np.concatenate(([True], w[1:] != w[:-1], [True]))  # no neighbour across a window's edge
    prev_off = np.where(apart[:-1], 0.0, np.concatenate(([0.0], off[:-1])))
    prev_free = np.where(apart[:-1], 0.0, np.concatenate(([0.0], free[:-1])))
    next_off = np.where(apart[1:], 0.0, np.concatenate((off[1:], [0.0])))
    next_free = np.where(apart[1:], 0.0, np.concatenate((free[1:], [0.0])))
    out: np.ndarray = (
        mostly(off, free)
        | mostly(prev_off + off, prev_free + free)
        | mostly(off + next_off, free + next_free)
    )
    return out


def _is_torch_op(name: str) -> bool:
    # operators and autograd nodes, not record_function scopes: a DataLoader's `enumerate(DataLoader)#...`
    # scope spans the wait for the next batch
    return name.startswith(("aten::", "autograd::"))


def main_thread_waits(trace: Trace, blocked: Intervals) -> Waits:
    """The main thread's waits off the CPU, stretch by stretch, from the line samples of every window;
    `blocked`: when synchronising calls held the CPU (gap_evidence.GapEvidence.sync_union)."""
    s = trace.line_samples
    known = np.nonzero(s.cpu_ns >= 0)[0]
    known = known[lexsort((s.t_ns[known], s.window[known]))]
    win, t, cpu = s.window[known], s.t_ns[known], s.cpu_ns[known]
    a = np.nonzero(win[1:] == win[:-1])[0]  # consecutive samples of one window
    b = a + 1
    dt = (t[b] - t[a]).astype(np.float64)
    off = np.clip(dt - (cpu[b] - cpu[a]), 0.0, None)
    busy: tuple[Intervals, ...] = ()
    if len(a):
        in_torch = _in_torch(trace)
        free = np.minimum(dt - in_torch.covered(t[a], t[b]), dt - blocked.covered(t[a], t[b]))
        off = np.minimum(off, np.clip(free, 0.0, None))
        off = np.where(is_wait(off, free, win[a]), off, 0.0)
        busy = (in_torch, blocked)
    pieces = _place(win[a], t[a], t[b], off, busy)
    return Waits(window=win[a], start=t[a], end=t[b], off=off, line=s.line[known][b], pieces=pieces)


def _in_torch(trace: Trace) -> Intervals:
    """The union of the torch calls' time (operators and autograd nodes) and the lines' spans, window group by
    window group (arrays.window_groups), then of the groups' unions: one union of every op and span at once
    held ~210 MB of temporaries for 3 M ops and 1 M spans (a real GPT-2 recording: the analysis's peak)."""
    ops, spans = trace.ops, trace.spans
    torch_op = flag_of(trace.string_flags(_is_torch_op), ops.name)
    starts, ends = [], []
    for o, sp in window_groups((ops.window, spans.window)):
        rows = np.flatnonzero(torch_op[o]) + o.start
        part = Intervals(
            np.concatenate((ops.start_ns[rows], spans.start_ns[sp])),
            np.concatenate((ops.start_ns[rows] + ops.dur_ns[rows], spans.start_ns[sp] + spans.dur_ns[sp])),
        )
        starts.append(part.s)
        ends.append(part.e)
    return Intervals(np.concatenate(starts), np.concatenate(ends))  # groups may meet in time: one union


def _place(
    window: np.ndarray, start: np.ndarray, end: np.ndarray, off: np.ndarray, busy: tuple[Intervals, ...]
) -> Pieces:
    """Each wait stretch's wait in its free time (outside `busy`) of at least MIN_PIECE_NS, the longest first;
    what those do not hold (off-CPU moments between torch calls: a GIL hand-over, a page fault) is spread over
    the whole stretch, as a blip does not make a short GPU gap a wait."""
    rows: list[tuple[int, int, int, float]] = []
    for k in np.nonzero(off > 0)[0].tolist():
        w, s, e, left = int(window[k]), int(start[k]), int(end[k]), float(off[k])
        here = _busy_in(busy, s, e)
        free_s = np.concatenate(([s], np.clip(here.e, s, e)))
        free_e = np.concatenate((np.clip(here.s, s, e), [e]))
        lengths = free_e - free_s
        for i in np.argsort(-lengths, kind="stable").tolist():
            if left <= 0 or lengths[i] < MIN_PIECE_NS:
                break
            take = min(float(lengths[i]), left)
            rows.append((w, int(free_s[i]), int(free_e[i]), take))
            left -= take
        if left > 0:
            rows.append((w, s, e, left))
    rows.sort()
    if not rows:
        return Pieces(*(np.zeros(0, d) for d in _DTYPES))
    return Pieces(*(np.array(c, dtype=d) for c, d in zip(zip(*rows, strict=True), _DTYPES, strict=True)))


def _busy_in(busy: tuple[Intervals, ...], s: int, e: int) -> Intervals:
    """The union of `busy`'s unions, only where it overlaps (s, e): the intervals of each that do, merged. Their
    union over the whole trace was a copy of its 2.3 M intervals on a real GPT-2 recording (3 M ops, 1 M
    spans; the analysis's tracemalloc peak on two threads 373 -> 346 MB without it)."""
    parts = [(u.s[lo:hi], u.e[lo:hi]) for u in busy for lo, hi in [_overlapping(u, s, e)]]
    empty = np.zeros(0, np.int64)
    return Intervals(
        np.concatenate([p[0] for p in parts] or [empty]), np.concatenate([p[1] for p in parts] or [empty])
    )


def _overlapping(u: Intervals, s: int, e: int) -> tuple[int, int]:
    """The stretch of u's (sorted, disjoint) intervals that overlap (s, e)."""
    return int(np.searchsorted(u.e, s, "right")), int(np.searchsorted(u.s, e, "left"))
