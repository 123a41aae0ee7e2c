"""Fusion candidates: runs of memory-bound pointwise/reduction kernels that could be one kernel.

The article's example: `x.cos().cos()` reads x, writes a temporary, reads it back, writes y: 4 global memory
trips; fused it is 2 (read x, write y). A chain here::

    stream 7   [mul][add][tanh][mul]           [gemm]
    line        41   41   42    42
    op out->in   y=x*c -> y+x -> tanh(.) -> .*x

Two neighbouring kernels of one stream (nothing else runs between them on that stream) are linked when

1. both are memory- or overhead-bound kernels of pointwise, reduction, normalisation or copy ops;
   (fills and memsets of at most 1 MiB between them, such as a reduction zeroing its counters, are skipped);
2. they come from one op, or from the same line, lines at most 2 apart in one file, or one function;
3. data flows: the first op's output (shape and dtype; an in-place op's output is its self) equals one of the
   second op's tensor inputs. Shapes are all the profiler records, so a same-shaped unrelated tensor also
   passes: "as far as shapes allow". Ops without recorded shapes pass on the location rule alone.

A chain is a maximal run of links spanning at least two ops. Bytes moved now = the kernels' bytes (inputs +
outputs per op); fused, every linked intermediate is neither written nor re-read: saved = 2 x its size (an upper
bound: an intermediate that autograd saves for backward must still be written once). The saving per occurrence:

    saved_bytes / peak bandwidth  +  (kernels - 1) x measured per-launch gap

capped at the chain's own time (first start to last end) less the fused kernel's bytes / peak bandwidth.
Occurrences with the same kernels from the same lines (every step repeats them) are grouped into one chain.
"""

from __future__ import annotations

import re
from collections import Counter
from dataclasses import dataclass, field

import numpy as np

from analyzers.links import Links
from analyzers.model import NONE, GpuKind, Peaks, Trace
from analyzers.op_families import Family, base_name
from analyzers.opcost import OpCost
from analyzers.results import REGIME_CODES, Regime
from analyzers.roofline import Roofline

LINE_DISTANCE = 2
TRANSPARENT_BYTES = 1 << 20  # fills/memsets up to this size are skipped over
_FUSIBLE = {int(f) for f in (Family.POINTWISE, Family.REDUCTION, Family.NORM, Family.COPY)}
_ELEMENTWISE_NAME = re.compile(
    r"elementwise|reduce_kernel|triton_(poi|red|per)|batch_norm|layer_norm|softmax", re.I
)
_MEM, _OVH = REGIME_CODES[Regime.MEMORY], REGIME_CODES[Regime.OVERHEAD]


@dataclass
class FusionChain:
    """One fusable sequence of kernels, possibly repeated (`occurrences`) across steps and windows."""

    rows: list[int]  # gpu rows of the first occurrence, in stream order
    ops: list[int]  # op rows of the first occurrence
    op_names: list[str]
    line_ids: list[int]  # distinct lines, in order of first appearance
    kernel_names: list[str]
    occurrences: int = 1
    # totals over all occurrences
    bytes_now: float | None = None  # bytes the kernels move (inputs + outputs of each op)
    bytes_saved: float = 0.0  # intermediates written and re-read that a fused kernel would not move
    kernel_ns: float = 0.0  # GPU time of the kernels
    saving_ns: float = 0.0  # estimated time saved by fusing
    all_rows: list[int] = field(default_factory=list)
    windows: set[int] = field(default_factory=set)

    @property
    def bytes_fused(self) -> float | None:
        return None if self.bytes_now is None else self.bytes_now - self.bytes_saved

    @property
    def pattern(self) -> str | None:
        return named_pattern(self.op_names)


def named_pattern(op_names: list[str]) -> str | None:
    """A fused PyTorch op that does what the chain does, when the chain's ops say which."""
    count = Counter(base_name(n).rstrip("_") for n in op_names)
    if count["tanh"] and (count["pow"] or count["mul"] >= 3) and count["add"]:
        return "gelu_tanh"  # 0.5 * x * (1 + tanh(sqrt(2/pi) * (x + 0.044715 * x**3)))
    if count["erf"] and count["mul"]:
        return "gelu"  # 0.5 * x * (1 + erf(x / sqrt(2)))
    if count["rsqrt"] or (count["sqrt"] and count["div"]):
        if count["sub"] or count["var"] or count["var_mean"]:
            return "layer_norm"
        if count["mean"] or count["pow"]:
            return "rms_norm"
    if count["exp"] and count["sum"] and count["div"]:
        return "softmax"
    if count["sigmoid"] and count["mul"]:
        return "silu"
    return None


def _feeds(a: OpCost | None, b: OpCost | None) -> tuple[bool, float]:
    """(does a's output plausibly feed b?, bytes of the intermediate). Unknown shapes -> (True, 0)."""
    if a is None or b is None or a.output is None or not b.inputs:
        return True, 0.0
    out = a.output
    for t in b.inputs:
        if t is not None and t.shape == out.shape and t.dtype == out.dtype:
            return True, float(out.nbytes)
    return False, 0.0


def fusion_chains(
    trace: Trace, links: Links, roof: Roofline, peaks: Peaks, per_launch_ns: float | None
) -> list[FusionChain]:
    """All chains, grouped by (kernel names, lines), by total saving descending."""
    gpu = trace.gpu
    n = len(gpu)
    if n < 2:
        return []
    kop = links.kernel_op
    cost_idx = roof.op_costs.index
    costs = roof.op_costs.costs
    name_ok = trace.string_flags(_ELEMENTWISE_NAME.search)
    fam_ok = np.isin(roof.family, list(_FUSIBLE)) | ((roof.family < 0) & name_ok[np.maximum(gpu.name, 0)])
    cand = (gpu.kind == GpuKind.KERNEL) & np.isin(roof.regime, [_MEM, _OVH]) & fam_ok

    # small fills and memsets (zeroing a counter or workspace) neither join nor break a chain
    small = np.where(np.isfinite(roof.bytes), roof.bytes, 0.0) <= TRANSPARENT_BYTES
    transparent = ((roof.family == Family.FILL) | (gpu.kind == GpuKind.MEMSET)) & small
    seq = np.nonzero(~transparent)[0]
    key = gpu.window.astype(np.int64) << 32 | (gpu.stream.astype(np.int64) & 0xFFFFFFFF)
    order = seq[np.lexsort((gpu.start_ns[seq], key[seq]))]
    a, b = order[:-1], order[1:]
    pair = cand[a] & cand[b] & (key[a] == key[b])
    lines = trace.lines
    kline = links.kernel_line
    # the op whose cost (and so output) describes the kernel: the bytes op chosen by the roofline
    cop = roof.cost_op

    bw = peaks.bytes_per_s
    same_op = pair & (kop[a] >= 0) & (kop[a] == kop[b])
    # location: same line, lines <= LINE_DISTANCE apart in one file, or one function
    n_lines = len(lines)
    if n_lines:
        files = {f: i for i, f in enumerate(dict.fromkeys(ln.file for ln in lines))}
        funcs = {f: i for i, f in enumerate(dict.fromkeys((ln.file, ln.function) for ln in lines))}
        l_file = np.array([files[ln.file] for ln in lines] + [-1])
        l_func = np.array([funcs[(ln.file, ln.function)] for ln in lines] + [-2])
        l_num = np.array([ln.line for ln in lines] + [-(10**9)])
        la = np.where(kline[a] >= 0, kline[a], n_lines)
        lb = np.where(kline[b] >= 0, kline[b], n_lines)
        known = (la < n_lines) & (lb < n_lines)
        near = known & (
            (la == lb)
            | ((l_file[la] == l_file[lb]) & (np.abs(l_num[la] - l_num[lb]) <= LINE_DISTANCE))
            | (l_func[la] == l_func[lb])
        )
    else:
        near = np.zeros(len(a), dtype=bool)
    # data flow, decided once per distinct (cost of a, cost of b)
    ci = np.where(cop >= 0, cost_idx[np.maximum(cop, 0)], NONE) if len(cost_idx) else np.full(n, NONE)
    check = np.nonzero(pair & ~same_op & near)[0]
    link_bytes = np.zeros(len(a))
    linked = same_op.copy()
    if len(check):
        k = (ci[a[check]] + 1) * (len(costs) + 1) + (ci[b[check]] + 1)
        uniq, inv = np.unique(k, return_inverse=True)
        verdicts = [
            _feeds(costs[u // (len(costs) + 1) - 1] if u // (len(costs) + 1) else None,
                   costs[u % (len(costs) + 1) - 1] if u % (len(costs) + 1) else None)
            for u in uniq.tolist()
        ]  # fmt: skip
        ok = np.array([v[0] for v in verdicts])[inv]
        inter = np.array([v[1] for v in verdicts])[inv]
        linked[check[ok]] = True
        link_bytes[check[ok]] = 2.0 * inter[ok]  # written once, read once

    return _group_runs(trace, roof, kop, kline, a, b, linked, link_bytes, bw, per_launch_ns)


_P1, _P2 = np.uint64(0x9E3779B97F4A7C15), np.uint64(0xC2B2AE3D27D4EB4F)


def _group_runs(
    trace: Trace,
    roof: Roofline,
    kop: np.ndarray,
    kline: np.ndarray,
    a: np.ndarray,
    b: np.ndarray,
    linked: np.ndarray,
    link_bytes: np.ndarray,
    bw: float | None,
    per_launch_ns: float | None,
) -> list[FusionChain]:
    """Maximal runs of links -> chains; runs with the same kernel names on the same lines are one chain.

    Vectorised: a run of k links covers rows a[p], b[p..p+k-1]; run signatures are two 64-bit polynomial
    hashes of the (kernel name, line) sequence.
    """
    gpu = trace.gpu
    edges = np.diff(np.concatenate(([0], linked.astype(np.int8), [0])))
    starts = np.nonzero(edges == 1)[0]
    ends = np.nonzero(edges == -1)[0]  # exclusive
    if not len(starts):
        return []
    n_links = ends - starts
    link_pos = np.nonzero(linked)[0]
    run_of_link = np.repeat(np.arange(len(starts)), n_links)
    # at least two distinct ops: some link joins two different ops
    multi = (
        np.bincount(run_of_link, weights=(kop[a[link_pos]] != kop[b[link_pos]]), minlength=len(starts)) > 0
    )

    n_rows = n_links + 1
    offsets = np.concatenate(([0], np.cumsum(n_rows)[:-1]))
    total = int(n_rows.sum())
    rows = np.empty(total, dtype=np.int64)
    is_first = np.zeros(total, dtype=bool)
    is_first[offsets] = True
    rows[offsets] = a[starts]
    rows[~is_first] = b[link_pos]
    run = np.repeat(np.arange(len(starts)), n_rows)
    pos = np.arange(total) - offsets[run]

    saved = np.bincount(run_of_link, weights=link_bytes[link_pos], minlength=len(starts))
    kb = roof.bytes[rows]
    known = np.isfinite(kb)
    bytes_now = np.bincount(run, weights=np.where(known, kb, 0.0), minlength=len(starts))
    bytes_known = np.bincount(run, weights=known, minlength=len(starts)) > 0
    saved = np.where(bytes_known, np.minimum(saved, bytes_now), saved)
    kernel_ns = np.bincount(run, weights=gpu.dur_ns[rows], minlength=len(starts))
    last = rows[offsets + n_rows - 1]
    wall = (gpu.start_ns[last] + gpu.dur_ns[last] - gpu.start_ns[rows[offsets]]).astype(np.float64)
    with np.errstate(divide="ignore", invalid="ignore"):
        rate = (
            np.full(len(starts), bw)
            if bw
            else np.where(kernel_ns > 0, bytes_now / (kernel_ns * 1e-9), np.nan)
        )
        ok_rate = np.isfinite(rate) & (rate > 0)
        saving = np.where(ok_rate, saved / rate * 1e9, 0.0) + n_links * (per_launch_ns or 0.0)
        floor = np.where(ok_rate & bytes_known, (bytes_now - saved) / rate * 1e9, 0.0)
    saving = np.maximum(0.0, np.minimum(saving, wall - floor))

    # signatures
    value = (gpu.name[rows].astype(np.uint64) << np.uint64(32)) ^ (kline[rows] + 1).astype(np.uint64)
    with np.errstate(over="ignore"):
        powers1 = np.cumprod(np.full(int(n_rows.max()), _P1, dtype=np.uint64))
        powers2 = np.cumprod(np.full(int(n_rows.max()), _P2, dtype=np.uint64))
        h1 = np.add.reduceat(value * powers1[pos], offsets)
        h2 = np.add.reduceat((value + np.uint64(1)) * powers2[pos], offsets)
    keep = np.nonzero(multi)[0]
    if not len(keep):
        return []
    sig = np.stack([n_rows[keep].astype(np.uint64), h1[keep], h2[keep]], axis=1)
    _, first, group = np.unique(sig, axis=0, return_index=True, return_inverse=True)
    group = group.reshape(-1)
    n_groups = len(first)
    g_of_run = np.full(len(starts), -1, dtype=np.int64)
    g_of_run[keep] = group
    sums = {
        name: np.bincount(group, weights=arr[keep], minlength=n_groups)
        for name, arr in (
            ("bytes_now", bytes_now),
            ("saved", saved),
            ("kernel_ns", kernel_ns),
            ("saving", saving),
        )
    }
    all_known = np.bincount(group, weights=~bytes_known[keep], minlength=n_groups) == 0
    counts = np.bincount(group, minlength=n_groups)
    row_group = g_of_run[run]
    order = np.argsort(row_group, kind="stable")
    bounds = np.searchsorted(row_group[order], np.arange(n_groups + 1))
    win_pairs = np.unique(np.stack([group, gpu.window[rows[offsets[keep]]].astype(np.int64)], axis=1), axis=0)

    chains: list[FusionChain] = []
    for g in range(n_groups):
        r = int(keep[first[g]])
        rr = rows[offsets[r] : offsets[r] + n_rows[r]].tolist()
        ops_seq = [int(o) for o in kop[rr]]
        ops_seq = [o for i, o in enumerate(ops_seq) if i == 0 or o != ops_seq[i - 1]]
        chains.append(
            FusionChain(
                rows=rr,
                ops=ops_seq,
                op_names=[trace.name(int(trace.ops.name[o])) if o >= 0 else "" for o in ops_seq],
                line_ids=list(dict.fromkeys(int(kline[x]) for x in rr if kline[x] >= 0)),
                kernel_names=[trace.name(int(gpu.name[x])) for x in rr],
                occurrences=int(counts[g]),
                bytes_now=float(sums["bytes_now"][g]) if all_known[g] else None,
                bytes_saved=float(sums["saved"][g]),
                kernel_ns=float(sums["kernel_ns"][g]),
                saving_ns=float(sums["saving"][g]),
                all_rows=rows[order[bounds[g] : bounds[g + 1]]].tolist(),
                windows={int(w) for w in win_pairs[win_pairs[:, 0] == g, 1].tolist()},
            )
        )
    return sorted(chains, key=lambda c: -c.saving_ns)
