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
are part of the profiled work. Recordings without the clock (older ones, other platforms) have no waits.

The unprofiled replay keeps a wait's time as it was (the profiler does not slow a sleep), and a GPU gap that
waits cover is a WAIT gap, charged to the line the thread waited on (gaps.classify_gaps).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from analyzers.arrays import lexsort
from analyzers.gap_evidence import Intervals
from analyzers.model import NONE, Trace, flag_of

WAIT_SHARE = 0.5  # a stretch this much off the CPU (of its time outside torch) is a wait


@dataclass(frozen=True)
class Waits:
    """The stretches between consecutive line samples of each window, in (window, time) order."""

    window: np.ndarray
    start: np.ndarray  # ns, the earlier sample
    end: np.ndarray  # ns, the later sample
    off: np.ndarray  # ns the thread waited off the CPU in it (0 for a stretch that is not a wait)
    line: np.ndarray  # the line sampled at its end

    def __len__(self) -> int:
        return len(self.start)

    def of_window(self, win: int) -> tuple[np.ndarray, np.ndarray]:
        """(the window's sample times in ns, the wait time up to each), for interpolation; empty without
        waits."""
        lo, hi = np.searchsorted(self.window, win, "left"), np.searchsorted(self.window, win, "right")
        if hi == lo or not self.off[lo:hi].any():
            return np.zeros(0, dtype=np.int64), np.zeros(0)
        t = np.concatenate((self.start[lo : lo + 1], self.end[lo:hi]))
        return t, np.concatenate(([0.0], np.cumsum(self.off[lo:hi])))

    def waited(self, g0: np.ndarray, g1: np.ndarray) -> np.ndarray:
        """Wait time inside each [g0, g1), a stretch's wait spread evenly over it."""
        keep = self.off > 0
        if not keep.any():
            return np.zeros(len(g0))
        s, e, off = self.start[keep], self.end[keep], self.off[keep]
        order = np.argsort(s, kind="stable")
        s, e, off = s[order], e[order], off[order]
        base = s[0]  # wall-clock ns lose their last digits as float64
        xs = (np.stack((s, e), axis=1).ravel() - base).astype(np.float64)
        ys = np.cumsum(np.stack((np.zeros(len(off)), off), axis=1).ravel())  # flat between stretches
        at = [np.interp((g - base).astype(np.float64), xs, ys) for g in (g0, g1)]
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
    if len(a):
        ops, spans = trace.ops, trace.spans
        o = np.nonzero(flag_of(trace.string_flags(_is_torch_op), ops.name))[0]
        in_torch = Intervals(
            np.concatenate((ops.start_ns[o], spans.start_ns)),
            np.concatenate((ops.start_ns[o] + ops.dur_ns[o], spans.start_ns + spans.dur_ns)),
        )
        free = np.minimum(dt - in_torch.covered(t[a], t[b]), dt - blocked.covered(t[a], t[b]))
        off = np.minimum(off, np.clip(free, 0.0, None))
        off = np.where(is_wait(off, free, win[a]), off, 0.0)
    return Waits(window=win[a], start=t[a], end=t[b], off=off, line=s.line[known][b])
