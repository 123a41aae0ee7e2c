"""Findings for matmul and convolution kernels that are compute-class yet well below their roof: why, from the op's
shapes and dtypes and the kernel's name and launch (gemm_shapes.py), and what to change.

Which kernels: GPU kernels of a matmul/conv op (attention has its own finder) on tensor cores, at under
BELOW_ROOF of the roof at their intensity (roofline.py's roof_fraction), helper kernels (layout conversions,
split-K reductions, workspace fills) left out. fp32 matmuls on the SIMT units are `no_tensor_cores`
findings (findings.py): their roof is the fp32 one, and the fix (TF32) is that finding's.

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
| slow_gemm   | tiny M or N, small grid, split-K, partial tiles, pre-Hopper kernel| bigger or batched matmuls        |
| conv_layout | cuDNN nchwToNhwc / nhwcToNchw kernels around NCHW convolutions    | model and inputs channels_last   |

conv_layout saves the conversion kernels' time (in channels_last they do not run) plus the shortfall, to the
reference, of the convolutions that ran as pre-Hopper GEMM kernels (a 1x1 convolution on NCHW is a GEMM whose
leading dimension is H x W; on NHWC it is C).
"""

from __future__ import annotations

import re
from collections import defaultdict

import numpy as np

from analyzers.finding_context import MIN_SAVING_SHARE, Context, count_lines
from analyzers.gemm_shapes import Diagnosis, blocks_of, diagnose, padded_work
from analyzers.model import GpuKind, flag_of
from analyzers.op_families import Family
from analyzers.results import Finding
from analyzers.slow_gemm_text import conv_layout_finding, slow_gemm_finding

BELOW_ROOF = 0.5
DEFAULT_TARGET = 0.8
MIN_REFERENCE = 5
MAX_EFFICIENCY_FINDINGS = 6

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


def candidates(ctx: Context) -> np.ndarray:
    """Per gpu row: a matmul/conv kernel on tensor cores with a known roof fraction, not a helper kernel."""
    gpu, roof = ctx.trace.gpu, ctx.roof
    is_helper = flag_of(ctx.trace.string_flags(_HELPER.search), gpu.name)
    mask: np.ndarray = (
        (gpu.kind == GpuKind.KERNEL)
        & np.isin(roof.family, _GEMM_FAMILIES)
        & (roof.tensor_cores == 1)
        & np.isfinite(roof.roof_fraction)
        & (roof.cost_op >= 0)
        & ~is_helper
    )
    return mask


def diagnoses(ctx: Context, rows: np.ndarray) -> list[Diagnosis | None]:
    """diagnose() for each row, once per distinct (op cost, kernel name, grid)."""
    trace, roof = ctx.trace, ctx.roof
    hopper, sms = _hopper(ctx), trace.device.num_sms
    memo: dict[tuple[int, int, int], Diagnosis | None] = {}
    out: list[Diagnosis | None] = []
    for r in rows.tolist():
        op = int(roof.cost_op[r])
        key = (int(roof.op_costs.index[op]), int(trace.gpu.name[r]), int(trace.gpu.grid[r]))
        if key not in memo:
            cost = roof.op_costs.of(op)
            memo[key] = (
                None
                if cost is None
                else diagnose(
                    trace.name(int(trace.ops.name[op])),
                    int(roof.family[r]),
                    cost.inputs,
                    trace.name(int(trace.gpu.name[r])),
                    blocks_of(trace.name(int(trace.gpu.grid[r]))),
                    sms,
                    hopper,
                )
            )
        out.append(memo[key])
    return out


def reference_fraction(frac: np.ndarray, dur: np.ndarray) -> float:
    """Duration-weighted median of `frac`, clamped to BELOW_ROOF..1; DEFAULT_TARGET for under MIN_REFERENCE."""
    if len(frac) < MIN_REFERENCE:
        return DEFAULT_TARGET
    order = np.argsort(frac)
    cum = np.cumsum(dur[order].astype(np.float64))
    median = float(frac[order][np.searchsorted(cum, cum[-1] / 2)])
    return min(1.0, max(BELOW_ROOF, median))


def efficiency_findings(ctx: Context) -> list[Finding]:
    gpu, roof = ctx.trace.gpu, ctx.roof
    rows = np.nonzero(candidates(ctx))[0]
    if not len(rows):
        return []
    diags = diagnoses(ctx, rows)
    frac = roof.roof_fraction[rows]
    plain = np.array([d is None for d in diags])
    target = reference_fraction(frac[plain], gpu.dur_ns[rows][plain])
    slow = frac < BELOW_ROOF
    conv = np.isin(roof.family[rows], _CONV_FAMILIES)
    work = np.array([padded_work(d, bool(c)) for d, c in zip(diags, conv, strict=True)])
    shortfall = np.where(slow, gpu.dur_ns[rows] * np.clip(1.0 - frac * work / target, 0.0, None), 0.0)
    layout_rows = _layout_rows(ctx)
    nchw = len(layout_rows) > 0
    groups: dict[tuple[object, ...], list[int]] = defaultdict(list)
    conv_fallback: list[int] = []
    for i, d in enumerate(diags):
        if not slow[i] or d is None:
            continue
        if nchw and d.cause == "fallback" and roof.family[rows[i]] in _CONV_FAMILIES:
            conv_fallback.append(i)  # a 1x1 conv lowered to a GEMM on NCHW data: the layout's cost
            continue
        groups[(d.cause, d.dims, int(roof.family[rows[i]]) in _CONV_FAMILIES)].append(i)
    out: list[Finding] = []
    if nchw:
        saving = (float(gpu.dur_ns[layout_rows].sum()) + float(shortfall[conv_fallback].sum())) / ctx.per
        if saving >= MIN_SAVING_SHARE * ctx.step_ns:
            lines = ctx.source_lines(count_lines(ctx.links.kernel_line[layout_rows]))
            out.append(conv_layout_finding(ctx, lines, layout_rows, rows[conv_fallback], saving, target))
    ranked = sorted(groups.values(), key=lambda ix: -float(shortfall[ix].sum()))
    for ix in ranked:
        saving = float(shortfall[ix].sum()) / ctx.per
        if saving < MIN_SAVING_SHARE * ctx.step_ns or len(out) >= MAX_EFFICIENCY_FINDINGS:
            continue
        sel = rows[ix]
        lines = ctx.source_lines(count_lines(ctx.links.kernel_line[sel]))
        group = [d for d in (diags[i] for i in ix) if d is not None]
        out.append(slow_gemm_finding(ctx, lines, sel, group, saving, target))
    return out


def _layout_rows(ctx: Context) -> np.ndarray:
    """Rows of cuDNN layout-conversion kernels launched by convolutions (forward or backward)."""
    gpu, roof = ctx.trace.gpu, ctx.roof
    is_layout = flag_of(ctx.trace.string_flags(_LAYOUT.search), gpu.name)
    rows: np.ndarray = np.nonzero(is_layout & np.isin(roof.family, _CONV_FAMILIES))[0]
    return rows
