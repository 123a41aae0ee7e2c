"""Findings for matmul and convolution kernels that are compute-class yet well below their roof: why, from the op's
shapes and dtypes and the kernel's name and launch (cost/gemm_shapes.py), and what to change.

Which kernels: GPU kernels of a matmul/conv op (attention has its own finder) on tensor cores, at under
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

| kind        | trigger (per kernel, grouped by cause and offending value)        | action                           |
|-------------|-------------------------------------------------------------------|----------------------------------|
| slow_gemm   | align: M, N, K (conv C_in/C_out) not a multiple of 16 bytes       | pad to a multiple of 64          |
| slow_gemm   | narrow: aligned shapes on narrow loads (a view's stride or start) | .contiguous(), aligned slices    |
| slow_gemm   | no cause found, >= UNKNOWN_MIN_SHARE of the step under BELOW_ROOF | "cause unknown", the evidence    |
| slow_gemm   | tiny M or N, small grid, split-K, partial tiles, pre-Hopper kernel| bigger or batched matmuls        |
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

conv_layout saves the conversion kernels' time (in channels_last they do not run) plus the shortfall, to the
reference, of the convolutions that ran as pre-Hopper GEMM kernels (a 1x1 convolution on NCHW is a GEMM whose
leading dimension is H x W; on NHWC it is C).
"""

from __future__ import annotations

import re

import numpy as np

from analyzers.arrays import dense_ids, unique_inverse
from analyzers.cost.gemm_shapes import Diagnosis, blocks_of, diagnose, padded_work, shape_text
from analyzers.cost.op_families import Family
from analyzers.findings.context import MIN_SAVING_SHARE, Context, count_lines
from analyzers.findings.facts import ConvFallback, ConvLayoutFacts, RateSpan, SlowGemmFacts, UnknownGemmFacts
from analyzers.results import Finding, FindingKind
from brrrtui.contract.model import GpuKind, SourceLine, flag_of

BELOW_ROOF = 0.5
DEFAULT_TARGET = 0.8
MIN_REFERENCE = 5
MAX_EFFICIENCY_FINDINGS = 6
UNKNOWN_MIN_SHARE = 0.05  # slow kernels with no cause found make a finding from this share of the step
RECURRENT_SAVING = 0.5  # of a recurrent op's GEMM time: fp16's roof is 2x TF32's, its bytes half fp32's

_GEMM_FAMILIES = [int(Family.MATMUL), int(Family.CONV), int(Family.CONV_BACKWARD)]
_CONV_FAMILIES = [int(Family.CONV), int(Family.CONV_BACKWARD)]
_LAYOUT = re.compile(r"nchwtonhwc|nhwctonchw", re.I)
_HELPER = re.compile(
    r"splitkreduce|init_device_workspace|addpadding|memset|convert|reduce_kernel|nchwtonhwc|nhwctonchw|fill",
    re.I,
)
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
    ranked = sorted(groups, key=lambda ix: -float(shortfall[ix].sum()))
    for ix in ranked:
        saving = float(shortfall[ix].sum()) / ctx.per
        if saving < MIN_SAVING_SHARE * ctx.step_ns or len(out) >= MAX_EFFICIENCY_FINDINGS:
            continue
        sel = rows[ix]
        lines = ctx.source_lines(count_lines(ctx.links.kernel_line[sel]))
        group = [d for d in (diags[k] for k in of_row[ix].tolist()) if d is not None]
        out.append(slow_gemm_finding(ctx, lines, sel, group, saving, target, measured))
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
) -> Finding:
    d = diags[0]
    conv = _is_conv(ctx, rows)
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
