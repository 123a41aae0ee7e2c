"""The CPU's cover of GPU gaps (gap_evidence): merging only the calls that overlap the gaps asked about gives
the cover that merging every call gives."""

from __future__ import annotations

import numpy as np

from analyzers.gap_evidence import Intervals, _touching


def test_the_calls_overlapping_the_gaps_cover_them_as_all_calls_do() -> None:
    rng = np.random.default_rng(8)
    for _ in range(500):
        n, m = int(rng.integers(0, 40)), int(rng.integers(1, 10))
        start = rng.integers(0, 300, n)
        end = start + rng.integers(0, 50, n)  # zero-length, nested and overlapping calls
        g0 = rng.integers(0, 300, m)
        g1 = g0 + rng.integers(0, 60, m)  # gaps may overlap (per-stream gaps do)
        hit = _touching(start, end - start, g0, g1)
        every = Intervals(start, end).covered(g0, g1)
        assert Intervals(start[hit], end[hit]).covered(g0, g1).tolist() == every.tolist()
        far = (end <= g0.min()) | (start >= g1.max())
        assert not (hit & far).any()  # calls beside every gap are left out
