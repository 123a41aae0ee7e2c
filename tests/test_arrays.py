"""The numpy helpers the passes share (analyzers/arrays.py) give what the plain numpy they replace gives."""

from __future__ import annotations

import tracemalloc

import numpy as np
import pytest

from analyzers.arrays import dense_ids, per_owner_sums, window_max, window_rows

LOW = np.iinfo(np.int64).min


@pytest.mark.parametrize("sorted_windows", [True, False])
def test_window_rows_and_window_max_agree_with_a_mask_per_window(sorted_windows: bool) -> None:
    rng = np.random.default_rng(7)
    for _ in range(200):
        n = int(rng.integers(0, 40))
        window = rng.integers(0, 6, n).astype(np.int32)
        if sorted_windows:
            window.sort()
        values = rng.integers(-1000, 1000, n).astype(np.int64)
        keep = np.unique(rng.integers(0, 8, int(rng.integers(0, 6))))
        rows = window_rows(window, keep)
        got = np.arange(n)[rows] if isinstance(rows, slice) else rows
        assert got.tolist() == np.nonzero(np.isin(window, keep))[0].tolist()
        asked = rng.permutation(keep)
        want = [int(values[window == w].max()) if (window == w).any() else LOW for w in asked.tolist()]
        assert window_max(window, values, asked).tolist() == want


def test_a_sorted_table_cut_to_adjacent_windows_is_a_view() -> None:
    window = np.repeat(np.arange(5, dtype=np.int32), 3)
    assert window_rows(window, np.array([1, 2, 3])) == slice(3, 12)
    assert isinstance(window_rows(window, np.array([1, 3])), np.ndarray)  # window 2 lies between


def test_dense_ids_is_the_inverse_of_unique_on_narrow_and_wide_ranges() -> None:
    rng = np.random.default_rng(3)
    for span in (5, 1000, 10**15):
        values = rng.integers(-span, span, 5000)
        assert dense_ids(values).tolist() == np.unique(values, return_inverse=True)[1].tolist()
    assert dense_ids(np.zeros(0, dtype=np.int64)).tolist() == []


def test_lexsort_median_and_unique_inverse_agree_with_numpy() -> None:
    from analyzers.arrays import distinct, lexsort, median, unique_inverse

    rng = np.random.default_rng(11)
    for i in range(300):
        n = int(rng.integers(1, 60))
        a, b = rng.integers(0, 5, n), rng.integers(0, 3, n)
        c = np.sort(rng.integers(0, 9, n)) if i % 3 == 0 else rng.integers(0, 9, n)
        assert lexsort((a, b, c)).tolist() == np.lexsort((a, b, c)).tolist()
        x = rng.integers(-5, 5, n) if i % 2 else rng.normal(size=n)
        if i % 7 == 0:
            x = np.sort(x)
        assert distinct(x).tolist() == np.unique(x).tolist()
        assert median(x) == float(np.median(x))
        ints = rng.integers(-50, 50, n) * (1 if i % 2 else 10**14)
        uniq, inv = unique_inverse(ints)
        want_uniq, want_inv = np.unique(ints, return_inverse=True)
        assert uniq.tolist() == want_uniq.tolist() and inv.tolist() == want_inv.tolist()
    assert np.isnan(median(np.array([1.0, np.nan, 2.0])))


def test_unique_rows_agrees_with_unique_along_axis_0() -> None:
    from analyzers.arrays import unique_rows

    rng = np.random.default_rng(5)
    for i in range(200):
        n = int(rng.integers(1, 50))
        scale = np.uint64(2**63 if i % 2 else 1)  # the top bit set: compared as unsigned
        cols = tuple(rng.integers(0, 3, n).astype(np.uint64) * scale for _ in range(3))
        first, inverse = unique_rows(cols)
        _, want_first, want_inverse = np.unique(
            np.stack(cols, axis=1), axis=0, return_index=True, return_inverse=True
        )
        assert first.tolist() == want_first.tolist() and inverse.tolist() == want_inverse.reshape(-1).tolist()


def test_window_keys_beyond_the_columns_type_are_not_wrapped_into_it() -> None:
    """Keys are searched in the window column's own type only when they fit it: 2**32 as int32 would be 0."""
    window = np.repeat(np.arange(3, dtype=np.int32), 2)
    assert window_rows(window, np.array([2**32])) == slice(0, 0)
    assert window_max(window, np.arange(6, dtype=np.int64), np.array([2**32, 1])).tolist() == [LOW, 3]


@pytest.mark.parametrize("order", ["sorted", "runs", "shuffled"])
def test_per_owner_sums_are_bincounts_in_any_order_of_owners(order: str) -> None:
    """Per row, its owner's sum of durations (whole numbers, as floats) and of ones: what np.bincount gives,
    whether the owners come sorted, in runs out of order (kernels of two streams) or shuffled, with owner ids
    up to a few million (bincount's table would be that long)."""
    rng = np.random.default_rng(11)
    for _ in range(50):
        n = int(rng.integers(0, 300))
        o = np.sort(rng.integers(0, 3_000_000, n)).astype(np.int32)
        o = np.repeat(o, rng.integers(1, 4, n))
        if order == "runs":
            o = np.concatenate([o[1::2], o[::2]])
        elif order == "shuffled":
            rng.shuffle(o)
        dur = rng.integers(0, 10**9, len(o)).astype(np.float64)
        for w in (dur, np.ones(len(o))):
            got = per_owner_sums(o, w)
            assert np.array_equal(got, np.bincount(o, weights=w)[o] if len(o) else w)
            assert got.dtype == np.float64 or not len(o)


def test_per_owner_sums_hold_no_table_as_long_as_the_largest_owner_id() -> None:
    """A thousand kernels whose ops are rows near the end of 3 M ops, out of order: the sums take memory
    for the thousand rows, not bincount's 24 MB table of every op id."""
    rng = np.random.default_rng(5)
    o = rng.integers(2_999_000, 3_000_000, 1000).astype(np.int32)
    w = rng.integers(0, 10**6, 1000).astype(np.float64)
    tracemalloc.start()
    try:
        got = per_owner_sums(o, w)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert np.array_equal(got, np.bincount(o, weights=w)[o])
    assert peak < 1_000_000, f"peak {peak / 1e6:.1f} MB"
