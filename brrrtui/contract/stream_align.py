"""The pieces of the kernel stream's inference that the recorder shares with the analysis: a window's template,
the greedy alignment of streamed kernels to it, and the GPU idle before each streamed kernel.

Both sides must compute exactly the same thing, so that figures from folded aggregates (brrrtui.record.fold,
brrrtui.contract.stream_fold) add up to what the raw rows would have given: the recorder aligns a segment's rows in
chunks and records where each chunk left the alignment (`next_pos`) and the idle (the latest end), and the
analysis continues the segment's raw rows from there.
"""

from __future__ import annotations

import bisect
from dataclasses import dataclass
from functools import cached_property

import numpy as np

from brrrtui.contract.model import NONE

_FIRST_BLOCK = 256
_MAX_BLOCK = 1 << 16
_SLOW_ROWS = 64  # rows aligned one by one after a mismatch before the vectorised path is tried again


@dataclass(frozen=True)
class TemplateNames:
    """A window's template as the alignment needs it: kernel names in launch order, positions per name (built
    when first needed: an hour holds ~100 templates, and only those the raw rows follow are aligned to)."""

    window: int
    names: np.ndarray  # name id per position

    @staticmethod
    def of(window: int, names: np.ndarray) -> TemplateNames:
        return TemplateNames(window, np.asarray(names, dtype=np.int64))

    @cached_property
    def positions(self) -> dict[int, list[int]]:
        """name id -> the positions holding it, ascending."""
        positions: dict[int, list[int]] = {}
        for pos, name in enumerate(self.names.tolist()):
            positions.setdefault(int(name), []).append(pos)
        return positions


def launch_times(correlation: np.ndarray, rt_correlation: np.ndarray, rt_start: np.ndarray) -> np.ndarray:
    """Launch time of each of one window's GPU rows: the start of the runtime call with its correlation id (the
    first such call in table order; NONE without one)."""
    out = np.full(len(correlation), NONE, dtype=np.int64)
    if not len(rt_correlation) or not len(correlation):
        return out
    ro = np.argsort(rt_correlation, kind="stable")
    key = rt_correlation[ro]
    pos = np.searchsorted(key, correlation)
    pos_c = np.minimum(pos, len(ro) - 1)
    hit = (pos < len(ro)) & (key[pos_c] == correlation) & (correlation >= 0)
    out[hit] = rt_start[ro[pos_c[hit]]]
    return out


def template_order(
    correlation: np.ndarray, launch_ns: np.ndarray, last_step_ns: int | None, prev_step_ns: int | None
) -> np.ndarray:
    """Indices of one window's GPU rows forming its template: those launched during its last optimizer step
    (after `prev_step_ns`, at or before `last_step_ns`), or all of them when that step's time is unknown or
    holds none, in launch (correlation) order."""
    idx = np.arange(len(correlation))
    if last_step_ns is not None:
        lo = -(1 << 62) if prev_step_ns is None else prev_step_ns
        mine = idx[(launch_ns >= 0) & (launch_ns > lo) & (launch_ns <= last_step_ns)]
        if len(mine):
            idx = mine
    return idx[np.argsort(correlation[idx], kind="stable")]


def step_times(step: np.ndarray, t_ns: np.ndarray, first: int, last: int) -> tuple[int | None, int | None]:
    """(end of step `last`, end of step `last - 1`) from the run's step table; None where unknown, and
    (None, None) for a window without steps."""
    if first < 0 or last < 0 or not len(step):
        return None, None
    hit = np.nonzero(step == last)[0]
    if not len(hit):
        return None, None
    prev = np.nonzero(step == last - 1)[0]
    return int(t_ns[hit[0]]), (int(t_ns[prev[0]]) if len(prev) else None)


def align(names: list[int], template: TemplateNames) -> list[int]:
    """Template position per kernel name (NONE when the template lacks the name), greedy in launch order, one
    kernel at a time from the template's start: the reference `align_from` is checked against."""
    out: list[int] = []
    expect = 0
    positions = template.positions
    for name in names:
        pos = positions.get(name)
        if pos is None:
            out.append(NONE)
            continue
        k = bisect.bisect_left(pos, expect)
        j = pos[k] if k < len(pos) else pos[0]  # none left in this step: the next step began
        out.append(j)
        expect = j + 1
    return out


def _slow(names: list[int], t: TemplateNames, out: np.ndarray, i: int, expect: int) -> int:
    """Greedy alignment of names[i:] one by one into out[i:]; returns the next expected position."""
    positions, n = t.positions, len(t.names)
    for r, name in enumerate(names, i):
        pos = positions.get(name)
        if pos is None:
            out[r] = NONE
            continue
        k = bisect.bisect_left(pos, expect)
        j = pos[k] if k < len(pos) else pos[0]  # none left in this step: the next step began
        out[r] = j
        expect = (j + 1) % n
    return expect


def align_from(names: np.ndarray, t: TemplateNames, expect: int = 0) -> tuple[np.ndarray, int]:
    """Template position per streamed kernel (NONE: the template lacks its name), greedy in launch order from
    position `expect`: each kernel takes the first position at or after the expected one holding its name,
    wrapping to the next step when none is left. Returns (positions, the position expected next).

    A steady stream repeats the template, so runs of kernels that match it position by position are taken
    with one numpy comparison; only the kernels around a mismatch are aligned one by one."""
    n, size = len(names), len(t.names)
    out = np.full(n, NONE, dtype=np.int64)
    if not size or not n:
        return out, expect
    expect %= size
    i, block = 0, _FIRST_BLOCK
    while i < n:
        m = min(n - i, block)
        idx = (expect + np.arange(m)) % size
        eq = names[i : i + m] == t.names[idx]
        k = m if eq.all() else int(np.argmin(eq))
        out[i : i + k] = idx[:k]
        i, expect = i + k, (expect + k) % size
        if k == m:
            block = min(block * 2, _MAX_BLOCK)
            continue
        stop = min(n, i + _SLOW_ROWS)
        expect = _slow(names[i:stop].tolist(), t, out, i, expect)
        i, block = stop, _FIRST_BLOCK
    return out, expect


def idle_before(
    start: np.ndarray, dur: np.ndarray, device: np.ndarray, last_end: dict[int, int]
) -> tuple[np.ndarray, dict[int, int]]:
    """The device-wide GPU idle before each row of one segment: its start minus the latest end of the rows
    that started before it on its device (0 when it overlaps them; 0 for the segment's first row on a device
    when `last_end` has none), rows taken in start order. `last_end`: device -> the latest end so far (where a
    fold left off); returns the gaps and the updated latest ends."""
    gaps = np.zeros(len(start), dtype=np.int64)
    ends = dict(last_end)
    for dev in np.unique(device).tolist():
        rows = np.nonzero(device == dev)[0]
        rows = rows[np.argsort(start[rows], kind="stable")]
        s, e = start[rows], start[rows] + dur[rows]
        before = ends.get(int(dev))
        run = np.maximum.accumulate(e)
        prev = np.empty(len(rows), dtype=np.int64)
        prev[1:] = run[:-1]
        prev[0] = s[0] if before is None else before
        if before is not None:
            prev = np.maximum(prev, before)
        gaps[rows] = np.maximum(s - prev, 0)
        ends[int(dev)] = int(max(run[-1], before if before is not None else run[-1]))
    return gaps, ends


def segment_template(after: int, windows: list[int]) -> int:
    """The window whose template a segment's kernels are aligned to: the latest window with a template at or
    before the one they came after, else the first one after it (the stream before the first window);
    NONE when no window has one. `windows`: those with a template, ascending."""
    k = bisect.bisect_right(windows, after)
    if k:
        return windows[k - 1]
    return windows[0] if windows else NONE


def next_template(after: int, chosen: int, windows: list[int]) -> int:
    """The window that confirms a segment's matches: the first with a template after the segment, unless it is
    the one the segment was aligned to (NONE: none)."""
    k = bisect.bisect_right(windows, after)
    return windows[k] if k < len(windows) and windows[k] != chosen else NONE
