"""Findings for matmul and convolution kernels that are compute-class yet well below their roof: why, from the op's
shapes and dtypes and the kernel's name and launch (cost/gemm_shapes.py), and what to change.

Which kernels: GPU kernels of a matmul/conv op (attention's are below) on tensor cores, at under
BELOW_ROOF of the roof at their intensity (cost/roofline.py's roof_fraction), helper kernels (layout conversions,
split-K reductions, workspace fills) left out. fp32 matmuls on the SIMT units are `no_tensor_cores`
findings (findings/finders.py): their roof is the fp32 one, and the fix (TF32) is that finding's.

The saving assumes the fixed kernel reaches the *reference fraction*: the duration-weighted median roof
fraction of this run's matmul/conv kernels that have no diagnosed cause (clamped to BELOW_ROOF..1; DEFAULT_TARGET
when fewer than MIN_REFERENCE of them ran). A measured rate of the same GPU, library and profiler on this run's
own GEMMs, rather than a datasheet figure no kernel reaches. Padding adds work (3 channels padded to 8 do 8/3
of the FLOPs; a vocabulary of 50257 padded to 50304, 1.0009), so the padded kernel's FLOPs are used::

    kernel at 12 % of the roof          [==========================================]  13.4 ms
    padded FLOPs at the run's 88 %      [======]                                        1.8 ms
                            saving = dur x (1 - fraction x padded work / reference), at least 0

A 16-bit convolution whose channels the library pads itself (`_library_padding`: cuDNN's padding kernels, or
its NCHW->NHWC conversion) already runs that padded work at its rate, so padding once saves the padding kernels
and nothing of the convolution's shortfall: on an H100's ResNet-18 stem 0.225 ms predicted this way, 0.21 ms
measured, against 0.56 ms from the padded-work formula above.

| kind        | trigger (per kernel, grouped by cause and offending value)        | action                           |
|-------------|-------------------------------------------------------------------|----------------------------------|
| slow_gemm   | align: M, N, K (conv C_in/C_out) not a multiple of 16 bytes       | pad to a multiple of 64          |
| slow_gemm   | narrow: aligned shapes on narrow loads (a view's stride or start) | .contiguous(), aligned slices    |
| slow_gemm   | no cause found, >= UNKNOWN_MIN_SHARE of the step under BELOW_ROOF | "cause unknown", the evidence    |
| slow_gemm   | tiny M or N, small grid, split-K, partial tiles, pre-Hopper kernel| bigger or batched matmuls        |
| slow_gemm   | transposed: a TF32/fp8 GEMM on Hopper with an MN-major operand    | .contiguous(), weight (out, in)  |
| slow_gemm   | attention: fp32, an explicit mask, a head_dim padded to the flash | bf16 autocast, is_causal=True,   |
|             | or cuDNN kernel's, little work per call, efficient where flash    | a kernel head_dim, ...           |
|             | runs, math fallback                                               |                                  |
| conv_layout | cuDNN nchwToNhwc / nhwcToNchw kernels around NCHW convolutions    | model and inputs channels_last   |

The GEMMs of a library recurrent op (cause `recurrent`: one GEMM per time step and layer with M = batch) are
held to no reference: the sequential steps are the cure's limit, not a rate this run shows. Their saving is
what half precision gives at most: cuDNN's RNN under torch.autocast runs in fp16, whose tensor-core roof is
twice TF32's and whose weights, read again at every step, are half the bytes, so a GEMM bound by either takes
at most RECURRENT_SAVING less (one bound by launch latency and the steps' dependency, less than that). On
operands already 2 bytes wide there is no such gain and no saving is claimed; a larger batch lowers the time
per sample, not per step.

A kernel with no cause found makes a "cause unknown" finding only beside MIN_REFERENCE calls of this run's
undiagnosed matmuls at BELOW_ROOF or better: they show what this GPU and library reach on such work, so the
saving is a measured one; a run whose every matmul runs low gives no evidence that one of them could do better.

Attention kernels (SDPA's flash, memory-efficient and cuDNN kernels, the `flash_attn` package's; and the
matmul, softmax and matmul kernels of SDPA's math fallback, `math_attention_rows`) are diagnosed from their op's
name, recorded q, k, v, attn_mask and is_causal (cost/attention_cost.py `diagnose_attention`), grouped by cause
and call shape, and make a finding when a group holds UNKNOWN_MIN_SHARE of the step. A fused kernel counts
when under BELOW_ROOF; the cure is held to ATTENTION_TARGET of the roof unless MIN_REFERENCE of this run's own
attention kernels with no cause reach BELOW_ROOF or better (then their reference_fraction): FlashAttention-2
reaches about 35 % of an H100's bf16 roof and FlashAttention-3 75 % (the FlashAttention-3 paper's figures),
so half the roof is what a fused kernel is held to without the run's own evidence. The predicted time after
the cure, per cause: fp32 -> the kernel's FLOPs in bf16 at the target of the 16-bit roof; head_dim -> the
kernel's own time on the useful columns only (head_dim / the kernel's: flash's next built head dim, or the
head dim of the cuDNN kernel's tile read from its name); math fallback -> one fused call's FLOPs
(forward, and backward where the fallback's backward kernels ran; causal share when is_causal was recorded) at
the target of the 16-bit roof; every other cause -> the kernel at the target. A "cause unknown" attention
finding needs the same evidence as a GEMM's: MIN_REFERENCE of this run's undiagnosed attention kernels at
BELOW_ROOF or better. These kernels are left out of the matmul findings above and of no_tensor_cores (TF32
does not reach SDPA's fused kernels; their cure is bf16).

conv_layout saves the conversion kernels' time (in channels_last they do not run) plus the shortfall, to the
reference, of the convolutions that ran as pre-Hopper GEMM kernels (a 1x1 convolution on NCHW is a GEMM whose
leading dimension is H x W; on NHWC it is C).
"""

from __future__ import annotations

import json
import re

import numpy as np

from analyzers.arrays import dense_ids, unique_inverse
from analyzers.cost.attention_cost import (
    MATH_OPS,
    AttentionDiagnosis,
    attention_shape,
    causal_fraction,
    cudnn_head_dim,
    diagnose_attention,
    is_causal,
    sdpa_backward_flops,
    sdpa_flops,
)
from analyzers.cost.gemm_shapes import Diagnosis, blocks_of, diagnose, padded_work, shape_text
from analyzers.cost.kernel_costs import HELPER_NAME, MAX_DEPTH, PAD_NAME
from analyzers.cost.op_families import Family, base_name
from analyzers.findings.context import MIN_SAVING_SHARE, Context, count_lines
from analyzers.findings.facts import (
    ConvFallback,
    ConvLayoutFacts,
    RateSpan,
    SlowAttentionFacts,
    SlowGemmFacts,
    UnknownGemmFacts,
)
from analyzers.results import Finding, FindingKind
from brrrtui.contract.model import GpuKind, SourceLine, flag_of

BELOW_ROOF = 0.5
DEFAULT_TARGET = 0.8
MIN_REFERENCE = 5
MAX_EFFICIENCY_FINDINGS = 6
UNKNOWN_MIN_SHARE = 0.05  # slow kernels with no cause found make a finding from this share of the step
RECURRENT_SAVING = 0.5  # of a recurrent op's GEMM time: fp16's roof is 2x TF32's, its bytes half fp32's
ATTENTION_TARGET = 0.5  # the roof fraction a fused attention kernel is held to without this run's own (doc)

_GEMM_FAMILIES = [int(Family.MATMUL), int(Family.CONV), int(Family.CONV_BACKWARD)]
_CONV_FAMILIES = [int(Family.CONV), int(Family.CONV_BACKWARD)]
_ATTENTION_FAMILIES = [int(Family.ATTENTION), int(Family.ATTENTION_BACKWARD)]
_LAYOUT = re.compile(r"nchwtonhwc|nhwctonchw", re.I)
_HELPER = re.compile(HELPER_NAME.pattern + r"|reduce_kernel|fill", re.I)
_HOPPER_NAME = re.compile(r"H100|H200|H800|GH200|B100|B200|GB200")


def _hopper(ctx: Context) -> bool:
    """sm90 or newer, where cutlass_75_/cutlass_80_ kernels are fallbacks."""
    cc, name = ctx.trace.device.compute_capability, ctx.trace.device.name or ""
    if cc:
        try:
            return int(cc.split(".")[0]) >= 9
        except ValueError:
            return False
    return bool(_HOPPER_NAME.search(name))


def candidates(ctx: Context) -> tuple[np.ndarray, np.ndarray]:
    """The gpu rows that are matmul/conv kernels on tensor cores with a known roof fraction, not helper
    kernels, in row order, and their roof fractions (worked out once, here)."""
    gpu, roof = ctx.trace.gpu, ctx.roof
    is_helper = flag_of(ctx.trace.string_flags(_HELPER.search), gpu.name)
    mask = (
        (gpu.kind == GpuKind.KERNEL)
        & np.isin(roof.family, _GEMM_FAMILIES)
        & (roof.tensor_cores == 1)
        & (roof.cost_op >= 0)
        & ~is_helper
        & (math_attention_rows(ctx) < 0)
    )
    rows = np.flatnonzero(mask)
    frac = roof.roof_fraction(rows)
    known = np.isfinite(frac)
    return rows[known], frac[known]


def diagnoses(ctx: Context, rows: np.ndarray) -> tuple[list[Diagnosis | None], np.ndarray]:
    """diagnose() once per distinct (op cost, kernel name, grid) of `rows`, from its first row: (the
    diagnoses, each row's index into them)."""
    trace, roof = ctx.trace, ctx.roof
    hopper, sms = _hopper(ctx), trace.device.num_sms
    op = roof.cost_op[rows]
    key = dense_ids(roof.op_costs.index[op].astype(np.int64) + 1)
    for col in (trace.gpu.name[rows], trace.gpu.grid[rows]):
        c = dense_ids(col.astype(np.int64))
        key = dense_ids(key * (int(c.max()) + 1) + c)
    first = np.unique(key, return_index=True)[1]
    out: list[Diagnosis | None] = []
    for r, o in zip(rows[first].tolist(), op[first].tolist(), strict=True):
        cost = roof.op_costs.of(o)
        out.append(
            None
            if cost is None
            else diagnose(
                trace.name(int(trace.ops.name[o])),
                int(roof.family[r]),
                cost.inputs,
                trace.name(int(trace.gpu.name[r])),
                blocks_of(trace.name(int(trace.gpu.grid[r]))),
                sms,
                hopper,
            )
        )
    return out, key


def _weighted_median(frac: np.ndarray, dur: np.ndarray) -> float:
    order = np.argsort(frac)
    cum = np.cumsum(dur[order].astype(np.float64))
    return float(frac[order][np.searchsorted(cum, cum[-1] / 2)])


def reference_fraction(frac: np.ndarray, dur: np.ndarray) -> float:
    """Duration-weighted median of `frac`, clamped to BELOW_ROOF..1; DEFAULT_TARGET for under MIN_REFERENCE."""
    if len(frac) < MIN_REFERENCE:
        return DEFAULT_TARGET
    return min(1.0, max(BELOW_ROOF, _weighted_median(np.asarray(frac), np.asarray(dur))))


def measured_reference(frac: np.ndarray, dur: np.ndarray) -> bool:
    """Whether reference_fraction(frac, dur) is a rate this run's matmuls reach: MIN_REFERENCE of them or
    more, their median not raised to BELOW_ROOF."""
    return len(frac) >= MIN_REFERENCE and _weighted_median(np.asarray(frac), np.asarray(dur)) >= BELOW_ROOF


def efficiency_findings(ctx: Context) -> list[Finding]:
    return _gemm_findings(ctx) + attention_kernel_findings(ctx)


def _gemm_findings(ctx: Context) -> list[Finding]:
    gpu, roof = ctx.trace.gpu, ctx.roof
    rows, frac = candidates(ctx)
    if not len(rows):
        return []
    diags, of_row = diagnoses(ctx, rows)
    plain = np.array([d is None for d in diags], dtype=bool)[of_row]
    target = reference_fraction(frac[plain], gpu.dur_ns[rows][plain])
    measured = measured_reference(frac[plain], gpu.dur_ns[rows][plain])
    slow = frac < BELOW_ROOF
    conv = np.isin(roof.family[rows], _CONV_FAMILIES)
    pairs, of_pair = unique_inverse(of_row * 2 + conv)  # (diagnosis, conv) per row
    pair_diag = [diags[p // 2] for p in pairs.tolist()]
    pair_conv = [bool(p % 2) for p in pairs.tolist()]
    work = np.array([padded_work(d, c) for d, c in zip(pair_diag, pair_conv, strict=True)])[of_pair]
    shortfall = np.where(slow, gpu.dur_ns[rows] * np.clip(1.0 - frac * work / target, 0.0, None), 0.0)
    # a recurrent op's GEMMs: fp16's gain at most on 4-byte operands, none on 2-byte ones (module doc)
    recurrent = np.array([d is not None and d.cause == "recurrent" for d in diags], dtype=bool)[of_row]
    gain = np.array([RECURRENT_SAVING if d is not None and d.align == 4 else 0.0 for d in diags])[of_row]
    shortfall[recurrent] = np.where(slow, gpu.dur_ns[rows] * gain, 0.0)[recurrent]
    layout_rows = _layout_rows(ctx)
    nchw = len(layout_rows) > 0
    # a 1x1 conv lowered to a GEMM on NCHW data: the layout's cost
    fallback = np.array(
        [
            nchw and d is not None and d.cause == "fallback" and c
            for d, c in zip(pair_diag, pair_conv, strict=True)
        ]
    )
    diagnosed = slow & ~plain
    conv_fallback = np.nonzero(diagnosed & fallback[of_pair])[0]
    groups = _groups(pair_diag, pair_conv, of_pair, np.nonzero(diagnosed & ~fallback[of_pair])[0])
    out: list[Finding] = []
    if nchw:
        saving = (float(gpu.dur_ns[layout_rows].sum()) + float(shortfall[conv_fallback].sum())) / ctx.per
        if saving >= MIN_SAVING_SHARE * ctx.step_ns:
            lines = ctx.source_lines(count_lines(ctx.links.kernel_line[layout_rows]))
            out.append(conv_layout_finding(ctx, lines, layout_rows, rows[conv_fallback], saving, target))
    pad_rows = np.flatnonzero(
        (gpu.kind == GpuKind.KERNEL) & flag_of(ctx.trace.string_flags(PAD_NAME.search), gpu.name)
    )
    padding = [
        _library_padding(ctx, rows[ix], pair_diag[of_pair[ix[0]]], pair_conv[of_pair[ix[0]]], pad_rows, layout_rows)
        for ix in groups
    ]
    # a convolution the library pads itself already runs the padded work: padding it once saves the padding kernels
    saved = [
        float(shortfall[ix].sum()) if pad is None else float(gpu.dur_ns[pad].sum())
        for ix, pad in zip(groups, padding, strict=True)
    ]
    for k in sorted(range(len(groups)), key=lambda k: -saved[k]):
        saving = saved[k] / ctx.per
        if saving < MIN_SAVING_SHARE * ctx.step_ns or len(out) >= MAX_EFFICIENCY_FINDINGS:
            continue
        ix, sel = groups[k], rows[groups[k]]
        lines = ctx.source_lines(count_lines(ctx.links.kernel_line[sel]))
        group = [d for d in (diags[j] for j in of_row[ix].tolist()) if d is not None]
        out.append(slow_gemm_finding(ctx, lines, sel, group, saving, target, measured, padding[k]))
    if int((plain & ~slow).sum()) >= MIN_REFERENCE:  # the run's own GEMMs show the GPU doing better
        out.extend(_unknown_findings(ctx, rows, np.flatnonzero(slow & plain), shortfall, target, measured))
    return out


def _unknown_findings(
    ctx: Context, rows: np.ndarray, idx: np.ndarray, shortfall: np.ndarray, target: float, measured: bool
) -> list[Finding]:
    """The slow kernels `idx` (into `rows`) with no cause found, by kernel name: one "cause unknown" finding
    per name holding UNKNOWN_MIN_SHARE of the step or more."""
    gpu, roof = ctx.trace.gpu, ctx.roof
    out: list[Finding] = []
    if not len(idx) or not ctx.step_ns:
        return out
    names, of_name = unique_inverse(gpu.name[rows[idx]].astype(np.int64))
    for k in np.argsort(
        [-float(gpu.dur_ns[rows[idx[of_name == i]]].sum()) for i in range(len(names))]
    ).tolist():
        ix = idx[of_name == k]
        sel = rows[ix]
        if float(gpu.dur_ns[sel].sum()) / ctx.per < UNKNOWN_MIN_SHARE * ctx.step_ns:
            continue
        shapes = []
        for o in dict.fromkeys(roof.cost_op[sel].tolist()):
            cost = roof.op_costs.of(int(o))
            text = (
                shape_text(ctx.trace.name(int(ctx.trace.ops.name[o])), int(roof.family[sel[0]]), cost.inputs)
                if cost
                else ""
            )
            if text and text not in shapes:
                shapes.append(text)
        lines = ctx.source_lines(count_lines(ctx.links.kernel_line[sel]))
        out.append(
            unknown_gemm_finding(
                ctx, lines, sel, shapes, float(shortfall[ix].sum()) / ctx.per, target, measured
            )
        )
    return out


def _groups(
    pair_diag: list[Diagnosis | None], pair_conv: list[bool], of_pair: np.ndarray, idx: np.ndarray
) -> list[np.ndarray]:
    """The rows `idx` (in order) grouped by (cause, offending values, conv), groups in order of their first
    row."""
    seq = of_pair[idx]
    firsts = np.unique(seq, return_index=True)
    group_of_pair = np.full(len(pair_diag), -1, dtype=np.int64)
    ids: dict[tuple[object, ...], int] = {}
    for p in firsts[0][np.argsort(firsts[1], kind="stable")].tolist():
        d = pair_diag[p]
        assert d is not None
        group_of_pair[p] = ids.setdefault((d.cause, d.dims, pair_conv[p]), len(ids))
    g = group_of_pair[seq]
    return [idx[g == i] for i in range(len(ids))]


def _library_padding(
    ctx: Context, rows: np.ndarray, d: Diagnosis | None, conv: bool, pad_rows: np.ndarray, layout_rows: np.ndarray
) -> np.ndarray | None:
    """Whether the library pads the channels of the convolutions of `rows` itself, when their cause is the
    channels' alignment: then the rows of the padding kernels (cuDNN's `nhwcAddPaddingKernel`, of `pad_rows`)
    they launched, empty where the padding is done by the NCHW->NHWC conversion they launched (of
    `layout_rows`: the conv_layout finding's kernels). Such a convolution's kernel runs on the padded channels
    already (opcost.channel_padding), so padding the input and the weight once saves the padding kernels, not
    the kernel's shortfall. None for any other cause, and where the library ran neither."""
    if not conv or d is None or d.cause != "align":
        return None
    ops = ctx.roof.cost_op[rows]
    pad = pad_rows[np.isin(ctx.roof.cost_op[pad_rows], ops)]
    converts = np.isin(ctx.roof.cost_op[layout_rows], ops).any()
    return pad if len(pad) or converts else None


def _layout_rows(ctx: Context) -> np.ndarray:
    """Rows of cuDNN layout-conversion kernels launched by convolutions (forward or backward)."""
    gpu, roof = ctx.trace.gpu, ctx.roof
    is_layout = flag_of(ctx.trace.string_flags(_LAYOUT.search), gpu.name)
    rows: np.ndarray = np.nonzero(is_layout & np.isin(roof.family, _CONV_FAMILIES))[0]
    return rows


def rate_span(ctx: Context, rows: np.ndarray) -> RateSpan:
    """The achieved FLOP/s and roof fractions of `rows`: their range, and their median FLOP roof."""
    roof = ctx.roof
    ach, _, frac = roof.rates(rows)
    return RateSpan(
        float(np.nanmin(ach)),
        float(np.nanmax(ach)),
        float(np.nanmedian(roof.unit_peak_flops_per_s[rows])),
        float(np.nanmin(frac)),
        float(np.nanmax(frac)),
    )


def kernel_names(ctx: Context, rows: np.ndarray) -> tuple[str, ...]:
    """The distinct kernel names of `rows`, in order."""
    return tuple(dict.fromkeys(ctx.trace.name(int(n)) for n in ctx.trace.gpu.name[rows].tolist()))


def _is_conv(ctx: Context, rows: np.ndarray) -> bool:
    return int(ctx.roof.family[rows[0]]) in (Family.CONV, Family.CONV_BACKWARD)


def slow_gemm_finding(
    ctx: Context,
    lines: tuple[SourceLine, ...],
    rows: np.ndarray,
    diags: list[Diagnosis],
    saving: float,
    target: float,
    measured: bool = True,
    library_padding: np.ndarray | None = None,
) -> Finding:
    d = diags[0]
    conv = _is_conv(ctx, rows)
    pad = np.empty(0, dtype=np.int64) if library_padding is None else library_padding
    facts = SlowGemmFacts(
        ctx.scale,
        d,
        conv,
        tuple(dict.fromkeys(x.shape for x in diags if x.shape)),
        any(x.fallback for x in diags),
        kernel_names(ctx, rows),
        len(rows),
        float(ctx.trace.gpu.dur_ns[rows].sum()) / ctx.per,
        padded_work(d, conv),
        rate_span(ctx, rows),
        target,
        measured,
        library_padding is not None,
        len(pad),
        float(ctx.trace.gpu.dur_ns[pad].sum()) / ctx.per,
        kernel_names(ctx, pad),
    )
    kernels = tuple(int(r) for r in rows[:64])
    return Finding(FindingKind.SLOW_GEMM, lines, saving, facts, kernels=kernels)


def conv_layout_finding(
    ctx: Context,
    lines: tuple[SourceLine, ...],
    layout_rows: np.ndarray,
    fallback_rows: np.ndarray,
    saving: float,
    target: float,
) -> Finding:
    gpu, roof = ctx.trace.gpu, ctx.roof
    fallback = None
    if len(fallback_rows):
        hw = sorted({h for h in (_spatial(ctx, int(r)) for r in fallback_rows.tolist()) if h and h % 8})
        fallback = ConvFallback(
            len(fallback_rows),
            kernel_names(ctx, fallback_rows),
            tuple(hw),
            float(gpu.dur_ns[fallback_rows].sum()) / ctx.per,
            rate_span(ctx, fallback_rows),
        )
    facts = ConvLayoutFacts(
        ctx.scale,
        len(set(roof.cost_op[layout_rows].tolist())),
        len(layout_rows),
        kernel_names(ctx, layout_rows),
        float(gpu.dur_ns[layout_rows].sum()) / ctx.per,
        fallback,
        target,
    )
    rows = np.concatenate([layout_rows, fallback_rows])[:64]
    return Finding(FindingKind.CONV_LAYOUT, lines, saving, facts, kernels=tuple(int(r) for r in rows))


def _spatial(ctx: Context, row: int) -> int | None:
    """H×W of the convolution's activation (forward: input; backward: grad_output)."""
    cost = ctx.roof.op_costs.of(int(ctx.roof.cost_op[row]))
    t = next((t for t in cost.inputs if t is not None), None) if cost else None
    if t is None or len(t.shape) < 3:
        return None
    return int(np.prod(t.shape[2:]))


def unknown_gemm_finding(
    ctx: Context,
    lines: tuple[SourceLine, ...],
    rows: np.ndarray,
    shapes: list[str],
    saving: float,
    target: float,
    measured: bool = True,
) -> Finding:
    """Matmul or convolution kernels far under their roof, a good share of the step, whose cause
    gemm_shapes.diagnose does not find: the evidence it checked, and a saving at the run's reference."""
    facts = UnknownGemmFacts(
        ctx.scale,
        _is_conv(ctx, rows),
        tuple(shapes),
        kernel_names(ctx, rows),
        len(rows),
        float(ctx.trace.gpu.dur_ns[rows].sum()) / ctx.per,
        rate_span(ctx, rows),
        tuple(sorted({b for b in (_blocks(ctx, int(r)) for r in rows.tolist()) if b})),
        ctx.trace.device.num_sms,
        target,
        measured,
    )
    return Finding(FindingKind.SLOW_GEMM, lines, saving, facts, kernels=tuple(int(r) for r in rows[:64]))


def _blocks(ctx: Context, row: int) -> int | None:
    return blocks_of(ctx.trace.name(int(ctx.trace.gpu.grid[row]))) if ctx.trace.gpu.grid[row] >= 0 else None


# ---------------------------------------------------------------------------------------------- attention


def math_attention_rows(ctx: Context) -> np.ndarray:
    """Per gpu row: the op row of the SDPA math fallback (`_scaled_dot_product_attention_math`) the kernel
    belongs to, else -1. Forward kernels are those with the math op among their ops' ancestors; the backward
    pass runs autograd's nodes of its matmuls and softmax, on no op of SDPA's, so a backward kernel belongs to
    it when it is placed on a line of those forward kernels (the line that calls SDPA)."""
    trace, links, gpu = ctx.trace, ctx.links, ctx.trace.gpu
    out = np.full(len(gpu), -1, dtype=np.int64)
    if not len(trace.ops) or not len(gpu):
        return out
    ids = [i for i in (trace.sid("aten::" + op) for op in sorted(MATH_OPS)) if i >= 0]
    if not ids:
        return out
    rows = np.flatnonzero((links.kernel_op >= 0) & (gpu.kind == GpuKind.KERNEL))
    cur = links.kernel_op[rows]
    for _ in range(MAX_DEPTH + 4):
        if not len(rows):
            break
        hit = np.isin(trace.ops.name[cur], ids)
        out[rows[hit]] = cur[hit]
        rows, cur = rows[~hit], links.op_parent[cur[~hit]]
        up = cur >= 0
        rows, cur = rows[up], cur[up]
    fwd = np.flatnonzero(out >= 0)
    line = links.kernel_line
    placed = line[fwd] >= 0
    if placed.any():
        lines, first = np.unique(line[fwd][placed], return_index=True)
        op_of_line = out[fwd][placed][first]
        back = (out < 0) & (gpu.kind == GpuKind.KERNEL) & np.isin(line, lines)
        back &= ~np.isin(ctx.roof.family, _ATTENTION_FAMILIES)
        idx = np.flatnonzero(back)
        out[idx] = op_of_line[np.searchsorted(lines, line[idx])]
    return out


def attention_kernels(ctx: Context) -> np.ndarray:
    """Per gpu row: a kernel of an attention op or of SDPA's math fallback (this module's attention findings
    speak for them; the matmul findings and no_tensor_cores leave them out)."""
    fused: np.ndarray = np.isin(ctx.roof.family, _ATTENTION_FAMILIES) | (math_attention_rows(ctx) >= 0)
    return fused


def _op_causal(ctx: Context, op: int) -> bool | None:
    """is_causal from the op's recorded Concrete Inputs (attention_cost.is_causal); None when not recorded."""
    ops = ctx.trace.ops
    if "concrete" not in ops.columns or op < 0 or int(ops.concrete[op]) < 0:
        return None
    try:
        concrete = json.loads(ctx.trace.name(int(ops.concrete[op])))
    except ValueError:
        return None
    if not isinstance(concrete, list):
        return None
    return is_causal(base_name(ctx.trace.name(int(ops.name[op]))), concrete)


def _attention_target(frac: np.ndarray, dur: np.ndarray) -> tuple[float, bool]:
    """The roof fraction attention's cures are held to: this run's own attention kernels with no cause found,
    as reference_fraction, when MIN_REFERENCE of them reach BELOW_ROOF or better; else ATTENTION_TARGET."""
    if measured_reference(frac, dur):
        return reference_fraction(frac, dur), True
    return ATTENTION_TARGET, False


def attention_kernel_findings(ctx: Context) -> list[Finding]:
    """Slow attention kernels, by cause and call shape: SDPA's fused kernels under BELOW_ROOF of their roof,
    and the math fallback's kernels, each group UNKNOWN_MIN_SHARE of the step or more (module doc)."""
    trace, gpu, roof = ctx.trace, ctx.trace.gpu, ctx.roof
    if not len(gpu) or not ctx.step_ns:
        return []
    math_op = math_attention_rows(ctx)
    fused = np.flatnonzero(
        (gpu.kind == GpuKind.KERNEL)
        & np.isin(roof.family, _ATTENTION_FAMILIES)
        & (roof.cost_op >= 0)
        & (math_op < 0)
    )
    frac = roof.roof_fraction(fused)
    known = np.isfinite(frac)
    fused, frac = fused[known], frac[known]
    dur = gpu.dur_ns.astype(np.float64)
    # diagnosed once per distinct (op cost, Concrete Inputs), from its first row
    op = roof.cost_op[fused].astype(np.int64)
    call = roof.op_costs.index[op].astype(np.int64) + 1
    if "concrete" in trace.ops.columns:
        call = call * (int(trace.ops.concrete.max(initial=0)) + 2) + trace.ops.concrete[op].astype(np.int64) + 1
    _, first, of_key = np.unique(call, return_index=True, return_inverse=True)
    diags: list[AttentionDiagnosis | None] = []
    shapes: list[str] = []
    # the widest cuDNN head-dim tile among each call's kernels (-1: none is a cuDNN SDPA kernel)
    names, of_name = unique_inverse(gpu.name[fused].astype(np.int64))
    name_tile = np.array([cudnn_head_dim(trace.name(int(n))) or -1 for n in names.tolist()], dtype=np.int64)
    call_tile = np.full(len(first), -1, dtype=np.int64)
    np.maximum.at(call_tile, of_key, name_tile[of_name])
    for k, o in enumerate(op[first].tolist()):
        cost = roof.op_costs.of(o)
        name = base_name(trace.name(int(trace.ops.name[o])))
        causal = _op_causal(ctx, o)
        tile = int(call_tile[k]) if call_tile[k] > 0 else None
        d = None if cost is None else diagnose_attention(name, cost.inputs, causal, trace.device.num_sms, tile)
        s = None if cost is None else attention_shape(name, cost.inputs)
        diags.append(d)
        shapes.append(s.text if s is not None else "")
    undiagnosed = np.array([d is None for d in diags], dtype=bool)[of_key]
    groups: dict[tuple[object, ...], list[int]] = {}
    diag_of: dict[tuple[object, ...], AttentionDiagnosis | None] = {}
    tensor_peak = ctx.peaks.tensor_flops_per_s
    slow = frac < BELOW_ROOF
    if tensor_peak:
        # an fp32 call is judged against the roof of its cure, bf16's: the efficient kernel can run near the
        # fp32 roof and still at a tenth of what the same call does in bf16
        fp32 = np.array([d is not None and d.cause == "fp32" for d in diags], dtype=bool)[of_key]
        with np.errstate(divide="ignore", invalid="ignore"):
            frac16 = roof.flops[fused] / (dur[fused] * 1e-9 * tensor_peak)
        slow |= fp32 & (frac16 < BELOW_ROOF)
    for k, (d, shape) in enumerate(zip(diags, shapes, strict=True)):
        hit = np.flatnonzero(slow & (of_key == k))
        if not len(hit):
            continue
        group: tuple[object, ...] = ((d.cause, d.why, d.dims) if d is not None else ("unknown",)) + (shape,)
        groups.setdefault(group, []).extend(hit.tolist())
        diag_of[group] = d
    target, measured = _attention_target(frac[undiagnosed], dur[fused][undiagnosed])
    out: list[Finding] = []
    unknown_ok = measured  # a measured rate of this run's own attention kernels: evidence it could do better
    for group, members in groups.items():
        d = diag_of[group]
        if d is None and not unknown_ok:
            continue
        ix = np.sort(np.array(members))
        sel, f = fused[ix], frac[ix]
        if d is not None and d.cause == "fp32" and tensor_peak:
            # the cure runs in bf16: its FLOPs at the target fraction of the 16-bit tensor-core roof
            cure = roof.flops[sel] / (target * tensor_peak) * 1e9
        elif d is not None and d.cause == "head_dim":
            cure = dur[sel] * d.work  # the kernel's own rate on the head dim's useful columns only
        else:
            cure = dur[sel] * np.minimum(1.0, f / target)
        cure = np.where(np.isfinite(cure), np.minimum(cure, dur[sel]), dur[sel])
        cure_ns = float(cure.sum())
        causal_cure = None
        if d is not None and d.cause == "mask" and d.pair_mask:
            # were the mask causal, is_causal=True would compute only the pairs it keeps, at the cure's rate
            causal_cure = cure_ns * causal_fraction(d.shape.s_q, d.shape.s_k)
        out.extend(_attention_finding(ctx, sel, d, str(group[-1]), cure_ns, target, measured, causal_cure))
    out.extend(_math_findings(ctx, math_op, target, measured))
    return sorted(out, key=lambda x: -(x.saving_ns or 0.0))[:MAX_EFFICIENCY_FINDINGS]


def _math_findings(ctx: Context, math_op: np.ndarray, target: float, measured: bool) -> list[Finding]:
    """SDPA's math fallback, by cause and call shape: its kernels' time against one fused kernel's, the call's
    FLOPs (forward, and backward where its backward kernels ran) at `target` of the 16-bit tensor-core roof."""
    trace, roof, gpu = ctx.trace, ctx.roof, ctx.trace.gpu
    rows = np.flatnonzero(math_op >= 0)
    tensor_peak = ctx.peaks.tensor_flops_per_s
    if not len(rows) or not tensor_peak:
        return []
    groups: dict[tuple[object, ...], list[int]] = {}
    diags: dict[tuple[object, ...], AttentionDiagnosis] = {}
    for op in np.unique(math_op[rows]).tolist():
        cost = roof.op_costs.of(op)
        name = base_name(trace.name(int(trace.ops.name[op])))
        d = None if cost is None else diagnose_attention(name, cost.inputs, _op_causal(ctx, op), None)
        if d is None:
            continue
        group: tuple[object, ...] = (d.why, d.shape.text, d.mask, d.causal)
        groups.setdefault(group, []).append(op)
        diags[group] = d
    out: list[Finding] = []
    for key, ops in groups.items():
        d = diags[key]
        sel = rows[np.isin(math_op[rows], ops)]
        s = d.shape
        q, k, v = (
            (s.batch, s.heads, s.s_q, s.head_dim),
            (s.batch, s.heads, s.s_k, s.head_dim),
            (s.batch, s.heads, s.s_k, s.head_dim_v),
        )
        share = causal_fraction(s.s_q, s.s_k) if d.causal else 1.0
        backward = _has_backward(ctx, sel, math_op)
        flops = share * (sdpa_flops(q, k, v) + (sdpa_backward_flops(q, k, v) if backward else 0.0))
        cure = len(ops) * flops / (target * tensor_peak) * 1e9
        cure = min(cure, float(gpu.dur_ns[sel].sum()))
        out.extend(_attention_finding(ctx, sel, d, s.text, cure, target, measured))
    return out


def _has_backward(ctx: Context, sel: np.ndarray, math_op: np.ndarray) -> bool:
    """Some of `sel` are backward kernels: on the math op's line, not under the math op itself."""
    ops = ctx.links.kernel_op[sel]
    under = np.zeros(len(sel), dtype=bool)
    cur = ops.copy()
    for _ in range(MAX_DEPTH + 4):
        ok = cur >= 0
        if not ok.any():
            break
        under |= ok & (cur == math_op[sel])
        cur = np.where(ok, ctx.links.op_parent[np.maximum(cur, 0)], -1)
    return bool((~under).any())


def _attention_finding(
    ctx: Context,
    rows: np.ndarray,
    d: AttentionDiagnosis | None,
    shape: str,
    cure_ns: float,
    target: float,
    measured: bool,
    causal_cure_ns: float | None = None,
) -> list[Finding]:
    """One finding for attention kernels `rows` (run totals) whose cure takes `cure_ns` (run total), when they
    hold UNKNOWN_MIN_SHARE of the step and the saving MIN_SAVING_SHARE; `causal_cure_ns`: the time were the
    call's mask causal and passed as is_causal=True (run total), said beside the saving."""
    gpu, roof, trace = ctx.trace.gpu, ctx.roof, ctx.trace
    total = float(gpu.dur_ns[rows].sum())
    saving = max(0.0, total - cure_ns) / ctx.per
    if total / ctx.per < UNKNOWN_MIN_SHARE * ctx.step_ns or saving < MIN_SAVING_SHARE * ctx.step_ns:
        return []
    counted = rows[
        np.isfinite(roof.flops[rows]) & (roof.flops[rows] > 0) & np.isfinite(roof.roof_fraction(rows))
    ]
    ops = tuple(
        dict.fromkeys(
            base_name(trace.name(int(trace.ops.name[o])))
            for o in ctx.links.kernel_op[rows].tolist()
            if o >= 0
        )
    )
    # the kernels' names, the longest-running first (a call's helper kernels, RNG state or dO·O, are short)
    names, of_name = unique_inverse(gpu.name[rows].astype(np.int64))
    by_time = np.argsort(-np.bincount(of_name, weights=gpu.dur_ns[rows].astype(np.float64)), kind="stable")
    facts = SlowAttentionFacts(
        ctx.scale,
        d,
        shape,
        ops,
        tuple(trace.name(int(names[k])) for k in by_time.tolist()),
        len(rows),
        total / ctx.per,
        rate_span(ctx, counted) if len(counted) else None,
        target,
        measured,
        cure_ns / ctx.per,
        None if causal_cure_ns is None else causal_cure_ns / ctx.per,
    )
    lines = ctx.source_lines(count_lines(ctx.links.kernel_line[rows]))
    return [Finding(FindingKind.SLOW_GEMM, lines, saving, facts, kernels=tuple(int(r) for r in rows[:64]))]
