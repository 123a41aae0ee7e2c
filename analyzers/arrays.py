"""Small numpy helpers shared by the passes."""

from __future__ import annotations

import numpy as np


def distinct(values: np.ndarray) -> np.ndarray:
    """Sorted distinct values, by sorting.

    numpy 2.x's plain `np.unique(x)` hashes, which on millions of distinct integers is ~50x slower than the
    sort it does when asked for counts (3 M timestamps: 3 s vs 0.05 s).
    """
    return np.unique(values, return_counts=True)[0]
