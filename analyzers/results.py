"""Typed results of the analysis passes: what `analyzers.analyze.analyze()` returns and the UI/report read.

Per-kernel and per-gap facts are numpy columns (a run can hold a million kernels); per-name, per-line and
per-finding facts are small lists of frozen records. Unknown numbers are None (NaN in float columns).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import Enum
from typing import TYPE_CHECKING

import numpy as np

from analyzers.cost.rates import Rates, achieved
from analyzers.findings.facts import Facts, Knob
from analyzers.link.links import Links
from analyzers.phases.run_phases import Phase, TracePhases
from brrrtui.contract.model import Peaks, SourceLine, Table, Trace

if TYPE_CHECKING:
    from analyzers.comm.collectives import Communication
    from analyzers.comm.ranks import Straggler
    from analyzers.phases.slow_steps import SlowSteps
    from analyzers.totals.modules import ModuleTree


class Regime(Enum):
    COMPUTE = "compute"
    MEMORY = "memory"
    OVERHEAD = "overhead"
    COMMUNICATION = "communication"  # NCCL kernels: no roofline verdict (analyzers.comm.collectives)


REGIME_CODES = {Regime.COMPUTE: 0, Regime.MEMORY: 1, Regime.OVERHEAD: 2, Regime.COMMUNICATION: 3}
REGIMES_BY_CODE = {v: k for k, v in REGIME_CODES.items()}


class GapCause(Enum):
    HOST = "host"  # Python, dispatch, kernel launches: the CPU was busy issuing work
    SYNC = "sync"  # the CPU waited for the GPU (.item(), .cpu(), cudaStreamSynchronize, ...) then refilled it
    H2D = "h2d"  # host-to-device copies
    DATA = "data"  # data loading (DataLoader __next__, workers)
    OTHER = "other"  # nothing recorded on the CPU explains it (profiler, GC, outside any op)
    WAIT = "wait"  # the main thread waited off the CPU outside torch: time.sleep, I/O, a lock, a queue
    COMMUNICATION = "communication"  # inside a CPU-side collective (gloo, MPI, UCC): waiting for the other ranks


GAP_CAUSE_CODES = {c: i for i, c in enumerate(GapCause)}


@dataclass(frozen=True)
class KernelStat:
    """One kernel name over the analysed windows."""

    name: str
    calls: int
    gpu_ns: int
    regime: Regime
    flops: float | None
    bytes: float | None
    achieved_flops_per_s: float | None
    achieved_bytes_per_s: float | None
    roof_fraction: float | None  # achieved / the roof that applies at its intensity
    uses_tensor_cores: bool | None
    fits_in_l2: bool | None


@dataclass(frozen=True)
class LineStat:
    """One line of the user's code (library frames are folded into the calling line)."""

    line: SourceLine
    line_id: int
    gpu_ns: int
    gpu_ns_by_regime: dict[Regime, int]
    cpu_ns: int  # time inside torch calls issued from this line (on its thread)
    idle_ns: int  # GPU idle time attributed to this line, as an unprofiled step would have it (estimate)
    flops: float | None
    bytes: float | None
    kernels: int  # kernel launches
    regime: Regime  # dominant regime (idle counts as overhead); meaningless without GPU activity (has_gpu)
    per_step_gpu_ns: float | None  # gpu_ns divided by the steps analysed, when steps are known
    idle_profiled_ns: int = -1  # the idle measured inside the windows (-1: not given)
    sampled_ns: int = 0  # main-thread time on the line, from the line sampler (inside windows)
    # CPU-side time on the line: the larger of cpu_ns and sampled_ns (the sampler also sees a sleep, a Python loop)
    host_ns: int = 0
    per_step_host_ns: float | None = None  # host_ns divided by the steps analysed, when steps are known


@dataclass(frozen=True)
class Breakdown:
    """A wall span split into its components; compute + memory + communication + overhead == span.
    communication_ns is the exposed part of the collectives (no compute or memory kernel runs beside them);
    the part they hide under runs counts as compute or memory and is given apart as communication_hidden_ns."""

    span_ns: int
    compute_ns: int
    memory_ns: int
    overhead_ns: int
    idle_ns: int | None = None  # the part of overhead_ns with no GPU work at all (the rest: overhead kernels)
    communication_ns: int = 0  # collectives running while no compute or memory kernel does (exposed)
    communication_hidden_ns: int = 0  # collectives running beside compute or memory kernels (not in the sum)

    @property
    def busy_ns(self) -> int:
        """GPU time that the profiler does not slow: compute, memory and exposed communication."""
        return self.compute_ns + self.memory_ns + self.communication_ns

    def fraction(self, regime: Regime) -> float:
        by_regime = {
            Regime.COMPUTE: self.compute_ns,
            Regime.MEMORY: self.memory_ns,
            Regime.OVERHEAD: self.overhead_ns,
            Regime.COMMUNICATION: self.communication_ns,
        }
        value = by_regime[regime]
        return value / self.span_ns if self.span_ns else 0.0


@dataclass(frozen=True)
class OverheadCorrection:
    """The profiler slows steps it records; unprofiled step times give the truer overhead share."""

    profiled_step_ns: float | None
    unprofiled_step_ns: float | None
    raw_overhead_fraction: float
    corrected_overhead_fraction: float | None


class FindingKind(str, Enum):
    """What a finding is about. A str: it compares equal to, prints and serialises as its value."""

    FUSION = "fusion"
    ATTENTION = "attention"
    OVERHEAD = "overhead"
    SMALL_KERNELS = "small_kernels"
    SYNC = "sync"
    H2D = "h2d"
    DATA = "data"
    NO_TENSOR_CORES = "no_tensor_cores"
    OPTIMIZER = "optimizer"
    SLOW_GEMM = "slow_gemm"
    CONV_LAYOUT = "conv_layout"
    GRAPH_BREAK = "graph_break"
    RECOMPILE = "recompile"
    COMMUNICATION = "communication"  # exposed collectives (analyzers.comm.collectives)
    CPU_WAIT = "cpu_wait"  # the training thread waits off the CPU (a sleep, I/O) while the GPU idles
    SLOW_STEPS = "slow_steps"  # steady steps far slower than the median (analyzers.phases.slow_steps)

    def __str__(self) -> str:
        return str(self.value)

    def __format__(self, spec: str) -> str:
        return format(str(self.value), spec)


@dataclass(frozen=True)
class Place:
    """Where in the model a finding's kernels run (analyzers.findings.places): the module and library line the
    user reads, and the library's own setting that fixes it, if it has one."""

    module: str  # collapsed module path (`transformer.h.*.mlp.act`), or the root's class
    module_kind: str  # its class
    instances: int  # modules folded into that path
    library_line: SourceLine | None  # innermost model-library line (transformers, torchvision …)
    knob: Knob | None = None  # e.g. Hugging Face's activation_function="gelu_pytorch_tanh"
    library: str | None = None  # the library whose setting `knob` is (`transformers`)


@dataclass(frozen=True)
class Finding:
    """What to change, where, and roughly what it saves. Its words (the verdict and the action) are
    brrrtui.present.finding_words' rendering of `facts`."""

    kind: FindingKind
    lines: tuple[SourceLine, ...]
    saving_ns: float | None  # estimated saving per step (or per window when steps are unknown)
    facts: Facts  # the numbers, names and causes behind it (analyzers.findings.facts, one class per finder)
    kernels: tuple[int, ...] = ()  # gpu rows involved (for drill-down)
    window: int = -1
    place: Place | None = None  # the module and library line of its kernels
    waits_for: Straggler | None = None  # communication: the run's straggler this rank waits for


@dataclass
class Analysis:
    trace: Trace
    links: Links
    peaks: Peaks
    # per gpu row
    kernel_regime: np.ndarray  # int8 codes of REGIME_CODES
    kernel_flops: np.ndarray  # float64, NaN unknown
    kernel_bytes: np.ndarray  # float64, NaN unknown
    # gaps: columns window, stream, start_ns, dur_ns, cause (GAP_CAUSE_CODES), line (line id or -1), next_row
    # (the gpu row whose start ends the gap, or -1). Device-wide (stream -1): those of every cause but
    # COMMUNICATION sum to breakdown idle_ns; the COMMUNICATION ones count in breakdown communication_ns.
    gaps: Table
    kernels: list[KernelStat]
    lines: list[LineStat]
    findings: list[Finding]
    breakdown: Breakdown  # the whole analysed span (all windows)
    window_breakdowns: dict[int, Breakdown]
    overhead: OverheadCorrection
    steps_analysed: int
    notes: list[str] = field(default_factory=list)
    # per-kernel detail columns; None where a caller builds an Analysis without them (the UI then shows less)
    kernel_tensor_cores: np.ndarray | None = None  # int8 per gpu row: 1 tensor cores, 0 SIMT, -1 unknown
    kernel_unit_peak_flops_per_s: np.ndarray | None = None  # float64 per gpu row: its FLOP roof (NaN unknown)
    kernel_fits_in_l2: np.ndarray | None = None  # int8 per gpu row: 1/0/-1
    # bool per gpu row: the GPU waited for the kernel and it ran shorter than the CPU's launch interval
    kernel_launch_bound: np.ndarray | None = None
    per_launch_ns: float | None = None  # median idle between consecutive kernels of a stream
    windows: tuple[int, ...] = ()  # the windows analysed
    phase: Phase = Phase.UNKNOWN  # the phase those windows belong to (the steady state when there is one)
    phases: TracePhases | None = None  # every window's phase and the run's
    modules: ModuleTree | None = None  # time per nn.Module (None: no kernel ran inside one)
    library_lines: list[LineStat] = field(default_factory=list)  # GPU time per model-library line
    communication: Communication | None = None  # collectives: time, exposed, bytes (None: none recorded)
    # the steady steps' durations against the GPU's work a step (None: under 3 steady steps outside windows)
    slow_steps: SlowSteps | None = None

    @property
    def host_ahead(self) -> bool:
        """The host runs ahead of a GPU-bound loop: its median step only queued work (phases/slow_steps.py)."""
        return self.slow_steps is not None and self.slow_steps.host_ahead

    @property
    def real_step_ns(self) -> float | None:
        """The steady step's real time: the mean where the host runs ahead, else the median steady step."""
        if self.slow_steps is not None and self.host_ahead:
            return self.slow_steps.real_step_ns
        return self.phases.run.steady_step_ns if self.phases is not None else None

    @property
    def has_gpu(self) -> bool:
        """The analysed windows hold GPU activity. Without it there are no regimes, idle or GPU findings: the
        lines' CPU-side time (LineStat.host_ns) is what there is to show."""
        return self.trace.has_gpu

    def kernel_rates(self, rows: np.ndarray | slice = slice(None)) -> Rates | None:
        """Achieved FLOP/s, bytes/s and roof fraction of gpu `rows` (default: all), as the roofline worked
        them out (analyzers.cost.rates); None without the per-row FLOP roofs."""
        if self.kernel_unit_peak_flops_per_s is None:
            return None
        bw = np.nan if self.peaks.bytes_per_s is None else self.peaks.bytes_per_s
        return achieved(
            self.kernel_flops[rows],
            self.kernel_bytes[rows],
            self.trace.gpu.dur_ns[rows],
            self.kernel_unit_peak_flops_per_s[rows],
            bw,
        )
