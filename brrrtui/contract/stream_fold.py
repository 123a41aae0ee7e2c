"""Folding streamed kernels into aggregates: what the recorder keeps of the stream's older rows.

A chunk of stream rows (the oldest the recorder still holds raw) becomes one aggregate row per
(segment, template position, name, kind, device, stream, time bucket) with what the analysis needs of them:
count, summed/min/max duration, a duration histogram (STREAM_HIST_EDGES_NS), the GPU idle before them, copied
bytes. The rows are aligned to the segment's template exactly as analyzers.stream.lines aligns raw rows
(brrrtui.contract.stream_align), continuing each segment where the previous chunk left it (`FoldState`), so per-line
counts and sums from aggregates plus the raw rows equal those from all rows raw.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from brrrtui.contract.model import NONE, STREAM_AGG_SCHEMA, STREAM_BUSY_SCHEMA, STREAM_FOLD_SCHEMA, Table
from brrrtui.contract.schema import STREAM_HIST_EDGES_NS
from brrrtui.contract.stream_align import TemplateNames, align_from, idle_before

BUCKET_NS = 60_000_000_000
"""The time bucket of the per-position aggregates. A fold takes ~10 s of GPT-2's stream, so most folds' rows
share one bucket: a fold gives about one aggregate per template position (a bucket of 1 s: ten)."""
BUSY_BUCKET_NS = 200_000_000
"""The time bucket of the folded rows' time profile (stream_busy), which the timeline draws."""

_KEY = ("pos", "name", "kind", "device", "stream", "bucket")
_EDGES = np.asarray(STREAM_HIST_EDGES_NS, dtype=np.int64)


@dataclass
class FoldState:
    """Where the folding of one segment (the rows streamed after one window) stands."""

    template_window: int
    next_pos: int = 0
    last_correlation: int = NONE
    last_end: dict[int, int] = field(default_factory=dict)  # device -> latest end folded


@dataclass
class Folded:
    agg: dict[str, np.ndarray]  # STREAM_AGG_SCHEMA columns
    folds: dict[str, np.ndarray]  # STREAM_FOLD_SCHEMA columns
    busy: dict[str, np.ndarray]  # STREAM_BUSY_SCHEMA columns


def _empty(schema: Mapping[str, Any]) -> dict[str, np.ndarray]:
    return {c: np.empty(0, dtype=np.dtype(d)) for c, d in schema.items()}


def fold_segment(
    rows: Table, template: TemplateNames | None, state: FoldState, bucket_ns: int = BUCKET_NS
) -> tuple[dict[str, np.ndarray], dict[str, np.ndarray], dict[str, np.ndarray]]:
    """Aggregate the rows of one segment (any order; aligned in correlation order) and advance `state`.
    Returns (aggregate columns, fold columns: one row per device, time-profile columns)."""
    order = np.argsort(rows.correlation, kind="stable")
    names = rows.name[order].astype(np.int64)
    pos = np.full(len(order), NONE, dtype=np.int64)
    if template is not None:
        pos[:], state.next_pos = align_from(names, template, state.next_pos)
    start, dur, device = rows.start_ns[order], rows.dur_ns[order], rows.device[order]
    gaps, state.last_end = idle_before(start, dur, device, state.last_end)
    state.last_correlation = int(rows.correlation.max())
    cols = {
        "pos": pos,
        "name": names,
        "kind": rows.kind[order].astype(np.int64),
        "device": device.astype(np.int64),
        "stream": rows.stream[order].astype(np.int64),
        "bucket": start // bucket_ns,
    }
    agg = _aggregate(cols, dur, gaps, rows.bytes[order])
    n = len(agg["count"])
    agg["after_window"] = np.full(n, int(rows.after_window[0]), dtype=np.int64)
    agg["template_window"] = np.full(n, state.template_window, dtype=np.int64)
    agg["bucket_ns"] = np.full(n, bucket_ns, dtype=np.int64)
    devs = np.unique(device)
    first = [int(start[device == d].min()) for d in devs.tolist()]
    folds = {
        "after_window": np.full(len(devs), int(rows.after_window[0]), dtype=np.int64),
        "template_window": np.full(len(devs), state.template_window, dtype=np.int64),
        "device": devs.astype(np.int64),
        "rows": np.asarray([int((device == d).sum()) for d in devs.tolist()], dtype=np.int64),
        "first_ns": np.asarray(first, dtype=np.int64),
        "last_ns": np.asarray([state.last_end[int(d)] for d in devs.tolist()], dtype=np.int64),
        "next_pos": np.full(len(devs), state.next_pos, dtype=np.int64),
        "last_correlation": np.full(len(devs), state.last_correlation, dtype=np.int64),
    }
    return agg, folds, _busy(int(rows.after_window[0]), cols, dur, gaps, start)


def _busy(
    after: int, cols: dict[str, np.ndarray], dur: np.ndarray, gaps: np.ndarray, start: np.ndarray
) -> dict[str, np.ndarray]:
    """Rows, summed duration and idle per (device, stream, BUSY_BUCKET_NS bucket)."""
    keys = [cols["device"], cols["stream"], start // BUSY_BUCKET_NS]
    order = np.lexsort(keys[::-1])
    k = np.stack([c[order] for c in keys])
    new = np.ones(len(order), dtype=bool)
    new[1:] = (k[:, 1:] != k[:, :-1]).any(axis=0)
    starts = np.nonzero(new)[0]
    n = len(starts)
    return {
        "after_window": np.full(n, after, dtype=np.int64),
        "device": k[0][starts],
        "stream": k[1][starts],
        "bucket": k[2][starts],
        "bucket_ns": np.full(n, BUSY_BUCKET_NS, dtype=np.int64),
        "count": np.diff(np.append(starts, len(order))),
        "dur_ns": np.add.reduceat(dur[order].astype(np.int64), starts),
        "gap_ns": np.add.reduceat(gaps[order], starts),
    }


def _aggregate(
    cols: dict[str, np.ndarray], dur: np.ndarray, gaps: np.ndarray, nbytes: np.ndarray
) -> dict[str, np.ndarray]:
    """One row per distinct key (_KEY columns): count, duration sum/min/max/histogram, idle, bytes."""
    order = np.lexsort([cols[k] for k in reversed(_KEY)])
    keys = np.stack([cols[k][order] for k in _KEY])
    new = np.ones(len(order), dtype=bool)
    new[1:] = (keys[:, 1:] != keys[:, :-1]).any(axis=0)
    starts = np.nonzero(new)[0]
    group = np.cumsum(new) - 1
    d, g, b = dur[order].astype(np.int64), gaps[order], nbytes[order].astype(np.int64)
    out = {k: keys[i][starts] for i, k in enumerate(_KEY)}
    out["count"] = np.diff(np.append(starts, len(order)))
    out["dur_ns"] = np.add.reduceat(d, starts)
    out["dur_min_ns"] = np.minimum.reduceat(d, starts)
    out["dur_max_ns"] = np.maximum.reduceat(d, starts)
    nbins = len(_EDGES) + 1
    hist = np.bincount(group * nbins + np.searchsorted(_EDGES, d, "right"), minlength=len(starts) * nbins)
    for k, h in enumerate(hist.reshape(len(starts), nbins).T):
        out[f"hist{k}"] = h
    out["gap_ns"] = np.add.reduceat(g, starts)
    out["gap_max_ns"] = np.maximum.reduceat(g, starts)
    out["gaps"] = np.add.reduceat((g > 0).astype(np.int64), starts)
    known = b >= 0
    out["bytes"] = np.where(
        np.add.reduceat(known.astype(np.int64), starts) > 0,
        np.add.reduceat(np.where(known, b, 0), starts),
        NONE,
    )
    return out


def fold(
    rows: Table,
    templates: dict[int, TemplateNames],
    template_for: dict[int, int],
    states: dict[int, FoldState],
    bucket_ns: int = BUCKET_NS,
) -> Folded:
    """Fold a chunk of stream rows, segment by segment (`template_for`: segment -> its template window, for
    segments not folded before; `states` carries each segment's alignment and idle across chunks)."""
    aggs, folds, busy = [], [], []
    for after in np.unique(rows.after_window).tolist():
        seg = rows.take(np.nonzero(rows.after_window == after)[0])
        state = states.get(after)
        if state is None:
            state = states[after] = FoldState(template_for.get(after, NONE))
        agg, fl, bz = fold_segment(seg, templates.get(state.template_window), state, bucket_ns)
        aggs.append(agg)
        folds.append(fl)
        busy.append(bz)
    return Folded(
        _join(aggs, STREAM_AGG_SCHEMA), _join(folds, STREAM_FOLD_SCHEMA), _join(busy, STREAM_BUSY_SCHEMA)
    )


def _join(parts: list[dict[str, np.ndarray]], schema: Mapping[str, Any]) -> dict[str, np.ndarray]:
    return {c: np.concatenate([p[c] for p in parts]) for c in schema} if parts else _empty(schema)
