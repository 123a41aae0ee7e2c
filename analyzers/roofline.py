"""FLOPs, bytes and the roofline verdict of every GPU row.

Where a kernel's cost comes from::

    op   aten::conv2d                 (profiler-recorded flops, when `with_flops`)
    op     aten::cudnn_convolution    <- nearest op with a cost: shapes + dtypes -> FLOPs, bytes (opcost.py)
    launch   cudaLaunchKernel ...
    GPU            [init_workspace][ sm90_xmma_fprop .............. ]   <- the op's cost split by duration

A kernel takes the cost of the nearest op at or above its launching op that has one (so the bias `add_` inside
`linear` costs its own bytes, not the matmul's). When that op launched several kernels, its FLOPs and bytes are
split among them in proportion to duration: the op's intensity is shared by all of them, and helper kernels
(workspace init, split-K reduce) get a small share because they are short. A profiler-recorded `flops` on the
op itself, or on an ancestor of the same family (`aten::conv2d` above `cudnn_convolution`, which knows stride
and padding), wins over our formula. Memcpy/memset rows use their own `bytes` (device-to-device copies count
read + write).

Which roof applies (tensor cores or not) is not recorded; the rule, per kernel:

- matmul-family op (mm, conv, attention) with bf16/fp16/fp8 operands: tensor cores (bf16 roof);
- fp32 operands: TF32 tensor cores (half the bf16 roof) when the kernel name says so (`tf32`, `s1688`, `s16816`,
  `wgmma`, `hmma`, `tensorop`, `nvjet`, `bf16`/`f16`), otherwise the SIMT fp32 roof (`sgemm`, `f32f32_f32f32`);
- no linked op: the same name hints; pointwise/reduction kernels use the SIMT fp32 roof.

The verdict, per kernel (the article's three regimes)::

    dur <= 5 us and achieved < 5 % of both roofs (or unknown)       -> OVERHEAD (launch-bound: the GPU finishes
                                                                        before the CPU can issue the next one)
    FLOPs/byte >= ridge = unit peak FLOP/s / peak bytes/s             -> COMPUTE
    FLOPs/byte <  ridge                                               -> MEMORY
    intensity unknown: matmul/conv/attention op or GEMM-like name     -> COMPUTE, else MEMORY
    host<->device memcpy (PCIe, not HBM)                              -> OVERHEAD

`roof_fraction` = max(achieved FLOP/s / unit peak, achieved bytes/s / peak bandwidth), which equals achieved /
min(peak, intensity x bandwidth), the roof at the kernel's intensity.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

import numpy as np

from analyzers.links import Links
from analyzers.model import NONE, GpuKind, Peaks, Trace, flag_of
from analyzers.op_families import MATMUL_FAMILIES, Family
from analyzers.opcost import OpCost, op_cost, parse_args
from analyzers.results import REGIME_CODES, KernelStat, Regime

SHORT_NS = 5_000  # kernels at most this long ...
TINY_ROOF_FRACTION = 0.05  # ... reaching under this share of both roofs are launch-bound (OVERHEAD)
MAX_DEPTH = 12  # op nesting levels searched above a kernel's launching op
TF32_OVER_BF16 = 0.5  # TF32 dense rate / bf16 dense rate (A100, H100, Ada)

COMPUTE, MEMORY, OVERHEAD = (REGIME_CODES[r] for r in (Regime.COMPUTE, Regime.MEMORY, Regime.OVERHEAD))

_TC_NAME = re.compile(
    r"tf32|s1688|s16816|s884|wgmma|hmma|tensorop|nvjet|bf16|f16|h1688|h16816|h884|e4m3|e5m2|fp8"
)
_SIMT_NAME = re.compile(r"sgemm|f32f32_f32f32|dgemm")
_GEMM_NAME = re.compile(
    r"gemm|xmma|nvjet|cutlass|wgmma|conv|fprop|dgrad|wgrad|implicit|fmha|flash|attention|attn|cudnn", re.I
)
_HELPER_NAME = re.compile(
    r"splitkreduce|init_device_workspace|addpadding|memset|nchwtonhwc|nhwctonchw|convert", re.I
)
_LOW_PRECISION_NAME = re.compile(r"bf16|f16|e4m3|e5m2|fp8|h1688|h16816|h884|hmma")
_HOST_COPY = ("HtoD", "DtoH", "HtoH", "Pageable", "Pinned")


@dataclass
class OpCosts:
    """Per op row: an index into `costs` (NONE for ops never costed) and the unique costs themselves."""

    index: np.ndarray
    costs: list[OpCost]

    def of(self, op: int) -> OpCost | None:
        i = int(self.index[op]) if op >= 0 else NONE
        return self.costs[i] if i >= 0 else None


@dataclass
class Roofline:
    """Per gpu row columns (float64 NaN / int8 -1 where unknown)."""

    flops: np.ndarray
    bytes: np.ndarray
    regime: np.ndarray  # int8 REGIME_CODES
    tensor_cores: np.ndarray  # int8: 1 tensor cores, 0 SIMT, -1 unknown
    unit_peak_flops_per_s: np.ndarray  # the FLOP roof that applies (NaN unknown)
    achieved_flops_per_s: np.ndarray
    achieved_bytes_per_s: np.ndarray
    roof_fraction: np.ndarray
    fits_in_l2: np.ndarray  # int8: 1/0/-1
    family: np.ndarray  # int8 op_families.Family of the costed op (-1: none)
    cost_op: np.ndarray  # op row whose cost was split onto the row (NONE)
    host_copy: np.ndarray  # bool: memcpy to or from the host
    op_costs: OpCosts


def _lower_flags(trace: Trace, pattern: re.Pattern[str]) -> np.ndarray:
    return trace.string_flags(lambda s: pattern.search(s.lower()))


def _ancestors(links: Links, start: np.ndarray) -> np.ndarray:
    """(MAX_DEPTH+1, n) op rows: the op itself, its parent, ... (NONE past the root)."""
    chain = np.full((MAX_DEPTH + 1, len(start)), NONE, dtype=np.int64)
    cur = start.astype(np.int64)
    for d in range(MAX_DEPTH + 1):
        chain[d] = cur
        ok = cur >= 0
        if not ok.any():
            break
        nxt = np.full_like(cur, NONE)
        nxt[ok] = links.op_parent[cur[ok]]
        cur = nxt
    return chain


def _unique_keys(*cols: np.ndarray) -> np.ndarray:
    """Dense ids (0..k-1) of the distinct tuples of non-negative-or-NONE int columns."""
    key = np.zeros(len(cols[0]), dtype=np.int64)
    for col in cols:
        c = col.astype(np.int64) + 1  # NONE -> 0
        width = int(c.max()) + 1 if len(c) else 1
        if int(key.max() if len(key) else 0) * width + width >= 2**62:
            key = np.unique(key, return_inverse=True)[1].astype(np.int64)  # re-densify before packing
        key = key * width + c
    return np.unique(key, return_inverse=True)[1].astype(np.int64).reshape(-1)


def conv_output_hints(trace: Trace, rows: np.ndarray, costs: dict[int, OpCost]) -> dict[int, tuple[int, ...]]:
    """Output spatial size of forward convolutions, read from the op that consumes the output.

    Stride and padding are not recorded (no `Concrete Inputs` in the model), but the next op on the same
    thread (batch_norm, relu, add) usually takes the output as its first tensor: [N, C_out, *spatial].
    """
    ops = trace.ops
    if not len(rows):
        return {}
    order = np.lexsort((ops.start_ns, ops.tid))
    pos = np.empty(len(order), dtype=np.int64)
    pos[order] = np.arange(len(order))
    hints: dict[int, tuple[int, ...]] = {}
    for r in rows.tolist():
        cost = costs[r]
        ts = [a for a in cost.inputs if a is not None]
        if len(ts) < 2 or len(ts[0].shape) < 3:
            continue
        n, c_out, rank = ts[0].shape[0], ts[1].shape[0], len(ts[0].shape)
        end = int(ops.start_ns[r] + ops.dur_ns[r])
        tid = int(ops.tid[r])
        p = int(pos[r]) + 1
        seen = 0
        while p < len(order) and seen < 8:
            o = int(order[p])
            p += 1
            if int(ops.tid[o]) != tid:
                break
            if int(ops.start_ns[o]) < end:
                continue
            seen += 1
            args = parse_args(trace.name(int(ops.shapes[o])), trace.name(int(ops.dtypes[o])))
            first = next((a for a in (args or []) if a is not None), None)
            if first is not None and len(first.shape) == rank and first.shape[:2] == (n, c_out):
                hints[r] = tuple(first.shape[2:])
                break
    return hints


def conv_backward_mask(names: list[str]) -> tuple[bool, bool]:
    """Which gradients a convolution_backward computed, from the names of the kernels it launched.

    cuDNN names them (`dgrad`: grad input, `wgrad`: grad weight); GEMM-lowered 1x1 convolutions do not. Without
    tags, two or more GEMM kernels mean both gradients; one means only the weight's (the first layer, whose
    input needs no gradient).
    """
    low = [n.lower() for n in names]
    d = sum("dgrad" in n for n in low)
    w = sum("wgrad" in n for n in low)
    g = sum(
        1
        for n in low
        if _GEMM_NAME.search(n) and not _HELPER_NAME.search(n) and "dgrad" not in n and "wgrad" not in n
    )
    if d or w:
        return (bool(d) or (bool(w) and g > 0), bool(w) or (bool(d) and g > 0))
    return (g >= 2, True)


def cost_ops(trace: Trace, links: Links) -> tuple[OpCosts, np.ndarray, np.ndarray]:
    """Cost the ops that launch kernels (or enclose ops that do); choose, per gpu row, the op whose cost it
    takes. Returns (op costs, flops op per row, bytes op per row)."""
    gpu, ops = trace.gpu, trace.ops
    index = np.full(len(ops), NONE, dtype=np.int64)
    costs: list[OpCost] = []
    n = len(gpu)
    if not len(ops) or not n:
        return OpCosts(index, costs), np.full(n, NONE, np.int64), np.full(n, NONE, np.int64)

    is_kernel = gpu.kind == GpuKind.KERNEL
    chain = _ancestors(links, np.where(is_kernel, links.kernel_op, NONE))
    mark = np.zeros(len(ops), dtype=bool)
    mark[chain[chain >= 0]] = True
    cand = np.nonzero(mark)[0]

    # cost each distinct (name, shapes, dtypes) once
    keys = _unique_keys(ops.name[cand], ops.shapes[cand], ops.dtypes[cand])
    first = np.unique(keys, return_index=True)[1]
    per_key: list[OpCost] = []
    for r in cand[first].tolist():
        name = trace.name(int(ops.name[r]))
        args = parse_args(trace.name(int(ops.shapes[r])), trace.name(int(ops.dtypes[r])))
        per_key.append(op_cost(name, args))
    costs = per_key
    index[cand] = keys

    # forward convolutions: redo with the output size read from the consumer op
    key_family = np.array([int(c.family) for c in costs], dtype=np.int8)
    conv_rows = cand[key_family[index[cand]] == Family.CONV]
    by_row = {r: costs[index[r]] for r in conv_rows.tolist()}
    hints = conv_output_hints(trace, conv_rows, by_row)
    variants: dict[tuple[int, tuple[int, ...]], int] = {}
    for r, hint in hints.items():
        key = (int(index[r]), hint)
        if key not in variants:
            c = by_row[r]
            name = trace.name(int(ops.name[r]))
            costs.append(op_cost(name, list(c.inputs), out_spatial_hint=hint))
            variants[key] = len(costs) - 1
        index[r] = variants[key]

    flops_known = np.array([c.flops is not None for c in costs] + [False], dtype=bool)
    bytes_known = np.array([c.bytes is not None for c in costs] + [False], dtype=bool)
    recorded = np.isfinite(ops.flops)

    def nearest(known: np.ndarray, use_recorded: bool) -> np.ndarray:
        chosen = np.full(n, NONE, dtype=np.int64)
        for d in range(chain.shape[0]):
            row = chain[d]
            ok = (row >= 0) & (chosen < 0)
            if not ok.any():
                continue
            safe = np.where(ok, row, 0)
            ci = index[safe]
            hit = ok & (ci >= 0) & known[ci]
            if use_recorded:
                hit |= ok & recorded[safe]
            chosen[hit] = row[hit]
        return chosen

    flops_op = nearest(flops_known, True)
    bytes_op = nearest(bytes_known, False)

    # convolution_backward: which gradients, from its kernels' names
    fam = np.full(len(ops), -1, dtype=np.int8)
    fam[cand] = np.array([int(c.family) for c in costs], dtype=np.int8)[index[cand]]
    bwd_kernels = np.nonzero((flops_op >= 0) & (fam[np.maximum(flops_op, 0)] == Family.CONV_BACKWARD))[0]
    if len(bwd_kernels):
        names: dict[int, list[str]] = {}
        for k, o in zip(bwd_kernels.tolist(), flops_op[bwd_kernels].tolist(), strict=True):
            names.setdefault(o, []).append(trace.name(int(gpu.name[k])))
        masked: dict[tuple[int, tuple[bool, bool]], int] = {}
        for o, kernel_names in names.items():
            mask = conv_backward_mask(kernel_names)
            if mask == (True, True):
                continue
            key2 = (int(index[o]), mask)
            if key2 not in masked:
                c = costs[index[o]]
                costs.append(op_cost(trace.name(int(ops.name[o])), list(c.inputs), conv_backward_mask=mask))
                masked[key2] = len(costs) - 1
            index[o] = masked[key2]
    return OpCosts(index, costs), flops_op, bytes_op


def _recorded_flops(trace: Trace, links: Links, op: np.ndarray, fam: np.ndarray) -> np.ndarray:
    """Profiler-recorded FLOPs of `op` or of its nearest ancestor of the same family (NaN when none)."""
    ops = trace.ops
    out = np.full(len(op), np.nan)
    own = np.where(op >= 0, fam[np.maximum(op, 0)], -1)
    cur = op.copy()
    for _ in range(4):
        ok = (cur >= 0) & np.isnan(out)
        if not ok.any():
            break
        rec = np.where(ok, ops.flops[np.maximum(cur, 0)], np.nan)
        same = fam[np.maximum(cur, 0)] == own
        take = ok & np.isfinite(rec) & (same | (cur == op))
        out[take] = rec[take]
        nxt = np.full_like(cur, NONE)
        nxt[ok] = links.op_parent[cur[ok]]
        cur = nxt
    return out


def _split(value: np.ndarray, owner: np.ndarray, dur: np.ndarray, n_ops: int) -> np.ndarray:
    """Share value[owner] among rows with the same owner, in proportion to duration (equally if all are 0)."""
    out = np.full(len(owner), np.nan)
    ok = owner >= 0
    if not ok.any():
        return out
    o = owner[ok]
    d = dur[ok].astype(np.float64)
    tot = np.bincount(o, weights=d, minlength=n_ops)
    cnt = np.bincount(o, minlength=n_ops).astype(np.float64)
    share = np.where(tot[o] > 0, d / np.where(tot[o] > 0, tot[o], 1.0), 1.0 / cnt[o])
    out[ok] = value[ok] * share
    return out


def roofline(trace: Trace, links: Links, peaks: Peaks) -> Roofline:
    gpu, ops = trace.gpu, trace.ops
    n = len(gpu)
    dur = gpu.dur_ns.astype(np.float64)
    kind = gpu.kind
    op_costs, flops_op, bytes_op = cost_ops(trace, links)
    costs, index = op_costs.costs, op_costs.index

    c_flops = np.array([np.nan if c.flops is None else c.flops for c in costs] + [np.nan])
    c_bytes = np.array([np.nan if c.bytes is None else c.bytes for c in costs] + [np.nan])
    c_fam = np.array([int(c.family) for c in costs] + [-1], dtype=np.int8)
    c_low = np.array([-1 if c.low_precision is None else int(c.low_precision) for c in costs] + [-1], np.int8)

    def per_op(table: np.ndarray, op: np.ndarray) -> np.ndarray:
        ci = np.where(op >= 0, index[np.maximum(op, 0)], NONE) if len(index) else np.full(len(op), NONE)
        return table[np.where(ci >= 0, ci, len(table) - 1)]

    op_fam_all = np.full(len(ops), -1, dtype=np.int8)
    has = index >= 0
    op_fam_all[has] = c_fam[index[has]]
    fam_of_flops_op = np.where(flops_op >= 0, op_fam_all[np.maximum(flops_op, 0)] if len(ops) else -1, -1)
    rec = _recorded_flops(trace, links, flops_op, op_fam_all) if len(ops) else np.full(n, np.nan)
    op_flops = np.where(np.isfinite(rec), rec, per_op(c_flops, flops_op))
    op_bytes = per_op(c_bytes, bytes_op)
    family = np.where(flops_op >= 0, fam_of_flops_op, per_op(c_fam, bytes_op)).astype(np.int8)
    low = per_op(c_low, np.where(flops_op >= 0, flops_op, bytes_op))

    flops = _split(op_flops, flops_op, gpu.dur_ns, len(ops))
    nbytes = _split(op_bytes, bytes_op, gpu.dur_ns, len(ops))

    # memcpy / memset: their own byte counts
    host_flag = trace.string_flags(lambda s: any(h in s for h in _HOST_COPY))
    is_copy = kind == GpuKind.MEMCPY
    host_copy = is_copy & flag_of(host_flag, gpu.name)
    known_b = gpu.bytes >= 0
    mem_rows = (kind != GpuKind.KERNEL) & known_b
    factor = np.where(is_copy & ~host_copy, 2.0, 1.0)  # device-to-device copies read and write
    nbytes[mem_rows] = gpu.bytes[mem_rows] * factor[mem_rows]
    flops[kind != GpuKind.KERNEL] = 0.0
    family[kind != GpuKind.KERNEL] = Family.COPY

    # working set of the whole op vs L2
    fits = np.full(n, -1, dtype=np.int8)
    if peaks.l2_bytes:
        work = np.where(kind == GpuKind.KERNEL, op_bytes, nbytes)
        ok = np.isfinite(work)
        fits[ok] = (work[ok] <= peaks.l2_bytes).astype(np.int8)

    # tensor cores
    is_mm = np.isin(family, [int(f) for f in MATMUL_FAMILIES])
    tc_name = _lower_flags(trace, _TC_NAME)
    simt_name = _lower_flags(trace, _SIMT_NAME)
    gemm_name = trace.string_flags(_GEMM_NAME.search)
    k_tc, k_simt, k_gemm = (
        flag_of(tc_name, gpu.name),
        flag_of(simt_name, gpu.name),
        flag_of(gemm_name, gpu.name),
    )
    tensor_cores = np.full(n, -1, dtype=np.int8)
    tensor_cores[~is_mm & (family >= 0)] = 0
    tensor_cores[kind != GpuKind.KERNEL] = 0
    tensor_cores[is_mm & (low == 1)] = 1
    fp32_mm = is_mm & (low == 0)
    tensor_cores[fp32_mm] = (k_tc[fp32_mm] & ~k_simt[fp32_mm]).astype(np.int8)
    unknown = (tensor_cores < 0) & k_gemm
    tensor_cores[unknown] = (k_tc[unknown] & ~k_simt[unknown]).astype(np.int8)
    tensor_cores[(tensor_cores < 0) & ~k_gemm & (kind == GpuKind.KERNEL)] = 0
    k_low = flag_of(_lower_flags(trace, _LOW_PRECISION_NAME), gpu.name)
    tf32 = (tensor_cores == 1) & (low != 1) & ~((low == -1) & k_low)

    tensor_peak = np.nan if peaks.tensor_flops_per_s is None else peaks.tensor_flops_per_s
    fp32_peak = np.nan if peaks.fp32_flops_per_s is None else peaks.fp32_flops_per_s
    bw = np.nan if peaks.bytes_per_s is None else peaks.bytes_per_s
    unit_peak = np.where(tensor_cores == 1, tensor_peak * np.where(tf32, TF32_OVER_BF16, 1.0), fp32_peak)

    with np.errstate(divide="ignore", invalid="ignore"):
        secs = np.where(dur > 0, dur * 1e-9, np.nan)
        ach_f = flops / secs
        ach_b = nbytes / secs
        frac = np.fmax(ach_f / unit_peak, ach_b / bw)
        intensity = flops / nbytes
        ridge = unit_peak / bw

    regime = np.full(n, MEMORY, dtype=np.int8)
    by_ai = np.isfinite(intensity) & np.isfinite(ridge)
    regime[by_ai & (intensity >= ridge)] = COMPUTE
    guess = ~by_ai & (is_mm | k_gemm) & (kind == GpuKind.KERNEL)
    regime[guess] = COMPUTE
    short = (gpu.dur_ns <= SHORT_NS) & ~(frac >= TINY_ROOF_FRACTION)
    regime[short] = OVERHEAD
    regime[host_copy] = OVERHEAD

    cost_op = np.where(flops_op >= 0, flops_op, bytes_op)
    return Roofline(
        flops=flops,
        bytes=nbytes,
        regime=regime,
        tensor_cores=tensor_cores,
        unit_peak_flops_per_s=unit_peak,
        achieved_flops_per_s=ach_f,
        achieved_bytes_per_s=ach_b,
        roof_fraction=frac,
        fits_in_l2=fits,
        family=family,
        cost_op=cost_op,
        host_copy=host_copy,
        op_costs=op_costs,
    )


def kernel_stats(trace: Trace, roof: Roofline, rows: np.ndarray | None = None) -> list[KernelStat]:
    """One KernelStat per kernel name, by GPU time descending.

    The name's regime is the one holding most of its time; achieved rates are total FLOPs (bytes) over the
    time of the calls whose FLOPs (bytes) are known; tensor cores / L2 by majority of time.
    """
    gpu = trace.gpu
    idx = np.arange(len(gpu)) if rows is None else rows
    if not len(idx):
        return []
    names = gpu.name[idx]
    uniq, inv = np.unique(names, return_inverse=True)
    m = len(uniq)
    dur = gpu.dur_ns[idx].astype(np.float64)
    calls = np.bincount(inv, minlength=m)
    gpu_ns = np.bincount(inv, weights=dur, minlength=m)
    by_regime = np.stack(
        [
            np.bincount(inv, weights=dur * (roof.regime[idx] == c), minlength=m)
            for c in (COMPUTE, MEMORY, OVERHEAD)
        ]
    )
    # a name whose calls all take 0 ns still gets its calls' majority regime
    by_count = np.stack(
        [np.bincount(inv, weights=(roof.regime[idx] == c), minlength=m) for c in (COMPUTE, MEMORY, OVERHEAD)]
    )
    dom = np.where(by_regime.sum(axis=0) > 0, by_regime.argmax(axis=0), by_count.argmax(axis=0))

    def known_sum(values: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        ok = np.isfinite(values)
        total = np.bincount(inv, weights=np.where(ok, values, 0.0), minlength=m)
        t = np.bincount(inv, weights=np.where(ok, dur, 0.0), minlength=m)
        cnt = np.bincount(inv, weights=ok.astype(np.float64), minlength=m)
        return total, t, cnt

    f_tot, f_t, f_cnt = known_sum(roof.flops[idx])
    b_tot, b_t, b_cnt = known_sum(roof.bytes[idx])
    frac_num = np.bincount(
        inv,
        weights=np.where(np.isfinite(roof.roof_fraction[idx]), roof.roof_fraction[idx] * dur, 0.0),
        minlength=m,
    )
    frac_t = np.bincount(inv, weights=np.where(np.isfinite(roof.roof_fraction[idx]), dur, 0.0), minlength=m)
    tc_yes = np.bincount(inv, weights=(dur + 1.0) * (roof.tensor_cores[idx] == 1), minlength=m)
    tc_no = np.bincount(inv, weights=(dur + 1.0) * (roof.tensor_cores[idx] == 0), minlength=m)
    l2_yes = np.bincount(inv, weights=(dur + 1.0) * (roof.fits_in_l2[idx] == 1), minlength=m)
    l2_no = np.bincount(inv, weights=(dur + 1.0) * (roof.fits_in_l2[idx] == 0), minlength=m)
    stats: list[KernelStat] = []
    for j in np.argsort(-gpu_ns, kind="stable").tolist():
        stats.append(
            KernelStat(
                name=trace.name(int(uniq[j])),
                calls=int(calls[j]),
                gpu_ns=int(gpu_ns[j]),
                regime=(Regime.COMPUTE, Regime.MEMORY, Regime.OVERHEAD)[int(dom[j])],
                flops=float(f_tot[j]) if f_cnt[j] else None,
                bytes=float(b_tot[j]) if b_cnt[j] else None,
                achieved_flops_per_s=float(f_tot[j] / (f_t[j] * 1e-9)) if f_cnt[j] and f_t[j] > 0 else None,
                achieved_bytes_per_s=float(b_tot[j] / (b_t[j] * 1e-9)) if b_cnt[j] and b_t[j] > 0 else None,
                roof_fraction=float(frac_num[j] / frac_t[j]) if frac_t[j] > 0 else None,
                uses_tensor_cores=None if tc_yes[j] == tc_no[j] == 0 else bool(tc_yes[j] > tc_no[j]),
                fits_in_l2=None if l2_yes[j] == l2_no[j] == 0 else bool(l2_yes[j] > l2_no[j]),
            )
        )
    return stats
