"""Findings: what to change, where, and roughly what it saves, each backed by measured numbers.

Each finder is a function returning typed Findings (never printing). Savings are per optimizer step when the
windows hold steps, else per window; they are estimates of what the change could remove, not promises.

| kind            | trigger                                                        | action                             |
|-----------------|----------------------------------------------------------------|------------------------------------|
| fusion          | a chain of memory-bound pointwise kernels (fusion/chains.py)          | torch.compile / a named fused op   |
| attention       | matmul -> softmax -> matmul on one stream                      | F.scaled_dot_product_attention     |
| overhead        | GPU idle while the CPU issues work >= 20% of the time          | CUDA graphs, reduce-overhead, batch|
| small_kernels   | launch-bound kernels are many and hold much of the GPU time    | CUDA graphs, fewer bigger ops      |
| sync            | idle gaps that follow a synchronising call (by its line)       | keep values on the GPU             |
| h2d             | idle gaps covered by host-to-device copies (by line)           | pin_memory + non_blocking          |
| data            | idle gaps covered by DataLoader.__next__ (by line)             | num_workers, pin_memory            |
| no_tensor_cores | matmul-family kernels on the SIMT fp32 units                   | TF32 precision or autocast         |
| optimizer       | many small kernels inside Optimizer.step                       | foreach=True / fused=True          |
| slow_gemm       | tensor-core matmul/conv kernels under half their roof, and why | pad shapes, bigger matmuls         |
| slow_gemm       | attention kernels far under their roof (or SDPA's math path)   | bf16, is_causal, head_dim          |
| conv_layout     | cuDNN NCHW<->NHWC conversions around convolutions              | channels_last                      |
| communication   | GPU idle inside a CPU-side collective (gloo; findings/idle.py) | the straggler, or overlap          |

slow_gemm and conv_layout come from findings/efficiency.py (the causes: cost/gemm_shapes.py, and for
attention cost/attention_cost.py).
"""

from __future__ import annotations

from collections import defaultdict

import numpy as np

from analyzers.arrays import lexsort, window_stream_key
from analyzers.cost.kernel_costs import MAX_DEPTH
from analyzers.cost.op_families import MATMUL_FAMILIES, base_name
from analyzers.findings.context import MIN_SAVING_SHARE, Context, count_lines
from analyzers.findings.efficiency import attention_kernels, efficiency_findings, math_attention_rows
from analyzers.findings.facts import AttentionFacts, FusionFacts, OptimizerFacts, TensorCoreFacts
from analyzers.findings.idle import (
    collective_wait_findings,
    data_dependent_shapes,
    gap_findings,
    overhead_findings,
    small_kernel_findings,
)
from analyzers.fusion.chains import FusionChain
from analyzers.results import REGIME_CODES, Finding, FindingKind, Regime
from brrrtui.contract.model import GpuKind

MAX_FUSION_FINDINGS = 8
OPTIMIZER_KERNELS_PER_STEP = 50

# ---------------------------------------------------------------------------------------------- fusion


def fusion_findings(ctx: Context, chains: list[FusionChain]) -> list[Finding]:
    out: list[Finding] = []
    bw = ctx.peaks.bytes_per_s
    for c in chains:
        saving = c.saving_ns / ctx.per
        if saving < MIN_SAVING_SHARE * ctx.step_ns or len(out) >= MAX_FUSION_FINDINGS:
            continue
        lines = ctx.source_lines(c.line_ids)
        achieved = c.bytes_now / (c.kernel_ns * 1e-9) if c.bytes_now is not None and c.kernel_ns > 0 else None
        ops = tuple(dict.fromkeys(base_name(n) for n in c.op_names if n))
        regimes = ctx.roof.regime[c.rows]
        n_mem = int((regimes == REGIME_CODES[Regime.MEMORY]).sum())
        n_instr = int((regimes == REGIME_CODES[Regime.COMPUTE]).sum())
        facts = FusionFacts(
            ctx.scale,
            len(c.rows),
            n_mem,
            n_instr,
            ops,
            c.occurrences,
            c.bytes_now,
            achieved,
            bw,
            c.bytes_saved,
            c.launches_saved,
            c.pattern,
            lines[0].function if lines else None,
            bool(c.scope),
            data_dependent_shapes(ctx, within=lines[0]) if lines else None,
        )
        out.append(
            Finding(
                FindingKind.FUSION,
                lines,
                saving,
                facts,
                kernels=tuple(c.rows),
                window=min(c.windows, default=-1),
            )
        )
    return out


def attention_findings(ctx: Context) -> list[Finding]:
    """matmul -> (pointwise)* -> softmax -> (pointwise)* -> matmul on one stream, within a few kernels::

    stream  [bmm q@kT][div][softmax][dropout][bmm p@v]     -> one flash-attention kernel

    Not SDPA's own math fallback (its kernels are under `_scaled_dot_product_attention_math`): that script
    calls SDPA already, and findings/efficiency.py says why the fused kernels did not run.
    """
    trace, gpu, kop = ctx.trace, ctx.trace.gpu, ctx.links.kernel_op
    if not len(gpu) or not len(trace.ops):
        return []
    names = [base_name(s) for s in trace.strings]
    is_mm = np.fromiter((n in ("bmm", "matmul", "mm", "baddbmm") for n in names), bool, len(names))
    is_sm = np.fromiter((n in ("_softmax", "softmax", "_safe_softmax") for n in names), bool, len(names))
    op_name = np.where(kop >= 0, trace.ops.name[np.maximum(kop, 0)], -1)
    k_mm = np.where(op_name >= 0, is_mm[np.maximum(op_name, 0)], False)
    k_sm = np.where(op_name >= 0, is_sm[np.maximum(op_name, 0)], False)
    if not k_sm.any() or not k_mm.any():
        return []
    key = window_stream_key(gpu.window, gpu.stream)
    order = lexsort((gpu.start_ns, key))
    in_math = math_attention_rows(ctx) >= 0
    pos = np.nonzero(k_sm[order] & ~in_math[order])[0]
    found: dict[tuple[int, ...], list[tuple[int, int]]] = defaultdict(list)
    for p in pos.tolist():
        lo = next((q for q in range(p - 1, max(p - 7, -1), -1) if k_mm[order[q]]), None)
        hi = next((q for q in range(p + 1, min(p + 7, len(order))) if k_mm[order[q]]), None)
        if lo is None or hi is None or key[order[lo]] != key[order[hi]]:
            continue
        rows = order[lo : hi + 1]
        sig = tuple(int(ctx.links.kernel_line[r]) for r in rows)
        found[sig].append((lo, hi))
    out: list[Finding] = []
    for sig, spans in found.items():
        between = np.concatenate([order[lo + 1 : hi] for lo, hi in spans])
        middle_ns = float(gpu.dur_ns[between].sum())
        saving = middle_ns / ctx.per
        if saving < MIN_SAVING_SHARE * ctx.step_ns:
            continue
        b = ctx.roof.bytes[between]
        lines = ctx.source_lines([i for i in sig if i >= 0])
        facts = AttentionFacts(ctx.scale, len(between) // len(spans), float(np.nansum(b)))
        first = order[spans[0][0] : spans[0][1] + 1]
        out.append(Finding(FindingKind.ATTENTION, lines, saving, facts, kernels=tuple(int(r) for r in first)))
    return out


def tensor_core_findings(ctx: Context) -> list[Finding]:
    """fp32 matmuls on the SIMT units: TF32 or bf16 tensor cores would raise their roof 8-15×. Attention's
    kernels (SDPA's fused ones and its math fallback's) are left to findings/efficiency.py: TF32 does not
    reach the fused kernels, whose cure is bf16."""
    roof, gpu = ctx.roof, ctx.trace.gpu
    # a matmul op's kernels that do no FLOPs (a recurrent op's elementwise cells, layout and padding kernels)
    # are no matmuls on the SIMT units: tensor cores would not run them
    mm = np.isin(roof.family, [int(f) for f in MATMUL_FAMILIES]) & (roof.tensor_cores == 0) & (roof.flops != 0)
    mm &= ~attention_kernels(ctx)  # their cure is bf16, not TF32 (attention_kernel_findings)
    if not mm.any() or ctx.peaks.tensor_flops_per_s is None:
        return []
    tf32 = ctx.peaks.tensor_flops_per_s * 0.5
    dur = gpu.dur_ns[mm].astype(np.float64)
    f, b = roof.flops[mm], roof.bytes[mm]
    bw = ctx.peaks.bytes_per_s or np.inf
    with np.errstate(invalid="ignore", divide="ignore"):
        new = np.fmax(
            np.where(np.isfinite(f), f / tf32 * 1e9, 0.0), np.where(np.isfinite(b), b / bw * 1e9, 0.0)
        )
    saving = float(np.clip(dur - new, 0, None).sum()) / ctx.per
    if saving < MIN_SAVING_SHARE * ctx.step_ns:
        return []
    secs = dur.sum() * 1e-9
    achieved = float(np.nansum(f) / secs) if secs else None
    lines = ctx.source_lines(count_lines(ctx.links.kernel_line[mm]))
    facts = TensorCoreFacts(
        ctx.scale,
        float(dur.sum()),
        achieved,
        ctx.peaks.fp32_flops_per_s,
        tf32,
        ctx.peaks.tensor_flops_per_s,
    )
    return [
        Finding(
            FindingKind.NO_TENSOR_CORES,
            lines,
            saving,
            facts,
            kernels=tuple(np.nonzero(mm)[0][:64].tolist()),
        )
    ]


# ---------------------------------------------------------------------------------------- optimizer


def optimizer_findings(ctx: Context) -> list[Finding]:
    """Many small kernels inside Optimizer.step: a per-parameter loop (foreach/fused not used)."""
    trace, links, gpu = ctx.trace, ctx.links, ctx.trace.gpu
    if not len(trace.ops) or ctx.steps <= 0:
        return []
    flag = trace.string_flags(lambda s: s.startswith("Optimizer.step#"))
    in_step = np.zeros(len(gpu), dtype=bool)
    # the kernels still walking up their ops, and the op each is at
    rows = np.flatnonzero(links.kernel_op >= 0)
    cur = links.kernel_op[rows]
    for _ in range(MAX_DEPTH + 4):
        if not len(rows):
            break
        hit = flag[np.maximum(trace.ops.name[cur], 0)]
        in_step[rows[hit]] = True
        rows, cur = rows[~hit], links.op_parent[cur[~hit]]
        up = cur >= 0
        rows, cur = rows[up], cur[up]
    kern = in_step & (gpu.kind == GpuKind.KERNEL)
    n = int(kern.sum())
    if n / ctx.per < OPTIMIZER_KERNELS_PER_STEP:
        return []
    multi = trace.string_flags(lambda s: "multi_tensor_apply" in s)
    if multi[gpu.name[kern]].mean() > 0.5:
        return []  # already foreach / fused
    names = [s for s in trace.strings if s.startswith("Optimizer.step#")]
    opt = names[0].split("#", 1)[1].split(".", 1)[0] if names else None
    step_ns = float(gpu.dur_ns[kern].sum()) / ctx.per
    saving = (n / ctx.per) * (ctx.per_launch_ns or 0.0) + step_ns * 0.5
    facts = OptimizerFacts(ctx.scale, opt, n, step_ns, float(np.median(gpu.dur_ns[kern])))
    return [
        Finding(FindingKind.OPTIMIZER, (), saving, facts, kernels=tuple(np.nonzero(kern)[0][:64].tolist()))
    ]


def all_findings(ctx: Context, chains: list[FusionChain]) -> list[Finding]:
    found = (
        overhead_findings(ctx)
        + small_kernel_findings(ctx)
        + gap_findings(ctx)
        + collective_wait_findings(ctx)
        + fusion_findings(ctx, chains)
        + attention_findings(ctx)
        + tensor_core_findings(ctx)
        + optimizer_findings(ctx)
        + efficiency_findings(ctx)
    )
    return sorted(found, key=lambda f: -(f.saving_ns or 0.0))
