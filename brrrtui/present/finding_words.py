"""The words of every finding: its verdict with the measured figures (`message`) and what to change (`action`),
rendered from the facts its finder measured (analyzers.findings.facts). The report, SARIF, the details pane and
the module view all read a finding's words here; the analysis builds no sentence.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from functools import singledispatch
from typing import NamedTuple

from analyzers.cost.attention_cost import FLASH_HEAD_DIMS, AttentionDiagnosis, dtype_word
from analyzers.cost.gemm_shapes import Diagnosis, pad_to, round_up
from analyzers.findings.facts import (
    AttentionFacts,
    CollectiveWaitFacts,
    CommunicationFacts,
    ConvLayoutFacts,
    DynamicShapes,
    Facts,
    FusionFacts,
    GapFacts,
    GraphBreakFacts,
    Knob,
    OptimizerFacts,
    OverheadFacts,
    Per,
    RateSpan,
    RecompileFacts,
    SlowAttentionFacts,
    SlowGemmFacts,
    SlowStepsFacts,
    SmallKernelsFacts,
    TensorCoreFacts,
    UnknownGemmFacts,
)
from analyzers.phases.slow_steps import SLOW
from analyzers.results import Finding, FindingKind, Place
from brrrtui.contract.model import SourceLine
from brrrtui.contract.units import fmt_bw, fmt_bytes, fmt_flops, fmt_lines, fmt_ns, fmt_pct


class Words(NamedTuple):
    message: str  # the verdict and its numbers, one sentence
    action: str  # what to do about it


def words(f: Finding) -> Words:
    """The finding's verdict and action."""
    said = facts_words(f.facts, f)
    if f.waits_for is not None and f.kind is FindingKind.COMMUNICATION:
        said = Words(said.message, straggler_cure(f) + said.action)
    return said


def message(f: Finding) -> str:
    return words(f).message


def action(f: Finding) -> str:
    return words(f).action


@singledispatch
def facts_words(facts: Facts, f: Finding) -> Words:
    """The words of one kind of facts; every facts class registers its own."""
    raise TypeError(f"no words for {type(facts).__name__}")


# ---------------------------------------------------------------------------------------------- shared


def unit(p: Per) -> str:
    return "step" if p.by_step else "window"


def unprofiled(p: Per, ns: float) -> str:
    """ " (~X per step without the profiler)" when the profiler's slow-down is known and matters, else ""."""
    return (
        "" if p.idle_scale >= 0.95 else f" (~{fmt_ns(ns * p.idle_scale)} per {unit(p)} without the profiler)"
    )


def where(lines: tuple[SourceLine, ...]) -> str:
    """ "lines 41–44 of train.py", "train.py:41", or "train.py:41, model.py:7"."""
    if not lines:
        return "code outside any traced line"
    files = list(dict.fromkeys(ln.file for ln in lines))
    if len(files) == 1:
        nums = [ln.line for ln in lines]
        if len(set(nums)) == 1:
            return f"{files[0]}:{nums[0]}"
        return f"lines {fmt_lines(nums)} of {files[0]}"
    return ", ".join(str(ln) for ln in lines[:4]) + (" ..." if len(lines) > 4 else "")


def straggler_cure(f: Finding) -> str:
    """What a rank's communication waits for: the run's straggler, how late it is and where its time goes."""
    s = f.waits_for
    if s is None:
        return ""
    if s.cause == "line" and s.line is not None:
        why = f", most of it on {s.line}"
    elif s.cause == "gpu" and s.kernel is not None:
        why = f", most of it in the kernel {s.kernel} (slower there: that rank's GPU)"
    else:
        why = ""
    return (
        f"this rank waits for rank {s.rank}, {fmt_ns(s.late_ns)} per step late{why}: make rank {s.rank} faster"
        " (balance the work or the data it gets), or overlap the collective with work. "
    )


# ---------------------------------------------------------------------------------------------- fusion

_PATTERN_ACTIONS = {
    "gelu_tanh": 'replace the hand-written GELU with F.gelu(x, approximate="tanh") (one kernel), or torch.compile it',
    "gelu": "replace the hand-written GELU with F.gelu(x) (one kernel), or torch.compile it",
    "layer_norm": "use F.layer_norm / nn.LayerNorm (one fused kernel) instead of mean/var/rsqrt by hand",
    "rms_norm": "use F.rms_norm / nn.RMSNorm (fused) instead of pow/mean/rsqrt by hand",
    "softmax": "use F.softmax / torch.softmax (one kernel) instead of exp/sum/div by hand",
    "silu": "use F.silu(x) instead of x * torch.sigmoid(x)",
}


@facts_words.register
def _fusion(c: FusionFacts, f: Finding) -> Words:
    p, u = c.per, unit(c.per)
    per_occ = c.occurrences / p.per
    n_mem, n_instr, n = c.memory_bound, c.instruction_bound, c.kernels
    n_launch = n - n_mem - n_instr
    parts = [(n_mem, "memory-bound"), (n_instr, "instruction-bound"), (n_launch, "launch-bound")]
    present = [(k, name) for k, name in parts if k]
    kind_txt = (
        present[0][1]
        if len(present) == 1
        else f"pointwise ({', '.join(f'{k} {name}' for k, name in present)})"
    )
    msg = (
        f"{n} {kind_txt} kernels ({', '.join(c.ops)}) on {where(f.lines)}"
        f"{'' if per_occ == 1 else f', {per_occ:.3g}× per {u},'} move"
        f" {fmt_bytes(None if c.bytes_now is None else c.bytes_now / p.per)} per {u}"
        f" at {fmt_bw(c.achieved_bytes_per_s)} of {fmt_bw(c.peak_bytes_per_s)} peak; fused, the intermediates"
        f" are not written and re-read ({fmt_bytes(c.bytes_saved / p.per)} less) and {c.launches_saved:.3g}"
        f" launches go: ~{fmt_ns(f.saving_ns)} per {u}"
    )
    func = c.function
    fuses = (
        "Inductor fuses the memory-bound kernels between its matmuls: each run of them becomes one kernel"
        if c.scope
        else "Inductor fuses these into one kernel"
    )
    act = _PATTERN_ACTIONS.get(c.pattern or "") or static_first(c.dynamic, p) + (
        f"torch.compile the function{f' `{func}`' if func and not func.startswith('<') else ''} ({fuses})"
    )
    return Words(msg, act)


@facts_words.register
def _attention(c: AttentionFacts, f: Finding) -> Words:
    p, u = c.per, unit(c.per)
    msg = (
        f"{where(f.lines)} compute attention as matmul → softmax → matmul: the score matrix is written and"
        f" re-read by {c.middle_kernels} memory-bound kernels ({fmt_bytes(c.score_bytes / p.per)}"
        f" per {u}, {fmt_ns(f.saving_ns)}); a fused attention kernel keeps it on chip"
    )
    act = "use F.scaled_dot_product_attention(q, k, v, is_causal=...) (flash / memory-efficient kernels)"
    return Words(msg, act)


@facts_words.register
def _tensor_cores(c: TensorCoreFacts, f: Finding) -> Words:
    p, u = c.per, unit(c.per)
    msg = (
        f"fp32 matmuls on {where(f.lines)} run on the SIMT units: {fmt_ns(c.gpu_ns / p.per)} per {u} at"
        f" {fmt_flops(c.achieved_flops_per_s)} (fp32 roof {fmt_flops(c.fp32_flops_per_s)}; TF32 tensor cores"
        f" {fmt_flops(c.tf32_flops_per_s)}, bf16 {fmt_flops(c.tensor_flops_per_s)}): up to"
        f" {fmt_ns(f.saving_ns)} per {u} faster on tensor cores"
    )
    act = (
        'torch.set_float32_matmul_precision("high") (TF32), or run the model under '
        'torch.autocast("cuda", dtype=torch.bfloat16)'
    )
    return Words(msg, act)


@facts_words.register
def _optimizer(c: OptimizerFacts, f: Finding) -> Words:
    opt = c.optimizer or "the optimizer"
    msg = (
        f"{opt}.step launches {c.kernels / c.per.per:.0f} kernels per step ({fmt_ns(c.step_gpu_ns)} of GPU time,"
        f" median {fmt_ns(c.median_ns)}): one small kernel per parameter and operation"
    )
    act = f"{opt}(..., foreach=True), or fused=True where {opt} supports it (Adam, AdamW, SGD)"
    return Words(msg, act)


# ---------------------------------------------------------------------------------------------- idle


@facts_words.register
def _overhead(c: OverheadFacts, f: Finding) -> Words:
    p, u = c.per, unit(c.per)
    per = p.per
    corr = (
        f" (corrected for the profiler with unprofiled steps of {fmt_ns(c.unprofiled_step_ns)}:"
        f" {fmt_pct(c.corrected_fraction)})"
        if c.corrected_fraction is not None
        else ""
    )
    msg = (
        f"the GPU waits on the CPU {fmt_pct(c.raw_fraction)} of the profiled time{corr}:"
        f" {fmt_ns(c.host_idle_ns / per)} idle per {u}{unprofiled(p, c.host_idle_ns / per)} while Python,"
        f" dispatch and launches issue {c.kernels / per:.0f} kernels (median {fmt_ns(c.median_kernel_ns)},"
        f" {fmt_ns(c.per_launch_ns)} between kernels); most idle after {where(f.lines)}"
    ) + _step_without(c, f)
    act = static_first(c.dynamic, p) + (
        'capture the step with CUDA graphs (torch.compile(mode="reduce-overhead") or torch.cuda.graphs), '
        "torch.compile to cut Python and launches, or a bigger batch to give each launch more work"
    )
    return Words(msg, act)


def _step_without(c: OverheadFacts, f: Finding) -> str:
    """The unprofiled step less the saving: where the cure should bring the step. It holds when the host's
    speed, and with it the step and the saving, changes from run to run (a host-bound loop's does)."""
    if not c.per.by_step or not c.unprofiled_step_ns or not f.saving_ns:
        return ""
    left = max(0.0, c.unprofiled_step_ns - f.saving_ns)
    return f"; a step without it: ~{fmt_ns(left)} of the {fmt_ns(c.unprofiled_step_ns)} unprofiled step"


def static_first(d: DynamicShapes | None, p: Per) -> str:
    """The step before CUDA graphs when ops size their output from the data: make those shapes static."""
    if d is None:
        return ""
    return (
        f"first give the data-dependent shapes a static size ({', '.join(d.ops[:3])} on {where(d.lines)},"
        f" {d.calls / p.per:.3g} per {unit(p)}: each waits for the GPU and sizes its output from the data, so"
        " CUDA graphs cannot capture the step and torch.compile breaks the graph or recompiles there): for"
        " instance a fixed capacity per expert (a token's slot from the cumsum of its one-hot choice, tokens over"
        " it dropped), masks and torch.where(mask, a, b) in place of indexing, torch.nonzero_static; then "
    )


@facts_words.register
def _small_kernels(c: SmallKernelsFacts, f: Finding) -> Words:
    p, u = c.per, unit(c.per)
    per, n_lb = p.per, c.launch_bound
    if c.lined >= 0.5 or not f.lines:
        from_where = f"most from {where(f.lines)}"
    else:
        from_where = f"{fmt_pct(1 - c.lined)} of them from no known line, the others from {where(f.lines)}"
    msg = (
        f"{n_lb / per:.0f} kernels per {u} ({fmt_pct(n_lb / max(c.kernels, 1))} of all) finish before"
        f" the CPU launches the next: {fmt_ns(c.launch_bound_ns / n_lb)} each on the GPU while the CPU issues"
        f" one every {fmt_ns(c.launch_interval_ns)}; the GPU waits {fmt_ns(c.waited_ns)}"
        f" per {u}{unprofiled(p, c.waited_ns)} in front of them; {from_where}"
    )
    act = static_first(c.dynamic, p) + (
        "batch the work into fewer, larger ops (vectorise loops over tensors), or remove launches with CUDA"
        ' graphs / torch.compile(mode="reduce-overhead")'
    )
    return Words(msg, act)


_GAP_TEXT = {
    FindingKind.SYNC: (
        "{where} synchronises with the GPU {n} per {unit} (.item(), .cpu(), .tolist(), print(tensor) or an"
        " explicit synchronize): the queue drains and the GPU idles {idle} per {unit} ({share} of it) until the"
        " CPU refills it",
        "keep the value on the GPU (accumulate losses in a tensor and call .item() every N steps), move"
        " .cpu()/.tolist()/print out of the loop, and drop torch.cuda.synchronize() outside timing code",
    ),
    FindingKind.H2D: (
        "host-to-device copies from {where} leave the GPU idle {idle} per {unit} ({share}){detail}",
        "DataLoader(pin_memory=True) and tensor.to(device, non_blocking=True), or keep the data on the GPU",
    ),
    FindingKind.CPU_WAIT: (
        "the training thread waits off the CPU on {where} (a sleep, I/O, a lock or a queue: not Python, which"
        " runs on it) while the GPU idles {idle} per {unit} ({share})",
        "take the wait out of the training loop or off its thread: prefetch data in DataLoader workers, write"
        " logs and checkpoints from a background thread, drop time.sleep; or give the GPU work to overlap it",
    ),
    FindingKind.DATA: (
        "the GPU idles {idle} per {unit} ({share}) while the DataLoader produces the next batch on {where}",
        "DataLoader(num_workers=N, pin_memory=True, persistent_workers=True) so batches are ready before"
        " they are needed",
    ),
}


def _times(x: float) -> str:
    return "once" if x == 1 else f"{x:.3g}×"


@facts_words.register
def _gap(c: GapFacts, f: Finding) -> Words:
    p, u = c.per, unit(c.per)
    template, act = _GAP_TEXT[f.kind]
    detail = ""
    if c.copies is not None:
        b, secs = c.copies.nbytes, c.copies.seconds
        detail = (
            f": {fmt_bytes(b / p.per)} per {u} at {fmt_bw(b / secs if secs else None)}"
            f"{' from pageable memory' if c.copies.pageable else ''}"
        )
    msg = template.format(
        where=where(f.lines),
        n=_times(c.gaps / p.per),
        unit=u,
        idle=fmt_ns(c.idle_ns),
        share=fmt_pct(c.idle_ns / p.step_ns if p.step_ns else None),
        detail=detail,
    ) + (_wait_cost(c) if f.kind is FindingKind.CPU_WAIT else unprofiled(p, c.idle_ns))
    return Words(msg, act)


def _wait_cost(c: GapFacts) -> str:
    """What a wait off the CPU costs unprofiled steps: the profiler does not slow it, but the host's lead on
    the GPU can hide it."""
    if c.overhead_cap_ns is None:
        return "; the profiler does not slow a wait, so unprofiled steps lose the same"
    return (
        f"; the profiler does not slow a wait, but unprofiled steps leave the GPU only"
        f" {fmt_ns(c.overhead_cap_ns)} of overhead per {unit(c.per)} in all (the host runs ahead, its queued"
        f" kernels cover the wait), so the wait costs at most that"
    )


COLLECTIVE_WAIT_ACTION = (
    "the cure is the straggler, not this rank's host code: make the slowest rank faster (`brrrtui report` on"
    " the run sets the ranks side by side and names the straggler and its line), or overlap the collective"
    " with work: DDP(model, bucket_cap_mb=...) starts reducing during the backward, and the NCCL backend"
    " keeps CUDA tensors on the GPU where gloo copies every bucket through host memory"
)


@facts_words.register
def _collective_wait(c: CollectiveWaitFacts, f: Finding) -> Words:
    p, u = c.per, unit(c.per)
    share = fmt_pct(c.idle_ns / p.step_ns if p.step_ns else None)
    src = f.lines
    msg = (
        f"the GPU idles {fmt_ns(c.idle_ns)} per {u} ({share}) while this rank is inside {', '.join(c.ops)}"
        f"{f' from {where(src)}' if src else ''}: time in the collective (waiting for the other ranks and"
        " moving the data through the host, its device-to-host copies included), not a host sync"
    )
    return Words(msg, COLLECTIVE_WAIT_ACTION)


# ---------------------------------------------------------------------------------------------- communication

DDP_ACTION = (
    "overlap the all-reduce with the backward pass: DDP(model, bucket_cap_mb=...) (default 25: smaller buckets "
    "start reducing earlier in the backward, larger ones make fewer calls), gradient_as_bucket_view=True, "
    "static_graph=True when the graph does not change; or accumulate gradients over k micro-batches, the first "
    "k-1 inside `with model.no_sync():`, so the gradients are reduced once per optimizer step"
)
FSDP_ACTION = (
    "prefetch the next all-gather while the current layer computes: FSDP2 (fully_shard) "
    "layer.set_modules_to_forward_prefetch([next_layer]) and set_modules_to_backward_prefetch([previous_layer]); "
    "FSDP1 FullyShardedDataParallel(forward_prefetch=True, backward_prefetch=BackwardPrefetch.BACKWARD_PRE); "
    "reshard_after_forward=False on the last layers keeps their parameters gathered for the backward (memory "
    "for one all-gather less per layer)"
)


@facts_words.register
def _communication(c: CommunicationFacts, f: Finding) -> Words:
    p, u = c.per, unit(c.per)
    per = p.per
    kinds = ", ".join(f"{kind} {fmt_ns(ns / per)}" for kind, ns in c.by_kind)
    msg = (
        f"Collectives run with nothing else on the GPU for {fmt_ns(c.exposed_ns / per)} per {u} "
        f"({fmt_pct(c.exposed_ns / c.span_ns)} of the time; {kinds}); "
        f"{fmt_ns(c.hidden_ns / per)} more run hidden under compute or memory work. "
        "On a rank that waits for a later one this includes the wait (the ranks section names the straggler)"
    )
    first = c.by_kind[0][0] if c.by_kind else ""
    return Words(msg, FSDP_ACTION if first in ("all_gather", "reduce_scatter") else DDP_ACTION)


# ---------------------------------------------------------------------------------------------- efficiency

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


def _rates(r: RateSpan) -> str:
    """ "94.7–146 TFLOP/s of 775 TFLOP/s (12%–19% of the roof)" """
    rate = _span(r.flops_lo, r.flops_hi, fmt_flops)
    pct = _span(r.fraction_lo, r.fraction_hi, fmt_pct)
    return f"{rate} of {fmt_flops(r.peak_flops_per_s)} ({pct} of the roof)"


def _names(kernels: tuple[str, ...], k: int = 2) -> str:
    names = dict.fromkeys(short_name(n) for n in kernels)
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
    if d.cause == "transposed":
        return _transposed_text(d)
    return (
        "a pre-Hopper kernel on this Hopper GPU: the library had no Hopper kernel for this shape or layout",
        "make the operands contiguous (.contiguous()) with dimensions that are multiples of 64, or try"
        ' torch.compile(mode="max-autotune")',
    )


_OPERAND = {
    1: "the first operand (mat1) is a transposed view, M-major (as x.t() @ w)",
    2: "the second operand (mat2) is stored (K, N), N-major (as x @ w with w contiguous)",
}


def _transposed_text(d: Diagnosis) -> tuple[str, str]:
    """(why, what to do) of a TF32 or fp8 GEMM with an operand that is not K-major (gemm_shapes)."""
    kind = "fp8" if d.align == 16 else "TF32"
    which = " and ".join(_OPERAND[i] for i in d.dims)
    why = (
        f"a {kind} GEMM whose operands are not both K-major (the kernel's layout `{d.layout}`, K-major is `tn`):"
        f" {which}; Hopper's tensor cores read MN-major operands only for 16-bit types, so the library"
        " transposes the operand on the way in (through registers) or runs another kernel"
    )
    cures = []
    if 1 in d.dims:
        cures.append("make the transposed operand contiguous before the matmul (x.t().contiguous() @ w)")
    if 2 in d.dims:
        cures.append(
            "keep the weight in the layout the GEMM reads K-major: stored (out, in) and used as x @ w.t(), as"
            " nn.Linear stores it"
        )
    if kind == "fp8":
        cures.append(
            "for fp8, transpose the operand once and keep that copy (torch._scaled_mm wants mat2 column-major)"
        )
    cures.append(
        "a backward GEMM's layout is autograd's (grad_weight reads both operands MN-major): there, run the"
        ' matmuls in bf16 under torch.autocast("cuda", dtype=torch.bfloat16), where either layout runs at full rate'
    )
    return why, "; ".join(cures)


def _shapes(shapes: tuple[str, ...]) -> str:
    """ "M=64 N=4096 K=1024; M=64 N=1024 K=4096" (three at most), or "shapes unknown"."""
    return "; ".join(shapes[:3]) + (" …" if len(shapes) > 3 else "") if shapes else "shapes unknown"


def _reference(target: float, measured: bool) -> str:
    """ "at the 80% of the roof this run's other matmuls reach", or the assumed target said as such."""
    if measured:
        return f"at the {fmt_pct(target)} of the roof this run's other matmuls reach"
    return f"at {fmt_pct(target)} of the roof (assumed: this run's other matmuls do not show that rate)"


RECURRENT_ACTION = (
    'run the model under torch.autocast("cuda") with a torch.amp.GradScaler: autocast runs cuDNN\'s RNN in'
    " float16 (whatever dtype it is given), half the bytes and twice the tensor-core roof of TF32; and a larger"
    " batch: the steps run one after another whatever the batch, so more rows per GEMM add little time per"
    " step and the time per sample falls"
)
RECURRENT_HALF_ACTION = (
    "a larger batch: the steps run one after another whatever the batch, so more rows per GEMM add little time"
    " per step and the time per sample falls"
)


def _recurrent(c: SlowGemmFacts, f: Finding) -> Words:
    """GEMMs of a library recurrent op: the recurrence's per-step GEMM, M = batch (gemm_shapes.Recurrence)."""
    p, u, r = c.per, unit(c.per), c.diagnosis.recurrence
    assert r is not None
    layers = f"{r.layers} layer{'s' if r.layers != 1 else ''}" + (
        f" × {r.directions} directions" if r.directions > 1 else ""
    )
    steps = f"{r.steps} time steps" if r.steps else "every time step of a packed sequence"
    fp32 = c.diagnosis.align == 4
    gain = (
        f"; in float16 the tensor-core roof doubles and the weights read again at every step are half the bytes:"
        f" up to ~{fmt_ns(f.saving_ns)} per {u} less"
        if fp32
        else ""
    )
    msg = (
        f"{c.kernels / p.per:.3g} matmul kernels per {u} on {where(f.lines)} ({_shapes(c.shapes)}) are a"
        f" recurrent layer's GEMMs ({_names(c.kernel_names)}): {layers} of {steps}, each step one GEMM of the"
        f" previous step's hidden state by the recurrent weights with only M = batch = {r.batch} rows, run one"
        " after another (each step needs the one before), beside a few big GEMMs over all steps at once (each"
        " layer's input projection; backward, the weight gradients); they achieved"
        f" {_rates(c.rates)} (the op's FLOPs spread over its GEMMs by time), {fmt_ns(c.gpu_ns)} per {u}{gain}"
    )
    return Words(msg, RECURRENT_ACTION if fp32 else RECURRENT_HALF_ACTION)


@facts_words.register
def _slow_gemm(c: SlowGemmFacts, f: Finding) -> Words:
    p, u = c.per, unit(c.per)
    d = c.diagnosis
    if d.cause == "recurrent" and d.recurrence is not None:
        return _recurrent(c, f)
    why, act = _cause_text(d, c.conv)
    shapes = c.shapes
    fallback = (
        f"; on this Hopper GPU the library fell back to {_names(c.kernel_names)}"
        if c.fallback and d.cause != "fallback"
        else f" ({_names(c.kernel_names)})"
    )
    if c.library_pads:
        pads = (
            f"{c.padding_kernels / p.per:.3g} padding kernels per {u} ({_names(c.padding_names)}) taking"
            f" {fmt_ns(c.padding_ns)}"
            if c.padding_kernels
            else "in its NCHW to NHWC conversion (the conv_layout finding's kernels)"
        )
        msg = (
            f"{c.kernels / p.per:.3g} convolution kernels per {u} on {where(f.lines)} ({_shapes(shapes)}) have"
            f" {why} ({_names(c.kernel_names)}): cuDNN pads the channels itself, {pads}, and the"
            f" convolutions already run on the padded channels ({c.padded_work:.3g}× the FLOPs) at"
            f" {_rates(c.rates)}, {fmt_ns(c.gpu_ns)} per {u}; padded once, the padding kernels do not run:"
            f" ~{fmt_ns(f.saving_ns)} per {u} less (the convolutions keep their rate: their shortfall is not"
            " the alignment's)"
        )
        return Words(msg, act)
    padding = f", padded ({c.padded_work:.3g}× the FLOPs)" if c.padded_work >= 1.01 else ""
    msg = (
        f"{c.kernels / p.per:.3g} {'convolution' if c.conv else 'matmul'} kernels per {u} on {where(f.lines)}"
        f" ({_shapes(shapes)}) have {why}{fallback}: they achieved"
        f" {_rates(c.rates)}, {fmt_ns(c.gpu_ns)} per {u}; {_reference(c.target, c.measured)}{padding}:"
        f" ~{fmt_ns(f.saving_ns)} per {u} less"
    )
    return Words(msg, act)


@facts_words.register
def _conv_layout(c: ConvLayoutFacts, f: Finding) -> Words:
    p, u = c.per, unit(c.per)
    msg = (
        f"cuDNN converts NCHW tensors to NHWC and back around {c.convolutions / p.per:.3g} convolutions per {u}"
        f" on {where(f.lines)}: {c.layout_kernels / p.per:.3g} layout kernels ({_names(c.layout_names)})"
        f" take {fmt_ns(c.layout_ns)} per {u}"
    )
    fb = c.fallback
    if fb is not None:
        hw = fb.spatial
        msg += (
            f", and {fb.kernels / p.per:.3g} convolution kernels run as pre-Hopper GEMMs"
            f" ({_names(fb.kernel_names)}; on NCHW a 1x1 convolution's leading dimension is H×W"
            f"{', here ' + _dims(hw[:4]) if hw else ''}) at {_rates(fb.rates)},"
            f" {fmt_ns(fb.gpu_ns)} per {u}"
        )
    msg += (
        f"; in channels_last the conversions do not run{' and those reach ' + fmt_pct(c.target) if fb else ''}:"
        f" ~{fmt_ns(f.saving_ns)} per {u}"
    )
    act = (
        "model = model.to(memory_format=torch.channels_last), and every input batch"
        " x = x.to(memory_format=torch.channels_last) (cuDNN's bf16/fp16 convolutions run on NHWC)"
    )
    return Words(msg, act)


UNKNOWN_ACTION = (
    "cause unknown from the recording: profile one call with Nsight Compute (ncu --kernel-name regex:<kernel>"
    ' --set full) for its memory and tensor-pipe throughput, and try torch.compile(mode="max-autotune"), which'
    " times several kernels for the shape and keeps the fastest"
)


@facts_words.register
def _unknown_gemm(c: UnknownGemmFacts, f: Finding) -> Words:
    p, u = c.per, unit(c.per)
    share = c.gpu_ns / p.step_ns if p.step_ns else None
    blocks, sms, shapes = c.blocks, c.sms, c.shapes
    grid = f"; {_dims(blocks[:3])} blocks{f' for {sms} SMs' if sms else ''}" if blocks else ""
    checked = (
        (
            "the channels are 16-byte aligned"
            if c.conv
            else "the shapes are 16-byte aligned, M and N at least 64"
        )
        + ", whole tiles, no split-K, no narrow loads"
        if shapes
        else "its op's shapes were not recorded, so none of the shape causes can be read"
    )
    msg = (
        f"{c.kernels / p.per:.3g} {'convolution' if c.conv else 'matmul'} kernels per {u} on {where(f.lines)}"
        f" ({_shapes(shapes)}; {_names(c.kernel_names)}) take {fmt_ns(c.gpu_ns)} per {u} ({fmt_pct(share)} of it)"
        f" at {_rates(c.rates)}, cause unknown: {checked}{grid}; {_reference(c.target, c.measured)}:"
        f" ~{fmt_ns(f.saving_ns)} per {u} less"
    )
    return Words(msg, UNKNOWN_ACTION)


_BACKENDS = {
    "flash": "flash",
    "efficient": "memory-efficient",
    "cudnn": "cuDNN",
    "math": "math",
    "other": "fused",
}
_BF16 = (
    'run the attention in bf16: under torch.autocast("cuda", dtype=torch.bfloat16), or q, k, v'
    " .to(torch.bfloat16)"
)


def _attention_cause(d: AttentionDiagnosis) -> tuple[str, str]:
    """(why, what to do) for one cause of a slow attention kernel (attention_cost.AttentionDiagnosis)."""
    s, backend = d.shape, _BACKENDS.get(d.backend, d.backend)
    if d.cause == "fp32":
        return (
            "ran the memory-efficient kernel on fp32 q, k, v: flash and cuDNN take only fp16/bf16, and in fp32"
            " the efficient kernel does each multiply as three TF32 products to keep fp32's accuracy",
            _BF16
            + ": SDPA then runs the flash or cuDNN kernel on the 16-bit tensor cores (TF32 settings do not"
            " reach SDPA's kernels)",
        )
    if d.cause == "mask":
        return (
            f"were given an explicit attn_mask, so the {backend} kernel ran (flash takes no mask): it reads the"
            " mask and computes every (query, key) pair, the masked ones too",
            "if the mask is causal, pass is_causal=True and no attn_mask: flash or cuDNN then skip the masked"
            " half of the pairs; a padding mask: pack the sequences without padding (nested tensors, or"
            " flash_attn's varlen functions)",
        )
    if d.cause == "head_dim":
        have, kernel = d.dims
        heads = f"{s.heads * have // kernel if s.heads * have % kernel == 0 else 'fewer'} heads of {kernel}"
        if d.backend == "cudnn":
            return (
                f"have head_dim {have}, which cuDNN runs in a kernel whose tile is {kernel} wide in head_dim (the"
                f" tile in the kernel's name): {fmt_pct(1 - d.work)} of its tensor-core work is on padding",
                f"give the heads a head_dim the kernel's tile fits: keeping heads × head_dim, e.g. {heads}, or"
                " a smaller head_dim that cuDNN tiles exactly, such as 64 or 128",
            )
        sizes = ", ".join(str(k) for k in FLASH_HEAD_DIMS)
        return (
            f"have head_dim {have}, which flash runs in its {kernel}-wide kernel (it is built for {sizes}):"
            f" {fmt_pct(1 - d.work)} of its tensor-core work is on padding",
            f"give the heads a head_dim flash is built for ({sizes}): keeping heads × head_dim, e.g. {heads}",
        )
    if d.cause == "short":
        if len(d.dims) == 2:
            tiles, sms = d.dims
            return (
                f"have {tiles} query tiles (batch × heads × seq/64) for {sms} SMs: most SMs have no work",
                "give each call more work: a larger batch, or several sequences packed into one call",
            )
        return (
            f"attend over only {d.dims[0]} keys: one tile of keys, so loading Q and writing the output,"
            " not the matmuls, take the kernel's time",
            "give each call more work (a larger batch, or sequences packed into longer ones); for decoding,"
            " a KV cache read by a kernel built for it (flash_attn_with_kvcache)",
        )
    if d.cause == "not_flash":
        return (
            "ran the memory-efficient kernel on a call flash takes (16-bit, no mask, equal head dims up to 256)",
            "flash is turned off (torch.nn.attention.sdpa_kernel, torch.backends.cuda.enable_flash_sdp(False))"
            " or an input is not contiguous in its last dimension: allow SDPBackend.FLASH_ATTENTION and pass"
            " q, k, v with stride 1 in head_dim",
        )
    why = {
        "dtype": (
            f"{dtype_word(s.dtype)} inputs, which no fused kernel takes (fp16, bf16 and fp32 only)",
            _BF16,
        ),
        "fp32_align": (
            f"fp32 inputs with head_dim {s.head_dim}, not a multiple of 4 (the efficient kernel's fp32"
            " alignment; flash and cuDNN take no fp32)",
            _BF16 + ", or pad head_dim to a multiple of 8 (zeros in q, k and v, the output sliced back)",
        ),
        "head_dim": (
            f"head_dim {s.head_dim}, not a multiple of 8"
            + (
                " with an attn_mask (flash takes no mask"
                if d.mask
                else " (flash takes equal head dims for q, k and v up to 256"
            )
            + ", the efficient kernel needs a multiple of 8)",
            "pad head_dim to a multiple of 8 (zeros in q, k and v, the output sliced back)"
            + (", and if the mask is causal pass is_causal=True instead" if d.mask else ""),
        ),
    }.get(
        d.why,
        (
            "inputs a fused kernel takes by their recorded dtype, shapes and mask, so it was turned off"
            " (torch.nn.attention.sdpa_kernel, enable_flash_sdp / enable_mem_efficient_sdp) or an input is"
            " a view: not contiguous in head_dim, or starting off 16-byte alignment (a slice of a packed qkv)",
            "allow the fused backends and pass contiguous q, k, v (.contiguous()); torch.backends.cuda."
            "can_use_flash_attention(params, debug=True) prints why flash refused",
        ),
    )
    return (
        f"ran SDPA's math fallback (separate matmul, softmax and matmul kernels, the scores in memory): {why[0]}",
        why[1],
    )


@facts_words.register
def _slow_attention(c: SlowAttentionFacts, f: Finding) -> Words:
    p, u, d = c.per, unit(c.per), c.diagnosis
    shape = c.shape or "shapes unknown"
    rates = f" at {_rates(c.rates)}" if c.rates is not None else ""
    target = (
        f"at the {fmt_pct(c.target)} of the roof this run's other attention kernels reach"
        if c.measured
        else f"at {fmt_pct(c.target)} of the 16-bit roof (assumed: between FlashAttention-2's 35% and -3's 75% on"
        " an H100; this run's own attention kernels do not show a rate)"
    )
    if d is None:
        msg = (
            f"{c.kernels / p.per:.3g} attention kernels per {u} on {where(f.lines)} ({shape};"
            f" {_names(c.kernel_names)}) take {fmt_ns(c.gpu_ns)} per {u}{rates}, cause unknown: 16-bit, no"
            f" mask, a head_dim the kernels are built for, enough work per call; {target}:"
            f" ~{fmt_ns(f.saving_ns)} per {u} less"
        )
        return Words(msg, UNKNOWN_ACTION)
    why, act = _attention_cause(d)
    if d.cause == "head_dim":
        cure = f"at head_dim {d.dims[1]} the same kernels would do no wasted work"
    elif d.cause == "math":
        cure = f"one fused kernel, {target}, would take {fmt_ns(c.cure_ns)}"
    else:
        cure = f"the cure's kernel, {target}, would take {fmt_ns(c.cure_ns)}"
    causal = ""
    if c.causal_cure_ns is not None:
        skipped = 1 - c.causal_cure_ns / c.cure_ns if c.cure_ns else 0.0
        causal = (
            f"; if the mask is causal, is_causal=True also skips its masked {fmt_pct(skipped)} of the pairs:"
            f" ~{fmt_ns(max(0.0, c.gpu_ns - c.causal_cure_ns))} per {u} less"
        )
    msg = (
        f"{c.kernels / p.per:.3g} attention kernels per {u} on {where(f.lines)} ({shape};"
        f" {_names(c.kernel_names)}) {why}: they take {fmt_ns(c.gpu_ns)} per {u}{rates}; {cure}:"
        f" ~{fmt_ns(f.saving_ns)} per {u} less{causal}"
    )
    return Words(msg, act)


# ---------------------------------------------------------------------------------------------- compile

_ADVICE = (
    (
        ("print", "logging", "warn"),
        "move the print or logging out of the compiled function (or behind "
        "`if not torch.compiler.is_compiling()`)",
    ),
    (
        ("item", "data-dependent", "tolist", "nonzero", "unbacked"),
        "keep the value a tensor (torch.where, a mask) "
        "instead of reading it on the CPU, or set torch._dynamo.config.capture_scalar_outputs = True",
    ),
    (("numpy", "np."), "use torch ops instead of NumPy inside the compiled function"),
)
_GENERIC = (
    "make the call traceable or move it out of the compiled function; torch._dynamo.explain(fn)(*args) lists "
    "every break with its reason"
)
_RECOMPILE_ADVICE = (
    (
        ("size", "shape", "stride", "dim"),
        "a tensor's shape changes between calls: mark that dimension dynamic "
        "(torch._dynamo.mark_dynamic(x, dim)) or pad the inputs to a few fixed sizes",
    ),
    (
        ("dtype", "device", "requires_grad", "grad_mode"),
        "keep the inputs' dtype, device and requires_grad the "
        "same on every call (or compile one function per variant)",
    ),
)
_RECOMPILE_GENERIC = (
    "a Python value the function reads changed between calls (an int, a flag, a list's length): pass it as a "
    "tensor or keep it constant; TORCH_LOGS=recompiles prints every failed guard"
)


def _advice(reason: str, table: tuple[tuple[tuple[str, ...], str], ...], generic: str) -> str:
    low = reason.lower()
    return next((a for keys, a in table if any(k in low for k in keys)), generic)


@facts_words.register
def _graph_break(c: GraphBreakFacts, f: Finding) -> Words:
    at = f.lines[0]
    msg = (
        f"torch.compile breaks the graph at {at} ({c.compiles}× while compiling): {c.reason or 'no reason given'}"
        " — the code before and after it runs as separate graphs, with Python in between every step"
    )
    return Words(msg, _advice(c.reason, _ADVICE, _GENERIC))


@facts_words.register
def _recompile(c: RecompileFacts, f: Finding) -> Words:
    guards = "; ".join(c.guards) or "no reason given"
    msg = (
        f"torch.compile compiled the function at {f.lines[0]} again {c.compiles}× (failed "
        f"guards: {guards}) — compile time each time, and past recompile_limit it runs uncompiled"
    )
    return Words(msg, _advice(guards, _RECOMPILE_ADVICE, _RECOMPILE_GENERIC))


# ---------------------------------------------------------------------------------------------- slow steps


@facts_words.register
def _slow_steps(c: SlowStepsFacts, f: Finding) -> Words:
    s = c.steps
    shown = ", ".join(str(k) for k in s.slow[:4]) + (
        f" and {len(s.slow) - 4} more" if len(s.slow) > 4 else ""
    )
    at = f"they recur every {s.period} steps (steps {shown})" if s.period else f"steps {shown}"
    if s.gpu_bound:
        return _gpu_bound_steps(c, at)
    if s.host_ahead:  # the GPU's work a step, not the median step, is what the slow ones are measured against
        msg = (
            f"{len(s.slow)} of {s.steps} steady steps took over {SLOW:g}× the GPU's work a step "
            f"({fmt_ns(s.typical_ns)}, more than the median step on the CPU's clock, {fmt_ns(s.median_ns)}: the "
            f"host runs ahead of the GPU), up to {fmt_ns(max(s.slow_ns))}; {at}. The mean step is "
            f"{fmt_ns(s.lost_ns)} ({fmt_pct(s.lost_ns / s.typical_ns)}) longer than the GPU's work a step, time "
            "that no line's figures include"
        )
    else:
        msg = (
            f"{len(s.slow)} of {s.steps} steady steps took over {SLOW:g}× the median step ({fmt_ns(s.median_ns)}), "
            f"up to {fmt_ns(max(s.slow_ns))}; {at}. The mean step is {fmt_ns(s.lost_ns)} "
            f"({fmt_pct(s.lost_ns / s.median_ns)}) longer than the median, time that no line's figures include: "
            "they describe the median step"
        )
    if s.period:
        act = (
            f"Look at what runs every {s.period} steps (logging that calls .item() or .cpu(), evaluation, "
            "checkpointing): do it less often, or without waiting for the GPU."
        )
    else:
        act = (
            "Slow steps at no fixed spacing come from outside the step's own work: Python's garbage collector "
            "(gc.freeze() after set-up), a data loader falling behind (more workers, pin_memory=True), the "
            "caching allocator growing, or other processes on the machine. `brrrtui record --stream` keeps "
            "every kernel of those steps."
        )
    if c.streamed:  # the stream's buffer flushes cost GPT-2 small on an H200 2.4-2.9 % (docs/performance.md)
        act = (
            "This run was recorded with --stream, whose buffer flushes can slow steps themselves: record "
            "without it to see the script's own. " + act
        )
    return Words(msg, act)


def _gpu_bound_steps(c: SlowStepsFacts, at: str) -> Words:
    """A GPU-bound loop whose host runs ahead: long steps on the CPU's clock, no time lost."""
    s = c.steps
    longest = (
        f"; the longest, over {SLOW:g}× the GPU's work a step, wait for it to drain: {at}, up to "
        f"{fmt_ns(max(s.slow_ns))}"
        if s.slow
        else ""
    )
    msg = (
        f"The loop is GPU-bound and the host runs ahead of the GPU: the GPU works {fmt_ns(s.typical_ns)} a step "
        f"(in the steady windows), more than the median step on the CPU's clock ({fmt_ns(s.median_ns)}), so steps "
        "that only queue kernels are short and steps that wait for the GPU (a full launch queue, a sync) are "
        f"long{longest}. The real step is the mean over {s.steps} steady steps, {fmt_ns(s.real_step_ns)}: figures "
        f"given for the median step (the steady state's step, the unprofiled step) understate it by "
        f"{fmt_ns(s.real_step_ns - s.median_ns)} ({fmt_pct((s.real_step_ns - s.median_ns) / s.median_ns)})"
    )
    act = (
        "No time is lost in the long steps: the GPU is busy through them, so gc.freeze() or more data-loader "
        "workers would not make them shorter; only less GPU work a step does (the other findings). Time a step "
        "on the CPU's clock after torch.cuda.synchronize() to see its real length."
    )
    return Words(msg, act)


# ---------------------------------------------------------------------------------------------- library knobs

_KNOBS = {
    Knob.HF_GELU: (
        'Hugging Face: set the config\'s activation to "gelu_pytorch_tanh" (GPT-2 family: '
        'GPT2Config(activation_function="gelu_pytorch_tanh"); BERT family: hidden_act="gelu_pytorch_tanh"): '
        "the same tanh approximation in one kernel"
    ),
    Knob.HF_ATTENTION: (
        'Hugging Face: load the model with attn_implementation="sdpa" (or "flash_attention_2"): '
        "one fused attention kernel instead of matmul, softmax, dropout and matmul"
    ),
    Knob.HF_VOCAB: (
        "Hugging Face: model.resize_token_embeddings(model.config.vocab_size, pad_to_multiple_of=64) pads the "
        "embedding and the output layer"
    ),
    Knob.CHANNELS_LAST: (
        "{lib}: model = model.to(memory_format=torch.channels_last) and feed inputs converted the same way "
        "(x.to(memory_format=torch.channels_last)): the convolutions then run NHWC without layout conversions"
    ),
}


def knob(place: Place | None) -> str | None:
    """The library's own setting that fixes the finding placed at `place`, in words; None without one."""
    if place is None or place.knob is None:
        return None
    return _KNOBS[place.knob].format(lib=place.library or "")
