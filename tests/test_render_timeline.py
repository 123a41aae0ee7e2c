"""Timeline binning and view arithmetic (pure; no App)."""

import numpy as np
import pytest

from brrrtui.present.timeline import (
    IntervalIndex,
    View,
    axis_text,
    bin_index,
    lane_cells,
    neighbour,
    pick,
)

ROLES = {0: "compute", 1: "memory", 2: "overhead"}
GAPS = {0: "gap-host", 1: "gap-sync"}


def idx(intervals, cls=None, origin=0):
    s = np.array([a for a, _ in intervals], dtype=np.int64)
    e = np.array([b for _, b in intervals], dtype=np.int64)
    c = np.zeros(len(s), dtype=np.int64) if cls is None else np.array(cls)
    return IntervalIndex.build(s + origin, e + origin, c, np.arange(len(s)), origin)


def brute_busy(intervals, t0, t1, width):
    """Union length per cell, by sampling at 1 ns (exact for integer intervals)."""
    cell = (t1 - t0) / width
    covered = np.zeros(int(t1 - t0), dtype=bool)
    for a, b in intervals:
        covered[max(a - t0, 0) : max(min(b - t0, t1 - t0), 0)] = True
    return np.array([covered[int(k * cell) : int((k + 1) * cell)].mean() for k in range(width)])


def test_busy_fraction_per_cell_is_exact():
    ivs = [(0, 15), (15, 20), (32, 38), (70, 100)]
    b = bin_index(idx(ivs), 0, 100, 10)
    assert b.busy.tolist() == pytest.approx([1.0, 1.0, 0.0, 0.6, 0.0, 0.0, 0.0, 1.0, 1.0, 1.0])
    assert b.count.tolist() == [1, 2, 0, 1, 0, 0, 0, 1, 1, 1]


def test_busy_matches_brute_force_on_random_overlapping_intervals():
    rng = np.random.default_rng(7)
    starts = np.sort(rng.integers(0, 10_000, 400))
    ivs = [(int(s), int(s + rng.integers(1, 80))) for s in starts]  # overlaps included
    for t0, t1, w in [(0, 10_080, 63), (2_000, 2_640, 80), (5_000, 5_013, 13)]:
        b = bin_index(idx(ivs), t0, t1, w)
        assert b.busy == pytest.approx(brute_busy(ivs, t0, t1, w), abs=1e-9)


def test_origin_keeps_nanosecond_precision_at_epoch_times():
    origin = 1_795_962_644_427_165_391  # a real trace's window start, beyond float64's integer range
    b = bin_index(idx([(3, 5)], origin=origin), 0, 8, 8)
    assert b.busy.tolist() == [0, 0, 0, 1, 1, 0, 0, 0]


def test_dominant_class_is_the_one_with_most_time_in_the_cell():
    b = bin_index(idx([(0, 3), (3, 10)], cls=[0, 1]), 0, 10, 1)
    assert b.dominant.tolist() == [1]
    b = bin_index(idx([(0, 7), (7, 10)], cls=[0, 1]), 0, 10, 1)
    assert b.dominant.tolist() == [0]


def glyphs(cells):
    return "".join(c.glyph for c in cells)


def test_sub_cell_glyphs_left_right_fragmented():
    # cell 0: busy from the left for 3/8; cell 1: busy on the right 5/8; cell 2: three short runs; cell 3 full
    ivs = [(0, 3), (11, 16), (16, 17), (19, 20), (22, 23), (24, 32)]
    b = bin_index(idx(ivs), 0, 32, 4)
    cells = lane_cells(b, None, ROLES, GAPS)
    assert glyphs(cells) == "▍▍▒█"
    assert (cells[0].fg, cells[0].bg) == ("compute", "idle")
    # right-aligned run: the left block is drawn in the idle colour on the kernel's colour
    assert (cells[1].fg, cells[1].bg) == ("idle", "compute")


def test_gaps_colour_the_background_and_long_gaps_carry_their_letter():
    items = bin_index(idx([(0, 10), (90, 100)]), 0, 100, 10)
    gaps = bin_index(idx([(10, 90)], cls=[1]), 0, 100, 10)
    cells = lane_cells(items, gaps, ROLES, GAPS, {0: "H", 1: "S"})
    assert [c.bg for c in cells[1:9]] == ["gap-sync"] * 8
    assert glyphs(cells) == "█   S    █"
    assert cells[4].fg == "gap-label"


def test_empty_lane_and_zero_width():
    assert bin_index(IntervalIndex.empty(), 0, 10, 5).count.tolist() == [0] * 5
    assert len(bin_index(idx([(0, 1)]), 0, 10, 0).busy) == 0


def test_pick_prefers_the_interval_under_the_cursor_time_then_the_nearest():
    ix = idx([(0, 4), (4, 5), (6, 10)])
    assert pick(ix, 0, 10, 4.5) == 1
    assert pick(ix, 0, 10, 5.8) == 2  # nothing at 5.8: the nearest interval in the cell
    assert pick(ix, 0, 10, 5.2) == 1
    assert pick(idx([(0, 1)]), 5, 6, 5.5) is None


def test_neighbour():
    ix = idx([(0, 1), (5, 6), (9, 10)])
    assert neighbour(ix, 0, 1) == 1
    assert neighbour(ix, 5, 1) == 2
    assert neighbour(ix, 9, 1) is None
    assert neighbour(ix, 9, -1) == 1
    assert neighbour(ix, 0, -1) is None


def test_view_zoom_keeps_the_time_under_the_cursor():
    v = View.fit(1_000_000, 100)
    t = v.cursor_t
    z = v.zoomed(8)
    assert z.zoom == pytest.approx(8)
    assert z.cursor_t == pytest.approx(t, abs=z.cell)
    assert z.zoomed(0.125).span == pytest.approx(1_000_000)
    assert v.zoomed(0.5).span == pytest.approx(1_000_000)  # cannot zoom out past the window


def test_view_cursor_moves_then_pans_at_the_edge():
    v = View.fit(1000, 10).zoomed(2)  # span 500
    v = View(v.t0, v.span, v.extent, v.width, 9)
    moved = v.moved(1)
    assert moved.t0 == pytest.approx(v.t0 + v.cell)
    assert moved.cursor == 9
    assert moved.cursor_t == pytest.approx(v.cursor_t + v.cell)
    left = View(0.0, 500.0, 1000.0, 10, 0).moved(-1)
    assert (left.t0, left.cursor) == (0.0, 0)  # clamped at the window start


def test_view_pan_and_centre():
    v = View.fit(1000, 10).zoomed(4)
    p = v.panned(0.5)
    assert p.t0 == pytest.approx(v.t0 + v.span / 2)
    c = v.centred_on(990)
    assert c.t0 <= 990 < c.t1
    assert c.t1 == pytest.approx(1000)
    assert c.col_of(990) == c.cursor


def test_axis_labels_use_the_units_the_step_calls_for():
    v = View.fit(50e6, 80)
    text = axis_text(v)
    assert text.startswith("╵0 ms")
    assert "╵10 ms" in text and "µs" not in text
    z = View(0, 200e3, 50e6, 80, 0)
    assert "╵50 µs" in axis_text(z)
