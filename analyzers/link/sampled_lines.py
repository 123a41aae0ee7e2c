"""Which line the main thread was executing most inside each of some intervals (GPU idle gaps), from the
line samples brrrtui takes inside windows (model.LINE_SAMPLE_SCHEMA)."""

from __future__ import annotations

import numpy as np

from brrrtui.contract.model import NONE, Table


def sampled_lines(samples: Table, g0: np.ndarray, g1: np.ndarray, wanted: np.ndarray) -> np.ndarray:
    """For each wanted gap [g0, g1), the line most often sampled inside it (ties: the lowest line id), else
    NONE::

    main thread   ...tanh  tanh | time.sleep(0.002) ................ | (w * t).sum()
    samples                        87   87   87   87   87   87   87     88
    GPU           [k][k][k]                                              [k]
                               <--------- gap: HOST, line 87 -------->
    """
    return lines_sampled_in(*by_time(samples), g0, g1, wanted)


def by_time(samples: Table) -> tuple[np.ndarray, np.ndarray]:
    """The samples' times and lines, in time order."""
    order = np.argsort(samples.t_ns, kind="stable")
    return samples.t_ns[order], samples.line[order].astype(np.int64)


def lines_sampled_in(
    t: np.ndarray, ln: np.ndarray, g0: np.ndarray, g1: np.ndarray, wanted: np.ndarray
) -> np.ndarray:
    """sampled_lines of samples at times `t` (sorted) on lines `ln`."""
    out = np.full(len(g0), NONE, dtype=np.int64)
    if not len(t) or not wanted.any():
        return out
    lo = np.searchsorted(t, g0, "left")
    hi = np.searchsorted(t, g1, "left")
    pick = np.flatnonzero(wanted & (hi > lo))  # the gaps with samples: one sort for them all
    if not len(pick):
        return out
    lengths = (hi - lo)[pick]
    gap = np.repeat(np.arange(len(pick)), lengths)  # each sample inside a picked gap, gap by gap
    at = np.arange(len(gap)) + np.repeat(lo[pick] - (np.cumsum(lengths) - lengths), lengths)
    line = ln[at]
    low, span = int(line.min()), int(line.max() - line.min()) + 1
    key, counts = np.unique(gap * span + (line - low), return_counts=True)  # sorted: by gap, then line
    g_of, l_of = key // span, key % span + low
    best = np.lexsort((l_of, -counts, g_of))  # per gap: the most samples, then the lowest line id
    first = best[np.concatenate(([True], g_of[best][1:] != g_of[best][:-1]))]
    out[pick[g_of[first]]] = l_of[first]
    return out
