"""The facts a finding is made of: per finding kind, the numbers, names, shapes and cause codes that back it.

A finder measures; `brrrtui.present.finding_words` turns these facts into the finding's verdict and action.
Times are in ns and, where the field says so, already per step (or per window when the run has no steps);
raw run totals are divided by `Per.per` when worded. Nothing here is English: names are the trace's own
(ops, kernels, collectives, Python reasons Dynamo gave), causes are short codes.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import Enum
from typing import TYPE_CHECKING

from analyzers.cost.attention_cost import AttentionDiagnosis
from analyzers.cost.gemm_shapes import Diagnosis
from brrrtui.contract.model import SourceLine

if TYPE_CHECKING:
    from analyzers.phases.slow_steps import SlowSteps


class Knob(str, Enum):
    """A model library's own setting that fixes a finding (findings/library_knobs.py)."""

    HF_GELU = "hf_gelu"  # transformers: the config's activation "gelu_pytorch_tanh"
    HF_ATTENTION = "hf_attention"  # transformers: attn_implementation="sdpa"
    HF_VOCAB = "hf_vocab"  # transformers: resize_token_embeddings(..., pad_to_multiple_of=64)
    CHANNELS_LAST = "channels_last"  # torchvision, timm: the model and inputs channels_last


@dataclass(frozen=True)
class Per:
    """How run totals become per-step figures: divide by `per`, steps when `by_step` (else windows)."""

    per: int
    by_step: bool
    step_ns: float  # the analysed span per step (or window)
    idle_scale: float = 1.0  # profiled idle -> idle in unprofiled steps (Context.idle_scale)


@dataclass(frozen=True)
class Facts:
    """Base of every finding's facts."""


@dataclass(frozen=True)
class FusionFacts(Facts):
    per: Per
    kernels: int  # kernels in the chain
    memory_bound: int  # of them memory-bound
    instruction_bound: int  # of them bound by instructions on the SIMT units (compute); the others launch-bound
    ops: tuple[str, ...]  # the ops' base names, in order
    occurrences: int  # times the chain ran (run total)
    bytes_now: float | None  # bytes it moves (run total)
    achieved_bytes_per_s: float | None
    peak_bytes_per_s: float | None
    bytes_saved: float  # run total
    launches_saved: float  # per step
    pattern: str | None  # a named fused op (fusion/patterns.py), or None
    function: str | None  # the function of its first line
    scope: bool  # the chain spans a compiled function's matmuls (fusion/scope.py)
    dynamic: DynamicShapes | None = None  # data-dependent shapes in that function: static first, then compile


@dataclass(frozen=True)
class AttentionFacts(Facts):
    per: Per
    middle_kernels: int  # memory-bound kernels between the two matmuls, per occurrence
    score_bytes: float  # bytes they move (run total)


@dataclass(frozen=True)
class TensorCoreFacts(Facts):
    per: Per
    gpu_ns: float  # the fp32 matmuls' time (run total)
    achieved_flops_per_s: float | None
    fp32_flops_per_s: float | None
    tf32_flops_per_s: float
    tensor_flops_per_s: float | None


@dataclass(frozen=True)
class OptimizerFacts(Facts):
    per: Per
    optimizer: str | None  # the optimizer's class (`Adam`), None when no name was recorded
    kernels: int  # kernels inside Optimizer.step (run total)
    step_gpu_ns: float  # their GPU time per step
    median_ns: float  # median kernel duration


@dataclass(frozen=True)
class DynamicShapes:
    """Ops that size their output from the data (findings/idle.py DATA_DEPENDENT_OPS)."""

    calls: int  # run total
    ops: tuple[str, ...]  # their outermost ops' names, most called first
    lines: tuple[SourceLine, ...]


@dataclass(frozen=True)
class OverheadFacts(Facts):
    per: Per
    raw_fraction: float  # idle while issuing + overhead kernels, of the profiled time
    corrected_fraction: float | None  # the same corrected with unprofiled steps
    unprofiled_step_ns: float | None
    host_idle_ns: int  # run total
    kernels: int  # run total
    median_kernel_ns: float | None
    per_launch_ns: float | None
    dynamic: DynamicShapes | None = None  # CUDA graphs need these made static first


@dataclass(frozen=True)
class SmallKernelsFacts(Facts):
    per: Per
    launch_bound: int  # launch-bound kernels (run total)
    kernels: int  # all kernels (run total)
    launch_bound_ns: int  # their GPU time (run total)
    launch_interval_ns: float | None  # the CPU's median launch interval
    waited_ns: float  # idle in front of them, per step
    lined: float  # share of them with a known line
    dynamic: DynamicShapes | None = None  # as OverheadFacts.dynamic


@dataclass(frozen=True)
class HostCopies:
    """The run's host-to-device copies."""

    nbytes: float  # run total
    seconds: float  # their time
    pageable: bool  # some are from pageable memory


@dataclass(frozen=True)
class GapFacts(Facts):
    """Idle gaps of one cause (the finding's kind: sync, h2d, cpu_wait, data) after one line."""

    per: Per
    gaps: int  # run total
    idle_ns: float  # per step, as profiled
    copies: HostCopies | None = None  # h2d: the copies' size and rate
    overhead_cap_ns: float | None = None  # cpu_wait: unprofiled steps' whole overhead, where less than idle_ns


@dataclass(frozen=True)
class CollectiveWaitFacts(Facts):
    """GPU idle inside CPU-side collectives of one kind."""

    per: Per
    idle_ns: float  # per step
    ops: tuple[str, ...]  # the collectives' op names, sorted


@dataclass(frozen=True)
class CommunicationFacts(Facts):
    """Exposed GPU collectives (analyzers.comm.collectives)."""

    per: Per
    exposed_ns: int  # run total
    span_ns: int
    hidden_ns: int  # run total
    by_kind: tuple[tuple[str, float], ...]  # (collective kind, exposed ns run total), largest first


@dataclass(frozen=True)
class RateSpan:
    """Achieved FLOP/s and roof fractions of a set of kernels: their range and the median roof."""

    flops_lo: float
    flops_hi: float
    peak_flops_per_s: float
    fraction_lo: float
    fraction_hi: float


@dataclass(frozen=True)
class SlowGemmFacts(Facts):
    """Matmul or convolution kernels below their roof for one diagnosed cause."""

    per: Per
    diagnosis: Diagnosis  # the group's first
    conv: bool
    shapes: tuple[str, ...]  # distinct shapes of the group's diagnoses
    fallback: bool  # some ran as pre-Hopper kernels on a Hopper GPU
    kernel_names: tuple[str, ...]  # distinct kernel names, in order
    kernels: int  # run total
    gpu_ns: float  # per step
    padded_work: float  # the padded kernel's FLOPs over today's
    rates: RateSpan
    target: float  # the reference roof fraction
    measured: bool = True  # the target is a rate this run's matmuls reach (not the default nor the floor)
    library_pads: bool = False  # the library pads these convolutions' channels itself (efficiency._library_padding)
    padding_kernels: int = 0  # run total of its padding kernels (none: the NCHW->NHWC conversion pads)
    padding_ns: float = 0.0  # their time per step: the saving, when the library pads
    padding_names: tuple[str, ...] = ()


@dataclass(frozen=True)
class UnknownGemmFacts(Facts):
    """Matmul or convolution kernels far below their roof with no cause found: the evidence checked."""

    per: Per
    conv: bool
    shapes: tuple[str, ...]
    kernel_names: tuple[str, ...]
    kernels: int  # run total
    gpu_ns: float  # per step
    rates: RateSpan
    blocks: tuple[int, ...]  # distinct grid sizes, ascending
    sms: int | None
    target: float
    measured: bool = True  # as SlowGemmFacts.measured


@dataclass(frozen=True)
class ConvFallback:
    """Convolutions run as pre-Hopper GEMMs on NCHW data."""

    kernels: int  # run total
    kernel_names: tuple[str, ...]
    spatial: tuple[int, ...]  # H×W values not a multiple of 8, ascending
    gpu_ns: float  # per step
    rates: RateSpan


@dataclass(frozen=True)
class ConvLayoutFacts(Facts):
    per: Per
    convolutions: int  # run total
    layout_kernels: int  # run total
    layout_names: tuple[str, ...]
    layout_ns: float  # per step
    fallback: ConvFallback | None
    target: float


@dataclass(frozen=True)
class GraphBreakFacts(Facts):
    compiles: int  # times Dynamo met the break while compiling
    reason: str  # Dynamo's reason, "" when none


@dataclass(frozen=True)
class RecompileFacts(Facts):
    compiles: int  # recompilations of the function
    guards: tuple[str, ...]  # the failed guards, distinct, in order


@dataclass(frozen=True)
class SlowStepsFacts(Facts):
    steps: SlowSteps
    streamed: bool  # recorded with --stream, whose buffer flushes can slow steps


@dataclass(frozen=True)
class SlowAttentionFacts(Facts):
    """Attention kernels (SDPA's fused kernels, or its math fallback's matmul and softmax kernels) far below
    their roof for one cause and call shape (findings/efficiency.py)."""

    per: Per
    diagnosis: AttentionDiagnosis | None  # None: cause unknown
    shape: str  # the call's sizes (AttentionShape.text), "" when not recorded
    ops: tuple[str, ...]  # the ops' base names, in order
    kernel_names: tuple[str, ...]  # distinct, in order
    kernels: int  # run total
    gpu_ns: float  # per step
    rates: RateSpan | None  # None: no FLOP count for them
    target: float  # the roof fraction the cure is held to
    measured: bool  # the target is a rate this run's own attention kernels reach
    cure_ns: float  # the predicted time after the cure, per step
    causal_cure_ns: float | None = None  # mask over every pair: the time after is_causal=True, per step
