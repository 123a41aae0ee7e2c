"""The CPU's cover of GPU gaps (gap_evidence): merging only the calls that overlap the gaps asked about gives
the cover that merging every call gives."""

from __future__ import annotations

import numpy as np

from analyzers.idle.gap_evidence import Intervals, _touching


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


def test_a_union_is_the_same_from_any_order_and_from_unions_of_its_parts() -> None:
    """Intervals sorts only what is out of order and keeps intervals that are disjoint already: the union of
    sorted, shuffled or pre-merged input is the same (`cpu_waits` unions window groups' unions)."""
    rng = np.random.default_rng(9)
    for _ in range(500):
        n = int(rng.integers(1, 60))
        start = np.sort(rng.integers(0, 400, n))
        end = start + rng.integers(0, 40, n)  # zero-length, nested, touching and overlapping intervals
        whole = Intervals(start, end)
        shuffled = rng.permutation(n)
        cut = int(rng.integers(0, n + 1))
        parts = [Intervals(start[:cut], end[:cut]), Intervals(start[cut:], end[cut:])]
        merged = Intervals(np.concatenate([p.s for p in parts]), np.concatenate([p.e for p in parts]))
        for other in (Intervals(start[shuffled], end[shuffled]), merged, Intervals(whole.s, whole.e)):
            assert other.s.tolist() == whole.s.tolist() and other.e.tolist() == whole.e.tolist()
            assert other.cum.tolist() == whole.cum.tolist()
        assert (whole.s[1:] > whole.e[:-1]).all()  # disjoint: not even touching
