"""Fusion candidates: runs of memory-bound pointwise/reduction kernels that could be one kernel.

The article's example: `x.cos().cos()` reads x, writes a temporary, reads it back, writes y: 4 global memory
trips; fused it is 2 (read x, write y). A chain here::

    stream 7   [mul][add][tanh][mul]           [gemm]
    line        41   41   42    42
    op out->in   y=x*c -> y+x -> tanh(.) -> .*x

Two neighbouring kernels of one stream (nothing else runs between them on that stream) are linked when

1. both are memory- or overhead-bound kernels of pointwise, reduction, normalisation or copy ops, or such kernels
   bound by their instructions on the SIMT units (a long kernel far under the memory roof: roofline.simt_bound):
   fused, their arithmetic runs once in one kernel, without the intermediates and the launches;
   (fills and memsets of at most 1 MiB between them, such as a reduction zeroing its counters, are skipped);
2. they come from one op, or from the same line, lines at most 2 apart in one file, or one function;
3. data flows: the first op's output (shape and dtype; an in-place op's output is its self) equals one of the
   second op's tensor inputs. Shapes are all the profiler records, so a same-shaped unrelated tensor also
   passes: "as far as shapes allow". Ops without recorded shapes pass on the location rule alone.

A chain is a maximal run of links spanning at least two ops. Bytes moved now = the kernels' bytes (inputs +
outputs per op); fused, every linked intermediate is neither written nor re-read: saved = 2 x its size (an upper
bound: an intermediate that autograd saves for backward must still be written once). The saving per occurrence:

    saved_bytes / peak bandwidth  +  (kernels - 1) x per-launch cost of an unprofiled step
                                                     (launch_timing.unprofiled_launch_ns)

capped at the chain's own time (first start to last end) less the fused kernel's bytes / peak bandwidth.
Occurrences with the same kernels from the same lines (every step repeats them) are grouped into one chain.

A chain whose advice is to compile its function (no named fused op matches it) then stands for the whole
function: fusion/scope.py widens it to every run of fusable kernels compiling that function would fuse.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import NamedTuple

import numpy as np

from analyzers.arrays import lexsort, unique_inverse, unique_rows, window_stream_key
from analyzers.cost.op_families import Family
from analyzers.cost.opcost import OpCost
from analyzers.cost.roofline import Roofline
from analyzers.fusion.candidate import FusionChain as FusionChain
from analyzers.fusion.patterns import ChainOp, named_pattern as named_pattern
from analyzers.fusion.scope import compile_scopes
from analyzers.fusion.scope_runs import StreamOrder
from analyzers.link.links import Links
from analyzers.results import REGIME_CODES, Regime
from brrrtui.contract.model import NONE, GpuKind, Peaks, SourceLine, Trace

LINE_DISTANCE = 2
TRANSPARENT_BYTES = 1 << 20  # fills/memsets up to this size are skipped over
_FUSIBLE = {int(f) for f in (Family.POINTWISE, Family.REDUCTION, Family.NORM, Family.COPY)}
_ELEMENTWISE_NAME = re.compile(
    r"elementwise|reduce_kernel|triton_(poi|red|per)|batch_norm|layer_norm|softmax", re.I
)
_MEM, _OVH, _COMPUTE = REGIME_CODES[Regime.MEMORY], REGIME_CODES[Regime.OVERHEAD], REGIME_CODES[Regime.COMPUTE]


def _feeds(a: OpCost | None, b: OpCost | None) -> tuple[bool, float]:
    """(does a's output plausibly feed b?, bytes of the intermediate). Unknown shapes -> (True, 0)."""
    if a is None or b is None or a.output is None or not b.inputs:
        return True, 0.0
    out = a.output
    for t in b.inputs:
        if t is not None and t.shape == out.shape and t.dtype == out.dtype:
            return True, float(out.nbytes)
    return False, 0.0


@dataclass(frozen=True)
class _Pairs:
    """Neighbouring kernels of one stream, a[p] then b[p]: `linked` where they would fuse, `link_bytes` the
    bytes of the intermediate a fused kernel would neither write nor re-read."""

    a: np.ndarray
    b: np.ndarray
    linked: np.ndarray
    link_bytes: np.ndarray


def _neighbours(trace: Trace, roof: Roofline) -> tuple[np.ndarray, np.ndarray, np.ndarray, StreamOrder]:
    """(a, b, pair, order): consecutive rows of each (window, stream), small fills and memsets skipped; `pair`
    where both are fusion candidates on the same stream; `order` those rows in stream order."""
    gpu = trace.gpu
    name_ok = trace.string_flags(_ELEMENTWISE_NAME.search)
    fam_ok = np.isin(roof.family, list(_FUSIBLE)) | ((roof.family < 0) & name_ok[np.maximum(gpu.name, 0)])
    simt = (roof.regime == _COMPUTE) & (roof.tensor_cores == 0)  # bound by instructions, off the tensor cores
    cand = (gpu.kind == GpuKind.KERNEL) & (np.isin(roof.regime, [_MEM, _OVH]) | simt) & fam_ok
    # small fills and memsets (zeroing a counter or workspace) neither join nor break a chain
    small = np.where(np.isfinite(roof.bytes), roof.bytes, 0.0) <= TRANSPARENT_BYTES
    transparent = ((roof.family == Family.FILL) | (gpu.kind == GpuKind.MEMSET)) & small
    seq = np.nonzero(~transparent)[0]
    key = window_stream_key(gpu.window, gpu.stream)
    order = seq[lexsort((gpu.start_ns[seq], key[seq]))]
    a, b = order[:-1], order[1:]
    return a, b, cand[a] & cand[b] & (key[a] == key[b]), StreamOrder(order, key, cand)


def _near(lines: list[SourceLine], kline: np.ndarray, a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """Rows a and b come from the same line, lines <= LINE_DISTANCE apart in one file, or one function."""
    n_lines = len(lines)
    if not n_lines:
        return np.zeros(len(a), dtype=bool)
    files = {f: i for i, f in enumerate(dict.fromkeys(ln.file for ln in lines))}
    funcs = {f: i for i, f in enumerate(dict.fromkeys((ln.file, ln.function) for ln in lines))}
    l_file = np.array([files[ln.file] for ln in lines] + [-1])
    l_func = np.array([funcs[(ln.file, ln.function)] for ln in lines] + [-2])
    l_num = np.array([ln.line for ln in lines] + [-(10**9)])
    la = np.where(kline[a] >= 0, kline[a], n_lines)
    lb = np.where(kline[b] >= 0, kline[b], n_lines)
    known = (la < n_lines) & (lb < n_lines)
    near: np.ndarray = known & (
        (la == lb)
        | ((l_file[la] == l_file[lb]) & (np.abs(l_num[la] - l_num[lb]) <= LINE_DISTANCE))
        | (l_func[la] == l_func[lb])
    )
    return near


def _data_flow(
    roof: Roofline, a: np.ndarray, b: np.ndarray, check: np.ndarray
) -> tuple[np.ndarray, np.ndarray]:
    """(feeds, intermediate bytes) for the pairs in `check`, decided once per distinct (cost of a, cost of b).
    A kernel's cost (and so output) is that of the bytes op the roofline chose for it."""
    cost_idx, costs = roof.op_costs.index, roof.op_costs.costs
    cop = roof.cost_op
    n = len(cop)
    ci = np.where(cop >= 0, cost_idx[np.maximum(cop, 0)], NONE) if len(cost_idx) else np.full(n, NONE)
    ci = ci.astype(np.int64)  # the pair key below is up to (costs + 1) ** 2
    width = len(costs) + 1
    k = (ci[a[check]] + 1) * width + (ci[b[check]] + 1)
    uniq, inv = unique_inverse(k)
    verdicts = []
    for u in uniq.tolist():
        first = costs[u // width - 1] if u // width else None
        second = costs[u % width - 1] if u % width else None
        verdicts.append(_feeds(first, second))
    return np.array([v[0] for v in verdicts])[inv], np.array([v[1] for v in verdicts])[inv]


class FusablePairs(NamedTuple):
    """Which neighbouring kernels would fuse, and the stream order they come from."""

    pairs: _Pairs
    order: StreamOrder


def fusable_pairs(trace: Trace, links: Links, roof: Roofline) -> FusablePairs | None:
    """The pairs of neighbouring kernels that would fuse (None with fewer than two GPU rows). What does not
    depend on a launch's cost, so the analysis works it out beside the idle passes that give that cost."""
    if len(trace.gpu) < 2:
        return None
    kop = links.kernel_op
    a, b, pair, order = _neighbours(trace, roof)
    same_op = pair & (kop[a] >= 0) & (kop[a] == kop[b])
    check = np.nonzero(pair & ~same_op & _near(trace.lines, links.kernel_line, a, b))[0]
    link_bytes = np.zeros(len(a))
    linked = same_op.copy()
    if len(check):
        ok, inter = _data_flow(roof, a, b, check)
        linked[check[ok]] = True
        link_bytes[check[ok]] = 2.0 * inter[ok]  # written once, read once
    return FusablePairs(_Pairs(a, b, linked, link_bytes), order)


def fusion_chains(
    trace: Trace,
    links: Links,
    roof: Roofline,
    peaks: Peaks,
    per_launch_ns: float | None,
    fusable: FusablePairs | None = None,
) -> list[FusionChain]:
    """All chains, grouped by (kernel names, lines), by total saving descending; chains whose advice is to
    compile their function become that function's scope (fusion/scope.py). `fusable`: fusable_pairs's, when
    the caller has it."""
    found = fusable_pairs(trace, links, roof) if fusable is None else fusable
    if found is None:
        return []
    pairs, order = found
    chains = _group_runs(
        trace, roof, links.kernel_op, links.kernel_line, pairs, peaks.bytes_per_s, per_launch_ns
    )
    return compile_scopes(trace, links, roof, order, chains, peaks.bytes_per_s, per_launch_ns)


_P1, _P2 = np.uint64(0x9E3779B97F4A7C15), np.uint64(0xC2B2AE3D27D4EB4F)


@dataclass(frozen=True)
class _Runs:
    """Maximal runs of links. Run r of n_links[r] links covers the n_rows[r] = n_links[r] + 1 rows
    rows[offsets[r] : offsets[r] + n_rows[r]] (a[p], b[p..p+k-1]); per row, `run` is its run and `pos` its
    place in it; the links of all runs are link_pos, run_of_link their run."""

    n_links: np.ndarray
    n_rows: np.ndarray
    offsets: np.ndarray
    rows: np.ndarray
    run: np.ndarray
    pos: np.ndarray
    link_pos: np.ndarray
    run_of_link: np.ndarray

    def __len__(self) -> int:
        return len(self.n_links)


def _runs(pairs: _Pairs) -> _Runs:
    edges = np.diff(np.concatenate(([0], pairs.linked.astype(np.int8), [0])))
    starts = np.nonzero(edges == 1)[0]
    ends = np.nonzero(edges == -1)[0]  # exclusive
    n_links = ends - starts
    link_pos = np.nonzero(pairs.linked)[0]
    n_rows = n_links + 1
    offsets = np.concatenate(([0], np.cumsum(n_rows)[:-1]))
    total = int(n_rows.sum())
    rows = np.empty(total, dtype=np.int64)
    is_first = np.zeros(total, dtype=bool)
    is_first[offsets] = True
    rows[offsets] = pairs.a[starts]
    rows[~is_first] = pairs.b[link_pos]
    run = np.repeat(np.arange(len(starts)), n_rows)
    return _Runs(
        n_links=n_links,
        n_rows=n_rows,
        offsets=offsets,
        rows=rows,
        run=run,
        pos=np.arange(total) - offsets[run],
        link_pos=link_pos,
        run_of_link=np.repeat(np.arange(len(starts)), n_links),
    )


@dataclass(frozen=True)
class _RunTotals:
    bytes_now: np.ndarray  # bytes the run's kernels move (known ones)
    bytes_known: np.ndarray  # bool: some kernel's bytes are known
    saved: np.ndarray  # intermediate bytes fusing removes (at most bytes_now where known)
    kernel_ns: np.ndarray
    saving: np.ndarray  # estimated ns saved (see the module doc)


def _run_totals(
    trace: Trace, roof: Roofline, runs: _Runs, pairs: _Pairs, bw: float | None, per_launch_ns: float | None
) -> _RunTotals:
    gpu, rows, m = trace.gpu, runs.rows, len(runs)
    saved = np.bincount(runs.run_of_link, weights=pairs.link_bytes[runs.link_pos], minlength=m)
    kb = roof.bytes[rows]
    known = np.isfinite(kb)
    bytes_now = np.bincount(runs.run, weights=np.where(known, kb, 0.0), minlength=m)
    bytes_known = np.bincount(runs.run, weights=known, minlength=m) > 0
    saved = np.where(bytes_known, np.minimum(saved, bytes_now), saved)
    kernel_ns = np.bincount(runs.run, weights=gpu.dur_ns[rows], minlength=m)
    last = rows[runs.offsets + runs.n_rows - 1]
    wall = (gpu.start_ns[last] + gpu.dur_ns[last] - gpu.start_ns[rows[runs.offsets]]).astype(np.float64)
    with np.errstate(divide="ignore", invalid="ignore"):
        rate = np.full(m, bw) if bw else np.where(kernel_ns > 0, bytes_now / (kernel_ns * 1e-9), np.nan)
        ok_rate = np.isfinite(rate) & (rate > 0)
        saving = np.where(ok_rate, saved / rate * 1e9, 0.0) + runs.n_links * (per_launch_ns or 0.0)
        floor = np.where(ok_rate & bytes_known, (bytes_now - saved) / rate * 1e9, 0.0)
    saving = np.maximum(0.0, np.minimum(saving, wall - floor))
    return _RunTotals(bytes_now, bytes_known, saved, kernel_ns, saving)


def _signatures(
    trace: Trace, kline: np.ndarray, runs: _Runs, keep: np.ndarray
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Per kept run: (rows, hash1, hash2), two 64-bit polynomial hashes of its (kernel name, line) sequence."""
    rows, pos = runs.rows, runs.pos
    value = (trace.gpu.name[rows].astype(np.uint64) << np.uint64(32)) ^ (kline[rows] + 1).astype(np.uint64)
    with np.errstate(over="ignore"):
        powers1 = np.cumprod(np.full(int(runs.n_rows.max()), _P1, dtype=np.uint64))
        powers2 = np.cumprod(np.full(int(runs.n_rows.max()), _P2, dtype=np.uint64))
        h1 = np.add.reduceat(value * powers1[pos], runs.offsets)
        h2 = np.add.reduceat((value + np.uint64(1)) * powers2[pos], runs.offsets)
    return runs.n_rows[keep].astype(np.uint64), h1[keep], h2[keep]


def _group_sums(
    totals: _RunTotals, keep: np.ndarray, group: np.ndarray, n_groups: int
) -> dict[str, np.ndarray]:
    """Per group of identical runs (group[i]: the group of run keep[i]): the runs' totals summed, how many
    runs it holds (`count`) and whether every run's bytes are known (`all_known`)."""
    named = (
        ("bytes_now", totals.bytes_now),
        ("saved", totals.saved),
        ("kernel_ns", totals.kernel_ns),
        ("saving", totals.saving),
    )
    sums = {name: np.bincount(group, weights=arr[keep], minlength=n_groups) for name, arr in named}
    sums["all_known"] = np.bincount(group, weights=~totals.bytes_known[keep], minlength=n_groups) == 0
    sums["count"] = np.bincount(group, minlength=n_groups)
    return sums


def _group_runs(
    trace: Trace,
    roof: Roofline,
    kop: np.ndarray,
    kline: np.ndarray,
    pairs: _Pairs,
    bw: float | None,
    per_launch_ns: float | None,
) -> list[FusionChain]:
    """Maximal runs of links -> chains; runs with the same kernel names on the same lines are one chain."""
    if not pairs.linked.any():
        return []
    runs = _runs(pairs)
    a, b, lp = pairs.a, pairs.b, runs.link_pos
    # at least two distinct ops: some link joins two different ops
    multi = np.bincount(runs.run_of_link, weights=(kop[a[lp]] != kop[b[lp]]), minlength=len(runs)) > 0
    totals = _run_totals(trace, roof, runs, pairs, bw, per_launch_ns)
    keep = np.nonzero(multi)[0]
    if not len(keep):
        return []
    first, group = unique_rows(_signatures(trace, kline, runs, keep))
    n_groups = len(first)
    g_of_run = np.full(len(runs), -1, dtype=np.int64)
    g_of_run[keep] = group
    sums = _group_sums(totals, keep, group, n_groups)
    row_group = g_of_run[runs.run]
    order = np.argsort(row_group, kind="stable")
    bounds = np.searchsorted(row_group[order], np.arange(n_groups + 1))
    first_rows = runs.rows[runs.offsets[keep]]
    pair_cols = (group.astype(np.int64), trace.gpu.window[first_rows].astype(np.int64))
    windows_of: dict[int, set[int]] = {}  # each group's windows, added in ascending order
    for g, w in zip(*(c[unique_rows(pair_cols)[0]].tolist() for c in pair_cols), strict=True):
        windows_of.setdefault(g, set()).add(w)

    chains: list[FusionChain] = []
    for g in range(n_groups):
        r = int(keep[first[g]])
        rr = runs.rows[runs.offsets[r] : runs.offsets[r] + runs.n_rows[r]].tolist()
        ops_seq = _distinct_in_a_row([int(o) for o in kop[rr]])
        chains.append(
            FusionChain(
                rows=rr,
                ops=ops_seq,
                op_names=[trace.name(int(trace.ops.name[o])) if o >= 0 else "" for o in ops_seq],
                line_ids=list(dict.fromkeys(int(kline[x]) for x in rr if kline[x] >= 0)),
                kernel_names=[trace.name(int(trace.gpu.name[x])) for x in rr],
                occurrences=int(sums["count"][g]),
                bytes_now=float(sums["bytes_now"][g]) if sums["all_known"][g] else None,
                bytes_saved=float(sums["saved"][g]),
                kernel_ns=float(sums["kernel_ns"][g]),
                saving_ns=float(sums["saving"][g]),
                all_rows=runs.rows[order[bounds[g] : bounds[g + 1]]],
                windows=windows_of.get(g, set()),
                chain_ops=[_chain_op(trace, o) for o in ops_seq],
            )
        )
    return sorted(chains, key=lambda c: -c.saving_ns)


def _distinct_in_a_row(values: list[int]) -> list[int]:
    """`values` with repeats of the previous value dropped: a chain's ops, each once per stretch of kernels."""
    return [v for i, v in enumerate(values) if i == 0 or v != values[i - 1]]


def _chain_op(trace: Trace, op: int) -> ChainOp:
    if op < 0:
        return ChainOp("")
    ops = trace.ops
    return ChainOp.parse(
        trace.name(int(ops.name[op])), trace.name(int(ops.shapes[op])), trace.name(int(ops.dtypes[op]))
    )
