"""The words of the efficiency findings (findings/efficiency.py): measured figures, the cause, the action."""

from __future__ import annotations

import re
from collections.abc import Callable

import numpy as np

from analyzers.cost.gemm_shapes import Diagnosis, blocks_of, pad_to, padded_work, round_up
from analyzers.cost.op_families import Family
from analyzers.findings.context import Context, where
from analyzers.results import Finding, FindingKind
from brrrtui.contract.model import SourceLine
from brrrtui.contract.units import fmt_flops, fmt_ns, fmt_pct

_SHORT = re.compile(
    r"cutlass_\w+|sm\d+_xmma\w+|nvjet\w+|ampere_\w+|turing_\w+|\w*gemm\w*|\w*(?:nchwToNhwc|nhwcToNchw)\w*"
)


def short_name(kernel: str, limit: int = 64) -> str:
    """`cutlass_75_tensorop_bf16_s1688gemm_bf16_128x128_tn_align1` out of a templated kernel name."""
    found = _SHORT.findall(kernel)
    s = max(found, key=len) if found else kernel
    return s if len(s) <= limit else s[: limit - 1] + "…"


def _span(lo: float, hi: float, fmt: Callable[[float | None], str]) -> str:
    a, b = fmt(lo), fmt(hi)
    return a if a == b else f"{a}–{b}"


def _rates(ctx: Context, rows: np.ndarray) -> str:
    """ "94.7–146 TFLOP/s of 775 TFLOP/s (12%–19% of the roof)" """
    roof = ctx.roof
    ach, _, frac = roof.rates(rows)
    peak = float(np.nanmedian(roof.unit_peak_flops_per_s[rows]))
    rate = _span(float(np.nanmin(ach)), float(np.nanmax(ach)), fmt_flops)
    pct = _span(float(np.nanmin(frac)), float(np.nanmax(frac)), fmt_pct)
    return f"{rate} of {fmt_flops(peak)} ({pct} of the roof)"


def _names(ctx: Context, rows: np.ndarray, k: int = 2) -> str:
    names = dict.fromkeys(short_name(ctx.trace.name(int(n))) for n in ctx.trace.gpu.name[rows].tolist())
    return ", ".join(list(names)[:k]) + (" …" if len(names) > k else "")


def _dims(values: tuple[int, ...]) -> str:
    return ", ".join(str(v) for v in values)


def _cause_text(d: Diagnosis, conv: bool) -> tuple[str, str]:
    """(why, what to do) for one cause."""
    dims = _dims(d.dims)
    if d.cause == "align":
        padded = ", ".join(f"{v} to {round_up(v, pad_to(d, conv))}" for v in d.dims)
        if conv:
            return (
                f"channels {dims} not a multiple of {d.align} ({d.align} elements = 16 bytes: tensor-core alignment)",
                f"pad the channels {padded} with zeros (a multiple of 8; the conv's weight gets as many"
                " channels), with the model and inputs in channels_last",
            )
        return (
            f"a dimension of {dims}, not a multiple of {d.align} ({d.align} elements = 16 bytes, the"
            " tensor-core alignment; strides are not recorded, so M, N or K may be a leading dimension)",
            f"pad {padded} (a multiple of 64): for a vocabulary, add unused tokens to the embedding and output"
            " layer (GPT-2's 50257 -> 50304); for a layer width, pick a multiple of 64",
        )
    if d.cause == "narrow":
        return (
            f"operands loaded {dims} bytes at a time though M, N and K are multiples of {d.align} (the kernel's"
            " `_align` says so): an operand's row stride or start is not 16-byte aligned, from a view (a slice"
            " such as x[:, 1:], a narrow()/chunk()/split() of a wider tensor, or a transposed non-contiguous"
            " operand), and the GEMM runs on narrow loads through L1/shared memory",
            "make that operand contiguous before the matmul (x.contiguous()), or slice so every row starts a"
            " multiple of 16 bytes apart (pad the wider tensor's last dimension to a multiple of 8)",
        )
    if d.cause == "tiny":
        return (
            f"an output only {dims} wide: too little work for one tile, most of each tile is empty",
            "batch such matmuls into one (stack them into a torch.bmm, or a larger batch)",
        )
    if d.cause == "grid":
        return (
            f"{d.dims[0]} blocks for {d.dims[1]} SMs: most SMs have nothing to do",
            "give each launch more work (a larger batch, or several such ops in one), or torch.compile"
            ' (mode="max-autotune") to pick a kernel that splits the work finer',
        )
    if d.cause == "split_k":
        return (
            f"a long K ({dims}) for a small output, so cuBLAS splits K over blocks and adds the partial sums"
            " in a second pass",
            "give the matmul more rows (a larger batch) so the output alone fills the GPU",
        )
    if d.cause == "tile":
        return (
            f"a dimension of {dims}, not a multiple of 64: the last tile is partly empty",
            f"round {', '.join(f'{v} up to {round_up(v)}' for v in d.dims)} (a multiple of 64)",
        )
    return (
        "a pre-Hopper kernel on this Hopper GPU: the library had no Hopper kernel for this shape or layout",
        "make the operands contiguous (.contiguous()) with dimensions that are multiples of 64, or try"
        ' torch.compile(mode="max-autotune")',
    )


def slow_gemm_finding(
    ctx: Context,
    lines: tuple[SourceLine, ...],
    rows: np.ndarray,
    diags: list[Diagnosis],
    saving: float,
    target: float,
) -> Finding:
    d = diags[0]
    conv = int(ctx.roof.family[rows[0]]) in (Family.CONV, Family.CONV_BACKWARD)
    why, action = _cause_text(d, conv)
    shapes = list(dict.fromkeys(x.shape for x in diags if x.shape))
    fallback = (
        f"; on this Hopper GPU the library fell back to {_names(ctx, rows)}"
        if any(x.fallback for x in diags) and d.cause != "fallback"
        else f" ({_names(ctx, rows)})"
    )
    gpu_ns = float(ctx.trace.gpu.dur_ns[rows].sum()) / ctx.per
    work = padded_work(d, conv)
    padding = f", padded ({work:.3g}× the FLOPs)" if work >= 1.01 else ""
    msg = (
        f"{len(rows) / ctx.per:.3g} {'convolution' if conv else 'matmul'} kernels per {ctx.unit} on {where(lines)}"
        f" ({'; '.join(shapes[:3])}{' …' if len(shapes) > 3 else ''}) have {why}{fallback}: they achieved"
        f" {_rates(ctx, rows)}, {fmt_ns(gpu_ns)} per {ctx.unit}; at the {fmt_pct(target)} of the roof this"
        f" run's other matmuls reach{padding}: ~{fmt_ns(saving)} per {ctx.unit} less"
    )
    kind = FindingKind.SLOW_GEMM
    return Finding(kind, lines, saving, msg, action, kernels=tuple(int(r) for r in rows[:64]))


def conv_layout_finding(
    ctx: Context,
    lines: tuple[SourceLine, ...],
    layout_rows: np.ndarray,
    fallback_rows: np.ndarray,
    saving: float,
    target: float,
) -> Finding:
    gpu, roof = ctx.trace.gpu, ctx.roof
    n_ops = len(set(roof.cost_op[layout_rows].tolist()))
    lay_ns = float(gpu.dur_ns[layout_rows].sum()) / ctx.per
    msg = (
        f"cuDNN converts NCHW tensors to NHWC and back around {n_ops / ctx.per:.3g} convolutions per {ctx.unit}"
        f" on {where(lines)}: {len(layout_rows) / ctx.per:.3g} layout kernels ({_names(ctx, layout_rows)})"
        f" take {fmt_ns(lay_ns)} per {ctx.unit}"
    )
    if len(fallback_rows):
        hw = sorted({h for h in (_spatial(ctx, int(r)) for r in fallback_rows.tolist()) if h and h % 8})
        fb_ns = float(gpu.dur_ns[fallback_rows].sum()) / ctx.per
        msg += (
            f", and {len(fallback_rows) / ctx.per:.3g} convolution kernels run as pre-Hopper GEMMs"
            f" ({_names(ctx, fallback_rows)}; on NCHW a 1x1 convolution's leading dimension is H×W"
            f"{', here ' + _dims(tuple(hw[:4])) if hw else ''}) at {_rates(ctx, fallback_rows)},"
            f" {fmt_ns(fb_ns)} per {ctx.unit}"
        )
    msg += (
        f"; in channels_last the conversions do not run{' and those reach ' + fmt_pct(target) if len(fallback_rows) else ''}:"
        f" ~{fmt_ns(saving)} per {ctx.unit}"
    )
    action = (
        "model = model.to(memory_format=torch.channels_last), and every input batch"
        " x = x.to(memory_format=torch.channels_last) (cuDNN's bf16/fp16 convolutions run on NHWC)"
    )
    rows = np.concatenate([layout_rows, fallback_rows])[:64]
    return Finding(FindingKind.CONV_LAYOUT, lines, saving, msg, action, kernels=tuple(int(r) for r in rows))


def _spatial(ctx: Context, row: int) -> int | None:
    """H×W of the convolution's activation (forward: input; backward: grad_output)."""
    cost = ctx.roof.op_costs.of(int(ctx.roof.cost_op[row]))
    t = next((t for t in cost.inputs if t is not None), None) if cost else None
    if t is None or len(t.shape) < 3:
        return None
    return int(np.prod(t.shape[2:]))


UNKNOWN_ACTION = (
    "cause unknown from the recording: profile one call with Nsight Compute (ncu --kernel-name regex:<kernel>"
    ' --set full) for its memory and tensor-pipe throughput, and try torch.compile(mode="max-autotune"), which'
    " times several kernels for the shape and keeps the fastest"
)


def unknown_gemm_finding(
    ctx: Context,
    lines: tuple[SourceLine, ...],
    rows: np.ndarray,
    shapes: list[str],
    saving: float,
    target: float,
) -> Finding:
    """Matmul or convolution kernels far under their roof, a good share of the step, whose cause
    gemm_shapes.diagnose does not find: the evidence it checked, and a saving at the run's reference."""
    conv = int(ctx.roof.family[rows[0]]) in (Family.CONV, Family.CONV_BACKWARD)
    gpu_ns = float(ctx.trace.gpu.dur_ns[rows].sum()) / ctx.per
    share = gpu_ns / ctx.step_ns if ctx.step_ns else None
    blocks = sorted({b for b in (_blocks(ctx, int(r)) for r in rows.tolist()) if b})
    sms = ctx.trace.device.num_sms
    grid = f"; {_dims(tuple(blocks[:3]))} blocks{f' for {sms} SMs' if sms else ''}" if blocks else ""
    checked = (
        (
            "the channels are 16-byte aligned"
            if conv
            else "the shapes are 16-byte aligned, M and N at least 64"
        )
        + ", whole tiles, no split-K, no narrow loads"
        if shapes
        else "its op's shapes were not recorded, so none of the shape causes can be read"
    )
    msg = (
        f"{len(rows) / ctx.per:.3g} {'convolution' if conv else 'matmul'} kernels per {ctx.unit} on {where(lines)}"
        f" ({'; '.join(shapes[:3]) or 'shapes unknown'}{' …' if len(shapes) > 3 else ''}; {_names(ctx, rows)})"
        f" take {fmt_ns(gpu_ns)} per {ctx.unit} ({fmt_pct(share)} of it) at {_rates(ctx, rows)}, cause unknown:"
        f" {checked}{grid}; at the {fmt_pct(target)} of the roof this run's other matmuls reach:"
        f" ~{fmt_ns(saving)} per {ctx.unit} less"
    )
    return Finding(
        FindingKind.SLOW_GEMM, lines, saving, msg, UNKNOWN_ACTION, kernels=tuple(int(r) for r in rows[:64])
    )


def _blocks(ctx: Context, row: int) -> int | None:
    return blocks_of(ctx.trace.name(int(ctx.trace.gpu.grid[row]))) if ctx.trace.gpu.grid[row] >= 0 else None
