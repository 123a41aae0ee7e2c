"""Timeline binning: sorted intervals -> one terminal cell per time bucket, at sub-cell resolution.

Everything here is O(width · log n): the visible window's cell edges are looked up in the sorted start/end
columns with `searchsorted`, and busy time per cell comes from prefix sums, so a lane of a million kernels
draws as fast as a lane of ten thousand.

A cell shows what happened in its time bucket::

    time   |....[kern]......|[kernel....|...][k][k][k]|.....gap.....|
    cell   |       ▌        |▐█  (inverted ▍) |   ▒    |  (gap bg)   |
             one interval     one interval     several    idle: the gap's
             from the left    to the right     -> shade   cause colour

- one contiguous run touching the left edge: a left eighth block ``▏▎▍▌▋▊▉█`` as long as the run;
- one contiguous run touching the right edge: the same blocks with foreground and background swapped;
- several separated runs: a shade ``░▒▓`` by busy fraction (the GPU idles between short kernels);
- no interval: blank, on the colour of the gap that covers it, if any.

Intervals may overlap (nested CPU ops, concurrent copies): `IntervalIndex` keeps, for binning, only the part
of each interval not already covered by earlier ones, which leaves the union, and so busy time, unchanged.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from analyzers.arrays import unique_inverse

LEFT_EIGHTHS = " ▏▎▍▌▋▊▉█"
SHADES = "░▒▓"
THIN = "┃"  # one short run in the middle of a cell


@dataclass(frozen=True)
class IntervalIndex:
    """Intervals of one lane, sorted by start, as float64 ns relative to `origin_ns` (exact to 104 days).

    `rows` are the ids of the intervals in the table they came from (gpu rows, op rows, gap rows); `cls` a
    small integer class per interval (a regime code, a gap cause code, ...).
    """

    origin_ns: int
    start: np.ndarray  # float64, original starts, sorted
    end: np.ndarray  # float64, original ends
    cls: np.ndarray  # int64
    rows: np.ndarray  # int64
    # binning columns: disjoint, sorted, union-preserving
    b_start: np.ndarray
    b_end: np.ndarray
    cum: np.ndarray  # float64, len n+1: prefix sums of b_end - b_start
    classes: np.ndarray  # the distinct class codes, sorted
    cum_cls: np.ndarray  # float64, (len(classes), n+1)

    def __len__(self) -> int:
        return len(self.start)

    @staticmethod
    def build(
        start_ns: np.ndarray, end_ns: np.ndarray, cls: np.ndarray, rows: np.ndarray, origin_ns: int
    ) -> IntervalIndex:
        start_ns = np.asarray(start_ns, dtype=np.int64)
        order = np.argsort(start_ns, kind="stable")
        s = (start_ns[order] - origin_ns).astype(np.float64)
        e = (np.asarray(end_ns, dtype=np.int64)[order] - origin_ns).astype(np.float64)
        e = np.maximum(e, s)
        c = np.asarray(cls, dtype=np.int64)[order]
        r = np.asarray(rows, dtype=np.int64)[order]
        # b_start[i] = max(start[i], max(end[:i])): the part not covered by earlier intervals
        covered = np.maximum.accumulate(e)
        b_s = s.copy()
        if len(s) > 1:
            b_s[1:] = np.maximum(s[1:], covered[:-1])
        b_e = np.maximum(e, b_s)
        d = b_e - b_s
        cum = np.concatenate([[0.0], np.cumsum(d)])
        classes = unique_inverse(c)[0]  # through a lookup table: np.unique hashes every row (~0.4 ms a lane)
        cum_cls = np.zeros((len(classes), len(s) + 1))
        for k, code in enumerate(classes):
            cum_cls[k, 1:] = np.cumsum(np.where(c == code, d, 0.0))
        return IntervalIndex(origin_ns, s, e, c, r, b_s, b_e, cum, classes, cum_cls)

    @staticmethod
    def empty(origin_ns: int = 0) -> IntervalIndex:
        z = np.empty(0, dtype=np.int64)
        return IntervalIndex.build(z, z, z, z, origin_ns)


@dataclass(frozen=True)
class Bins:
    """Per cell of the visible window: busy fraction, number of intervals touching it, the first busy
    offset and the last busy end (fractions of the cell), the class with the most busy time (-1: none)."""

    busy: np.ndarray
    count: np.ndarray
    lo: np.ndarray
    hi: np.ndarray
    dominant: np.ndarray


def bin_index(idx: IntervalIndex, t0: float, t1: float, width: int) -> Bins:
    """Bucket `idx` into `width` cells covering [t0, t1) (ns relative to idx.origin_ns)."""
    width = max(int(width), 0)
    n = len(idx)
    cell = (t1 - t0) / width if width else 0.0
    if n == 0 or width == 0 or cell <= 0:
        z = np.zeros(width)
        return Bins(z, np.zeros(width, dtype=np.int64), z, z, np.full(width, -1, dtype=np.int64))
    edges = t0 + cell * np.arange(width + 1, dtype=np.float64)
    a, b = edges[:-1], edges[1:]
    i = np.searchsorted(idx.b_end, a, "right")  # first interval ending after the cell starts
    j = np.searchsorted(idx.b_start, b, "left")  # first interval starting at or after the cell ends
    count = np.maximum(j - i, 0)
    has = count > 0
    ii = np.minimum(i, n - 1)
    jj = np.clip(j - 1, 0, n - 1)
    left_cut = np.where(has, np.clip(a - idx.b_start[ii], 0.0, None), 0.0)
    right_cut = np.where(has, np.clip(idx.b_end[jj] - b, 0.0, None), 0.0)
    jc, ic = np.maximum(j, i), i
    busy = np.where(has, idx.cum[jc] - idx.cum[ic] - left_cut - right_cut, 0.0)
    per_cls = idx.cum_cls[:, jc] - idx.cum_cls[:, ic]
    for k, code in enumerate(idx.classes):
        per_cls[k] -= np.where(idx.cls[ii] == code, left_cut, 0.0)
        per_cls[k] -= np.where(idx.cls[jj] == code, right_cut, 0.0)
    dominant = np.where(has, idx.classes[np.argmax(per_cls, axis=0)], -1)
    lo = np.where(has, (np.maximum(idx.b_start[ii], a) - a) / cell, 0.0)
    hi = np.where(has, (np.minimum(idx.b_end[jj], b) - a) / cell, 0.0)
    return Bins(np.clip(busy / cell, 0.0, 1.0), count, lo, hi, dominant)


@dataclass(frozen=True)
class Cell:
    glyph: str
    fg: str  # role of the glyph
    bg: str  # role of the background


def lane_cells(
    items: Bins,
    gaps: Bins | None,
    item_role: dict[int, str],
    gap_role: dict[int, str],
    gap_label: dict[int, str] | None = None,
    idle_role: str = "idle",
) -> list[Cell]:
    """Glyphs and roles for one lane: items drawn at sub-cell resolution over a background that shows the
    dominant gap cause where a gap covers the cell. Runs of >= 3 idle gap cells carry the cause's letter."""
    width = len(items.busy)
    busy, count, lo, hi = items.busy.tolist(), items.count.tolist(), items.lo.tolist(), items.hi.tolist()
    dom = items.dominant.tolist()
    gdom = gaps.dominant.tolist() if gaps is not None else [-1] * width
    cells: list[Cell] = []
    for c in range(width):
        bg = gap_role.get(gdom[c], idle_role) if gdom[c] >= 0 else idle_role
        if count[c] == 0:
            cells.append(Cell(" ", idle_role, bg))
            continue
        fg = item_role.get(dom[c], "other")
        frac = busy[c]
        span = hi[c] - lo[c]
        if frac >= 15 / 16:
            cells.append(Cell("█", fg, bg))
        elif span > 0 and frac >= 0.97 * span:  # one contiguous run
            if lo[c] <= 1 / 16:
                cells.append(Cell(LEFT_EIGHTHS[min(8, max(1, round(hi[c] * 8)))], fg, bg))
            elif hi[c] >= 15 / 16:
                e = round(lo[c] * 8)
                if e <= 0:
                    cells.append(Cell("█", fg, bg))
                elif e >= 8:
                    cells.append(Cell("▕", fg, bg))
                else:  # the right part is busy: draw the idle left part in the background's colour
                    cells.append(Cell(LEFT_EIGHTHS[e], bg, fg))
            else:
                cells.append(Cell(THIN if frac < 3 / 8 else SHADES[min(2, int(frac * 4))], fg, bg))
        elif frac <= 0 and count[c] > 0:
            cells.append(Cell(THIN, fg, bg))  # zero-length intervals (instant events, sub-ns kernels)
        else:
            cells.append(Cell(SHADES[0 if frac < 3 / 8 else 1 if frac < 5 / 8 else 2], fg, bg))
    if gap_label and gaps is not None:
        _label_gap_runs(cells, gdom, count, gap_label)
    return cells


def _label_gap_runs(cells: list[Cell], gdom: list[int], count: list[int], labels: dict[int, str]) -> None:
    c, width = 0, len(cells)
    while c < width:
        if gdom[c] < 0 or count[c]:
            c += 1
            continue
        run_end = c
        while run_end < width and gdom[run_end] == gdom[c] and not count[run_end]:
            run_end += 1
        if run_end - c >= 3 and gdom[c] in labels:
            mid = (c + run_end - 1) // 2
            cells[mid] = Cell(labels[gdom[c]], "gap-label", cells[mid].bg)
        c = run_end


def pick(idx: IntervalIndex, a: float, b: float, t: float) -> int | None:
    """The interval under the cursor cell [a, b): the innermost one containing `t` if any, else the one
    nearest to `t` inside the cell. Returns a position in idx (sorted order), or None when the cell is empty."""
    n = len(idx)
    if n == 0:
        return None
    # candidates: intervals that start before b and end after a (original, possibly overlapping, columns)
    hi = int(np.searchsorted(idx.start, b, "left"))
    lo = int(np.searchsorted(idx.b_end, a, "right"))
    # an earlier long interval can still reach into the cell: step back over the covered prefix
    for _ in range(64):
        if lo == 0 or idx.end[lo - 1] <= a:
            break
        lo -= 1
    if hi <= lo:
        return None
    s, e = idx.start[lo:hi], idx.end[lo:hi]
    inside = np.nonzero((s <= t) & (e > t))[0]
    if len(inside):  # the innermost (shortest) interval containing t
        k = inside[np.argmin(e[inside] - s[inside])]
        return lo + int(k)
    touching = (e > a) & (s < b)
    if not touching.any():
        return None
    distance = np.where(touching, np.maximum(np.maximum(s - t, t - e), 0.0), np.inf)
    return lo + int(np.argmin(distance))


def neighbour(idx: IntervalIndex, t: float, direction: int) -> int | None:
    """The first interval starting strictly after t (direction > 0) or before t (direction < 0)."""
    if len(idx) == 0:
        return None
    if direction > 0:
        k = int(np.searchsorted(idx.start, t, "right"))
        return k if k < len(idx) else None
    k = int(np.searchsorted(idx.start, t, "left")) - 1
    return k if k >= 0 else None


@dataclass(frozen=True)
class View:
    """The visible slice [t0, t0 + span) of a window [0, extent) (ns relative to the window start) and a
    cursor column. Pure value: every key returns a new View."""

    t0: float
    span: float
    extent: float
    width: int
    cursor: int  # column of the cursor, 0 <= cursor < width

    MIN_CELL_NS = 1.0

    @staticmethod
    def fit(extent: float, width: int) -> View:
        extent = max(float(extent), 1.0)
        width = max(int(width), 1)
        return View(0.0, extent, extent, width, width // 2)

    @property
    def cell(self) -> float:
        return self.span / self.width

    @property
    def t1(self) -> float:
        return self.t0 + self.span

    @property
    def zoom(self) -> float:
        return self.extent / self.span

    @property
    def cursor_t(self) -> float:
        return self.t0 + (self.cursor + 0.5) * self.cell

    def cell_range(self, col: int) -> tuple[float, float]:
        return self.t0 + col * self.cell, self.t0 + (col + 1) * self.cell

    def col_of(self, t: float) -> int:
        return int((t - self.t0) // self.cell)

    def _clamped(self, t0: float, span: float, cursor: int) -> View:
        span = min(max(span, self.MIN_CELL_NS * self.width), max(self.extent, self.MIN_CELL_NS * self.width))
        t0 = min(max(t0, 0.0), max(self.extent - span, 0.0))
        return View(t0, span, self.extent, self.width, min(max(cursor, 0), self.width - 1))

    def resized(self, width: int) -> View:
        width = max(int(width), 1)
        t = self.cursor_t
        v = View(self.t0, self.span, self.extent, width, 0)
        return v._clamped(self.t0, self.span, v.col_of(t))

    def with_extent(self, extent: float) -> View:
        return View(self.t0, self.span, max(float(extent), 1.0), self.width, self.cursor)._clamped(
            self.t0, self.span, self.cursor
        )

    def zoomed(self, factor: float) -> View:
        """factor > 1 zooms in. The time under the cursor stays under the cursor's column."""
        t, frac = self.cursor_t, (self.cursor + 0.5) / self.width
        span = self.span / factor
        v = self._clamped(t - frac * span, span, self.cursor)
        return v._clamped(v.t0, v.span, v.col_of(t))

    def moved(self, cols: int) -> View:
        """Move the cursor by `cols` cells; the view pans when the cursor would leave it."""
        c = self.cursor + cols
        if 0 <= c < self.width:
            return View(self.t0, self.span, self.extent, self.width, c)
        shift = (c - (self.width - 1) if c >= self.width else c) * self.cell
        v = self._clamped(self.t0 + shift, self.span, self.cursor)
        t_target = self.cursor_t + cols * self.cell
        return v._clamped(v.t0, v.span, v.col_of(min(max(t_target, 0.0), self.extent - 1e-9)))

    def panned(self, fraction: float) -> View:
        """Pan by a fraction of the view; the cursor keeps its column."""
        return self._clamped(self.t0 + fraction * self.span, self.span, self.cursor)

    def centred_on(self, t: float) -> View:
        """Put the cursor on time t, panning only if t is outside the view (then centring it)."""
        if self.t0 <= t < self.t1:
            return View(self.t0, self.span, self.extent, self.width, self.col_of(t))
        v = self._clamped(t - self.span / 2, self.span, self.cursor)
        return v._clamped(v.t0, v.span, v.col_of(t))

    def following(self) -> View:
        """Show the newest data: keep the zoom, pan to the end."""
        v = self._clamped(self.extent - self.span, self.span, self.cursor)
        return v


def axis_text(view: View, label_ns_offset: float = 0.0) -> str:
    """One row: a tick mark ``╵`` with its label every `nice` step, in units the step calls for."""
    from brrrtui.present.units import fmt_tick, nice_step

    width = view.width
    if width <= 0:
        return ""
    row = [" "] * width
    step = nice_step(view.span * 12 / width)  # ~12 cells per label
    first = np.ceil(view.t0 / step) * step
    t = first
    while t < view.t1:
        col = view.col_of(t)
        label = "╵" + fmt_tick(t + label_ns_offset, step, view.t1 + label_ns_offset)
        if 0 <= col < width and all(ch == " " for ch in row[col : col + len(label) + 1]):
            for k, ch in enumerate(label):
                if col + k < width:
                    row[col + k] = ch
        t += step
    return "".join(row)
