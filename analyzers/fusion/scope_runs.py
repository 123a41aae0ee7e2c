"""What fusing a scope's runs saves: each maximal run of consecutive fusable kernels of one stream in a
scope (fusion/scope.py) becomes one kernel; its saving is summed over the runs.

The bytes a run saves (its intermediates, matched by shape and dtype) are at most its bytes less what the
fused kernel still moves: the inputs of its ops that no earlier op of the run produced (a copy's or fill's
destination is written, not read; an op is charged at most the bytes it moves, so nll_loss reads its rows'
target entries, not the rows) and its last op's output. The fused kernel moves its bytes at the bandwidth the
run's kernels achieved (their bytes over their time, at most the peak): fusing removes traffic, it does not
make the rest stream faster than these kernels streamed it. So a run's kernels far under the memory roof save
in proportion to their time, not to their bytes at peak.

The runs are found and costed a group of whole windows at a time (a run never leaves its window), so the
per-kernel temporaries are a group's, not the trace's; the bytes a run saves go through Python once per
distinct sequence of costed ops in a group (a model's runs repeat every layer and step).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from analyzers.arrays import window_groups
from analyzers.cost.op_families import base_name
from analyzers.cost.opcost import OpCost
from analyzers.cost.roofline import Roofline
from brrrtui.contract.model import NONE, Trace

_P1, _P2 = np.uint64(0x9E3779B97F4A7C15), np.uint64(0xC2B2AE3D27D4EB4F)  # as fusion._signatures
WRITE_ONLY_SELF = frozenset({"copy_", "_copy_from", "fill_", "zero_"})  # their first argument is only written


@dataclass(frozen=True)
class StreamOrder:
    """Non-transparent GPU rows in (window, stream, start) order, the (window, stream) key per row, and which
    rows are fusion candidates (fusion/chains.py's rule)."""

    order: np.ndarray
    key: np.ndarray
    cand: np.ndarray


def _saved_bytes(costs: list[OpCost | None]) -> float:
    """Bytes a fused kernel does not move: intermediates re-read, and their writes (once per production)."""
    produced: dict[tuple[tuple[int, ...], str], bool] = {}  # (shape, dtype) -> its write not yet counted
    saved = 0.0
    for c in costs:
        if c is None:
            continue
        for t in c.inputs:
            if t is None or (t.shape, t.dtype) not in produced:
                continue
            saved += t.nbytes
            if produced[(t.shape, t.dtype)]:
                saved += t.nbytes
                produced[(t.shape, t.dtype)] = False
        if c.output is not None:
            produced[(c.output.shape, c.output.dtype)] = True
    return saved


def _external_bytes(costs: list[OpCost | None], names: list[str]) -> float:
    """Bytes a fused kernel of the run still moves: per op, its inputs that no earlier op of the run produced
    (an op reading more inputs of one shape and dtype than the run produced of it reads the rest from
    outside), at most the bytes the op moves; plus the last op's output."""
    produced: dict[tuple[tuple[int, ...], str], int] = {}
    external = 0.0
    last = None
    for c, name in zip(costs, names, strict=True):
        if c is None:
            continue
        inputs = c.inputs[1:] if base_name(name) in WRITE_ONLY_SELF else c.inputs
        seen: dict[tuple[tuple[int, ...], str], int] = {}
        outside = 0.0
        for t in inputs:
            if t is None:
                continue
            key = (t.shape, t.dtype)
            seen[key] = seen.get(key, 0) + 1
            if seen[key] > produced.get(key, 0):
                outside += t.nbytes
        external += outside if c.bytes is None else min(outside, c.bytes)
        if c.output is not None:
            key = (c.output.shape, c.output.dtype)
            produced[key] = produced.get(key, 0) + 1
        last = c
    if last is not None and last.output is not None:
        external += last.output.nbytes
    return external


@dataclass(frozen=True)
class ScopeTotals:
    """A scope's runs, each fused into one kernel, summed."""

    rows: np.ndarray  # the scope's rows, in stream order
    bytes_now: float | None
    saved: float
    kernel_ns: float
    saving_ns: float
    launches: int


def scope_totals(
    trace: Trace, roof: Roofline, order: StreamOrder, mask: np.ndarray, bw: float | None, per_launch: float
) -> ScopeTotals:
    """The runs of the scope `mask` selects, each fused into one kernel, summed (see the module doc). Per-run
    figures are column sums over run boundaries; the per-run columns of every group are joined before they
    are summed, so the sums are those of one group of every row."""
    o = order.order
    groups = window_groups((trace.gpu.window[o],))  # `o` is in (window, stream, start) order
    parts = [_group_runs(trace, roof, o[g], order.key, mask, bw, per_launch) for (g,) in groups]
    columns = [list(c) for c in zip(*(p for p in parts if p is not None), strict=True)]
    del parts
    if not columns:
        return ScopeTotals(o[:0], None, 0.0, 0.0, 0.0, 0)
    sel, now, any_run_known, dur, saved, saving, launches = (_joined(c) for c in columns)
    return ScopeTotals(
        sel,
        float(now.sum()) if bool(any_run_known.any()) else None,
        float(saved.sum()),
        float(dur.sum()),
        float(saving.sum()),
        int(launches.sum()),
    )


def _joined(parts: list[np.ndarray]) -> np.ndarray:
    """The groups' pieces of a column end to end; the pieces let go of at once."""
    out = np.concatenate(parts)
    parts.clear()
    return out


def _group_runs(
    trace: Trace,
    roof: Roofline,
    o: np.ndarray,
    key: np.ndarray,
    mask: np.ndarray,
    bw: float | None,
    per_launch: float,
) -> tuple[np.ndarray, ...] | None:
    """The runs among `o` (rows in stream order, of whole windows): the rows in them, and per run its bytes
    now, whether any of them is known, its kernel ns, the bytes and ns fusing it saves, and the launches it
    saves. None without a run."""
    m = mask[o]
    ko = key[o]
    cont = np.zeros(len(o), dtype=bool)
    cont[1:] = m[1:] & m[:-1] & (ko[1:] == ko[:-1])
    del ko
    starts = np.nonzero(m & ~cont)[0]
    if not len(starts):
        return None
    ends = np.nonzero(m & ~np.append(cont[1:], False))[0]  # a run goes on while `cont`
    count = np.int32 if len(o) < 2**31 else np.int64
    run_of = np.cumsum(m & ~cont, dtype=count)[m]  # run number of each row of `sel`
    run_of -= 1
    first_in_run = np.concatenate(([0], np.nonzero(np.diff(run_of))[0] + 1))
    sel = o[m]
    gpu = trace.gpu
    kb = roof.bytes[sel]
    known = np.isfinite(kb)
    now = np.add.reduceat(np.where(known, kb, 0.0), first_in_run)
    any_run_known = np.logical_or.reduceat(known, first_in_run)
    del kb, known
    dur = np.add.reduceat(gpu.dur_ns[sel].astype(np.float64), first_in_run)
    last, first = o[ends], o[starts]
    wall = (gpu.start_ns[last] + gpu.dur_ns[last] - gpu.start_ns[first]).astype(np.float64)
    n_rows = (ends - starts + 1).astype(np.float64)
    cached, external = _saved_per_run(trace, roof, sel, run_of, first_in_run)
    saved = np.where(any_run_known, np.minimum(cached, np.maximum(now - external, 0.0)), cached)
    with np.errstate(divide="ignore", invalid="ignore"):
        achieved = np.where(any_run_known & (dur > 0) & (now > 0), now / (dur * 1e-9), np.nan)
    if bw:  # the run's own bandwidth, at most the peak; the peak where the run's bytes are unknown
        rate = np.where(np.isfinite(achieved), np.minimum(achieved, float(bw)), float(bw))
    else:
        rate = achieved
    has_rate = np.isfinite(rate)
    safe = np.where(has_rate, rate, 1.0)
    saving = np.where(has_rate, saved / safe * 1e9, 0.0) + (n_rows - 1) * per_launch
    floor = np.where(has_rate, (now - saved) / safe * 1e9, 0.0)
    saving = np.maximum(0.0, np.minimum(saving, wall - floor))
    return sel, now, any_run_known, dur, saved, saving, ends - starts


def _saved_per_run(
    trace: Trace, roof: Roofline, sel: np.ndarray, run_of: np.ndarray, first_in_run: np.ndarray
) -> tuple[np.ndarray, np.ndarray]:
    """(_saved_bytes, _external_bytes) of each run's sequence of costed ops (an op split over several
    kernels counts once).

    Runs are grouped by their sequence (a 64-bit polynomial hash with the length, then every element
    compared with the group's first run: a collision falls back to grouping the sequences' bytes in
    Python), and both run once per group (a cost is of one op name: its group's first op names it)."""
    op = roof.cost_op[sel]
    new_op = np.ones(len(op), dtype=bool)
    new_op[1:] = (op[1:] != op[:-1]) | (run_of[1:] != run_of[:-1])
    idx = roof.op_costs.index
    op = op[new_op]
    cost_idx = np.where(op >= 0, idx[np.maximum(op, 0)] if len(idx) else NONE, NONE)
    bounds = np.searchsorted(np.nonzero(new_op)[0], first_in_run)
    lengths = np.diff(np.append(bounds, len(cost_idx)))
    group, rep = _same_sequences(cost_idx, bounds, lengths)
    costs = roof.op_costs.costs
    saved = np.empty(len(rep), dtype=np.float64)
    external = np.empty(len(rep), dtype=np.float64)
    for g, r in enumerate(rep.tolist()):
        span = slice(int(bounds[r]), int(bounds[r] + lengths[r]))
        seq = [costs[j] if j >= 0 else None for j in cost_idx[span].tolist()]
        names = [trace.name(int(trace.ops.name[o])) if o >= 0 else "" for o in op[span].tolist()]
        saved[g] = _saved_bytes(seq)
        external[g] = _external_bytes(seq, names)
    return saved[group], external[group]


def _same_sequences(
    values: np.ndarray, bounds: np.ndarray, lengths: np.ndarray
) -> tuple[np.ndarray, np.ndarray]:
    """Group the sequences values[bounds[i] : bounds[i] + lengths[i]] by content: (group of each sequence,
    the first sequence of each group). Exact: a hash collision is caught by comparing every element with
    the group's first sequence, and then the sequences are grouped by their bytes instead."""
    n = len(bounds)
    if not n:
        return np.zeros(0, dtype=np.int64), np.zeros(0, dtype=np.int64)
    seq_of = np.repeat(np.arange(n), lengths)
    pos = np.arange(len(values)) - bounds[seq_of]
    v = values.astype(np.uint64)
    width = int(lengths.max()) if len(values) else 1
    with np.errstate(over="ignore"):
        p1 = np.cumprod(np.full(max(width, 1), _P1, dtype=np.uint64))
        key = np.add.reduceat(v * p1[pos], bounds) + lengths.astype(np.uint64) * _P2  # each holds one value
    _, rep, group = np.unique(key, return_index=True, return_inverse=True)
    group = group.reshape(-1)
    rep_of = rep[group]
    same_length = bool((lengths[rep_of] == lengths).all())
    if not same_length or (values != values[bounds[rep_of][seq_of] + pos]).any():  # a collision
        keys = [values[b : b + m].tobytes() for b, m in zip(bounds.tolist(), lengths.tolist(), strict=True)]
        ids: dict[bytes, int] = {}
        group = np.array([ids.setdefault(k, len(ids)) for k in keys], dtype=np.int64)
        rep = np.unique(group, return_index=True)[1]
    return group, rep
