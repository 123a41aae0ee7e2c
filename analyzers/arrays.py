"""Small numpy helpers shared by the passes."""

from __future__ import annotations

import numpy as np


def distinct(values: np.ndarray) -> np.ndarray:
    """Sorted distinct values, by sorting (or none, when they come sorted already).

    numpy 2.x's plain `np.unique(x)` hashes, which on millions of distinct integers is ~50x slower than the
    sort it does when asked for counts (3 M timestamps: 3 s vs 0.05 s).
    """
    if len(values) > 1:
        step = values[1:] > values[:-1]
        if step.all():
            return values.copy()
        if (values[1:] >= values[:-1]).all():
            return values[np.concatenate(([True], step))]
        if values.dtype.kind in "iu":  # timsort: a few sorted runs laid end to end are merged, not re-sorted
            s = np.sort(values, kind="stable")
            out: np.ndarray = s[np.concatenate(([True], s[1:] != s[:-1]))]
            return out
    return np.unique(values, return_counts=True)[0]


def lexsort(keys: tuple[np.ndarray, ...]) -> np.ndarray:
    """np.lexsort(keys) (the last key primary; ties kept in index order), as one stable argsort per key,
    least significant first: numpy's stable sort (timsort, radix for small integers) takes time columns that
    are already nearly in order, as recorded ones are, in close to one pass, where lexsort's mergesort does
    not."""
    order = np.argsort(keys[0], kind="stable")
    for key in keys[1:]:
        k = key[order]
        if len(k) and (k[1:] >= k[:-1]).all():
            continue  # already in this key's order: a stable sort would not move anything
        order = order[np.argsort(k, kind="stable")]
    return order


def unique_rows(columns: tuple[np.ndarray, ...]) -> tuple[np.ndarray, np.ndarray]:
    """np.unique(np.stack(columns, axis=1), axis=0, return_index=True, return_inverse=True)[1:] for integer
    columns of one dtype (rows compared column by column, the first column first): the first row of each
    distinct row, and each row's rank among them. numpy's axis=0 unique sorts the rows as opaque records."""
    n = len(columns[0])
    if not n:
        return np.zeros(0, dtype=np.int64), np.zeros(0, dtype=np.int64)
    order = lexsort(tuple(reversed(columns)))
    new = np.zeros(n, dtype=bool)
    new[0] = True
    for c in columns:
        sc = c[order]
        new[1:] |= sc[1:] != sc[:-1]
    rank = np.cumsum(new) - 1
    inverse = np.empty(n, dtype=np.int64)
    inverse[order] = rank
    return order[new], inverse


def median(values: np.ndarray) -> float:
    """float(np.median(values)) for a non-empty array: the middle of a partition. NaN if any is NaN.

    The middle positions are always given as two (the same one twice for an odd length): numpy 2's partition
    at one position crawls on a few distinct values (1 M launch gaps alternating between two lengths: 150 ms)
    where at two it takes 1-13 ms on every pattern tried; a sort takes 5-60 ms. On the synthetic 1 M-kernel
    run, the launch timing in benchmarks/bench_passes.py: 0.34 s at one position, 0.06 s at two."""
    n = len(values)
    if values.dtype.kind == "f" and np.isnan(values).any():
        return float("nan")
    lo, hi = (n - 1) // 2, n // 2
    return float(np.mean(np.partition(values, [lo, hi])[lo : hi + 1]))


def same_type(keys: np.ndarray, column: np.ndarray) -> np.ndarray:
    """`keys` as `column`'s integer type when they fit it: np.searchsorted(column, keys) otherwise converts the
    whole column to the keys' type on every call (an int32 window column of 3 M ops: 1.7 ms a call against
    6 us)."""
    keys = np.asarray(keys)
    if (
        keys.dtype == column.dtype
        or column.dtype.kind not in "iu"
        or keys.dtype.kind not in "iu"
        or not len(keys)
    ):
        return keys
    info = np.iinfo(column.dtype)
    if keys.min() < info.min or keys.max() > info.max:
        return keys
    return keys.astype(column.dtype)


def window_rows(window: np.ndarray, keep: np.ndarray) -> slice | np.ndarray:
    """The rows of a table whose `window` is in `keep` (sorted, distinct), in table order: a slice when they
    are one stretch of a table sorted by window (a recording's tables are), else their indices."""
    n = len(window)
    if n and bool((window[1:] >= window[:-1]).all()):
        keys = same_type(keep, window)
        lo = np.searchsorted(window, keys, "left")
        hi = np.searchsorted(window, keys, "right")
        lo, hi = lo[hi > lo], hi[hi > lo]
        if not len(lo):
            return slice(0, 0)
        if bool((lo[1:] == hi[:-1]).all()):
            return slice(int(lo[0]), int(hi[-1]))
    rows: np.ndarray = np.nonzero(np.isin(window, keep))[0]
    return rows


def rows_per_window(window: np.ndarray, windows: list[int]) -> list[slice | np.ndarray]:
    """For each id of `windows`, the rows of a table whose `window` is it, in table order: a slice when the
    table is sorted by window (a recording's tables are), else their indices. One pass for all windows,
    where a mask per window would read the whole column once per window."""
    keys = np.asarray(windows, dtype=np.int64)
    in_order = len(window) < 2 or bool((window[1:] >= window[:-1]).all())
    order = None if in_order else np.argsort(window, kind="stable")
    ordered = window if order is None else window[order]
    keys = same_type(keys, ordered)
    lo = np.searchsorted(ordered, keys, "left").tolist()
    hi = np.searchsorted(ordered, keys, "right").tolist()
    if order is None:
        return [slice(a, b) for a, b in zip(lo, hi, strict=True)]
    return [order[a:b] for a, b in zip(lo, hi, strict=True)]


def window_max(window: np.ndarray, values: np.ndarray, windows: np.ndarray) -> np.ndarray:
    """Per entry of `windows`, the largest of `values` over the rows of that window; the int64 minimum for a
    window without rows. `values` is an int64 column as long as `window`."""
    low = np.iinfo(np.int64).min
    out = np.full(len(windows), low, dtype=np.int64)
    if not len(window) or not len(windows):
        return out
    order = np.argsort(windows, kind="stable")
    known = windows[order]
    best = np.full(len(known), low, dtype=np.int64)
    if bool((window[1:] >= window[:-1]).all()):  # rows window by window: one reduceat over the stretches
        keys = same_type(known, window)
        lo, hi = np.searchsorted(window, keys, "left"), np.searchsorted(window, keys, "right")
        some = hi > lo
        if some.any():
            bounds = np.stack([lo[some], hi[some]], axis=1).reshape(-1)
            best[some] = np.maximum.reduceat(np.append(values, low), bounds)[::2]
    else:
        pos = np.minimum(np.searchsorted(known, window), len(known) - 1)
        hit = known[pos] == window
        np.maximum.at(best, pos[hit], values[hit])
    out[order] = best
    return out


def unique_inverse(values: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """np.unique(values, return_inverse=True) of an integer column, the inverse as int64. Through a lookup
    table when the values span a range not much larger than their count (no sort), else by sorting."""
    if not len(values):
        return values[:0].copy(), np.zeros(0, dtype=np.int64)
    lo, hi = int(values.min()), int(values.max())
    if hi - lo <= 4 * len(values) + 1024:
        seen = np.zeros(hi - lo + 1, dtype=bool)
        shifted = values - lo if lo else values  # no copy when the values start at 0 (dense ids do)
        seen[shifted] = True
        present = np.flatnonzero(seen)
        rank = np.empty(len(seen), dtype=np.int64)  # read only where seen
        rank[present] = np.arange(len(present))
        return (present + lo).astype(values.dtype), rank[shifted]
    # a stable sort (timsort) takes columns made of a few sorted runs, as time columns are, in near one pass
    order = np.argsort(values, kind="stable")
    ordered = values[order]
    new = np.empty(len(values), dtype=bool)
    new[0] = True
    np.not_equal(ordered[1:], ordered[:-1], out=new[1:])
    inverse = np.empty(len(values), dtype=np.int64)
    inverse[order] = np.cumsum(new) - 1
    return ordered[new], inverse


def dense_ids(values: np.ndarray) -> np.ndarray:
    """np.unique(values, return_inverse=True)[1] of an integer column, as int64: each value's rank among the
    distinct values."""
    return unique_inverse(values)[1]


def window_stream_key(window: np.ndarray, stream: np.ndarray) -> np.ndarray:
    """One int64 per row that sorts and compares as (window, stream): rows of one stream of one window share it."""
    return window.astype(np.int64) << 32 | (stream.astype(np.int64) & 0xFFFFFFFF)


GROUP_ROWS = 1 << 18
"""Rows of the leading table in a group of windows that a pass works through at a time (window_groups)."""


def window_groups(windows: tuple[np.ndarray, ...], rows: int | None = None) -> list[tuple[slice, ...]]:
    """Consecutive windows gathered into groups of at least `rows` (default GROUP_ROWS) rows of the first table
    (the last group: what is left), each as one slice per table: the rows of those windows, when every table's
    `window` column is in window order (a recording's are). One group of every row when one is not, or when the
    first table has no more than `rows` rows.

    A pass whose rows relate only within a window (calls nest inside one profiling session) gives the same
    answer group by group, with its temporaries the size of a group, not of the trace."""
    rows = GROUP_ROWS if rows is None else rows
    whole = [tuple(slice(0, len(w)) for w in windows)]
    if len(windows[0]) <= rows or not all(len(w) < 2 or bool((w[1:] >= w[:-1]).all()) for w in windows):
        return whole
    ids = np.zeros(0, dtype=np.int64)
    for w in windows:  # each sorted: its distinct ids without a sort
        if len(w):
            ids = np.union1d(ids, w[np.concatenate(([True], w[1:] != w[:-1]))].astype(np.int64))
    lo = [np.searchsorted(w, same_type(ids, w), "left") for w in windows]
    hi = [np.searchsorted(w, same_type(ids, w), "right") for w in windows]
    groups, first = [], 0
    for i, end in enumerate(hi[0].tolist()):
        if end - int(lo[0][first]) >= rows or i == len(ids) - 1:
            groups.append(tuple(slice(int(a[first]), int(b[i])) for a, b in zip(lo, hi, strict=True)))
            first = i + 1
    return groups


def per_owner_sums(o: np.ndarray, w: np.ndarray) -> np.ndarray:
    """Per row, the sum of `w` over the rows with the same owner (`o`: non-negative ids); `w` itself when every
    row has an owner of its own. Owners in order (the ops of one stream's kernels, as recorded) come in runs,
    summed run by run, without a table as long as the largest id (3 M ops: 24 MB of float64). The same sums
    either way where `w` holds whole numbers (durations, counts): they add exactly in any order. Owners out of
    order are sorted first (stably: each owner's rows still add in row order, as np.bincount would add them,
    without bincount's table as long as the largest id)."""
    if len(o) < 2:
        per_op: np.ndarray = np.bincount(o, weights=w)[o]
        return per_op
    if not bool((o[1:] >= o[:-1]).all()):
        order = np.argsort(o, kind="stable")  # mostly in order already: ~1 ms for half a million
        out = np.empty(len(o))
        out[order] = per_owner_sums(o[order], w[order].astype(np.float64, copy=False))
        return out
    new = np.concatenate(([True], o[1:] != o[:-1]))
    if new.all():  # an owner per row (an op launching one kernel): nothing to add
        return w
    starts = np.flatnonzero(new)
    return np.repeat(np.add.reduceat(w, starts), np.diff(np.append(starts, len(o))))


def merged(starts: np.ndarray, ends: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The union of [start, end) intervals as disjoint, sorted intervals."""
    if not len(starts):
        return np.empty(0, dtype=np.int64), np.empty(0, dtype=np.int64)
    order = np.argsort(starts, kind="stable")
    s, e = starts[order].astype(np.int64), ends[order].astype(np.int64)
    reach = np.maximum.accumulate(e)
    new = np.ones(len(s), dtype=bool)
    new[1:] = s[1:] > reach[:-1]  # a start past every end so far begins a new merged interval
    first = np.flatnonzero(new)
    return s[first], np.maximum.reduceat(e, first)


def length(intervals: tuple[np.ndarray, np.ndarray]) -> int:
    """Total length of disjoint intervals (`merged`'s)."""
    return int((intervals[1] - intervals[0]).sum())
