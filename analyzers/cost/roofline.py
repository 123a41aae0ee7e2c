"""FLOPs, bytes and the roofline verdict of every GPU row.

Where a kernel's cost comes from::

    op   aten::conv2d                 (profiler-recorded flops, when `with_flops`)
    op     aten::cudnn_convolution    <- nearest op with a cost: shapes + dtypes -> FLOPs, bytes (cost/opcost.py)
    launch   cudaLaunchKernel ...
    GPU            [init_workspace][ sm90_xmma_fprop .............. ]   <- the op's cost split by duration

A kernel takes the cost of the nearest op at or above its launching op that has one (so the bias `add_` inside
`linear` costs its own bytes, not the matmul's). When that op launched several kernels, its FLOPs and bytes are
split among them in proportion to duration: the op's intensity is shared by all of them, and helper kernels
(workspace init, split-K reduce) get a small share because they are short. cuDNN's layout conversions
(`nchwToNhwcKernel`) take no FLOPs, only the bytes they move (kernel_costs.split_costs). A profiler-recorded
`flops` on the op itself, or on an ancestor of the same family (`aten::conv2d` above `cudnn_convolution`, which
knows stride and padding), wins over our formula. Memcpy/memset rows use their own `bytes` (device-to-device
copies count read + write).

Which roof applies (tensor cores or not) is not recorded; the rule, per kernel:

- matmul-family op (mm, conv, attention) with bf16/fp16/fp8 operands: tensor cores (bf16 roof);
- fp32 operands: TF32 tensor cores (half the bf16 roof) when the kernel name says so (`tf32`, `s1688`, `s16816`,
  `wgmma`, `hmma`, `tensorop`, `nvjet`, `bf16`/`f16`), otherwise the SIMT fp32 roof (`sgemm`, `f32f32_f32f32`);
- no linked op: the same name hints; pointwise/reduction kernels use the SIMT fp32 roof.

The verdict, per kernel (the article's three regimes)::

    dur <= 5 us and achieved < 5 % of both roofs (or unknown)       -> OVERHEAD (launch-bound: the GPU finishes
                                                                        before the CPU can issue the next one)
    FLOPs/byte >= ridge = unit peak FLOP/s / peak bytes/s             -> COMPUTE   (the FLOPs the unit does:
                                                                        a convolution's padded channels
                                                                        included, opcost.OpCost.padding)
    FLOPs/byte <  ridge                                               -> MEMORY
    intensity unknown: matmul/conv/attention op or GEMM-like name     -> COMPUTE, else MEMORY
    CUTLASS tensor-core GEMM with operands aligned under 16 bytes     -> MEMORY (on chip: narrow loads
        (`_align1`, `_align2`: gemm_shapes.narrow_load_bytes)             through L1/shared bound it, whatever
                                                                        its FLOPs/byte; fusion does not help)
    host<->device memcpy (PCIe, not HBM)                              -> OVERHEAD
    SIMT-bound: a MEMORY kernel off the tensor cores and outside the  -> COMPUTE
        matmul family, running >= SIMT_BOUND_MIN_NS, that moves its
        bytes at under SIMT_BOUND_BYTES_SHARE of the bandwidth (not
        foreach/fused optimizers: their bytes are an estimate)

The SIMT-bound rule: a kernel that streams its bytes is held by DRAM, and reaches most of its bandwidth once it
runs longer than its ramp and tail (a few microseconds). One that runs long at a third of the bandwidth or
less spends its time in instructions, not in waiting for bytes: index math and scattered stores (max-pool's
backward, `cat` of many tensors), reductions across a block (batch-norm statistics, means), the SIMT units'
work. Nsight Compute measures such kernels SM-bound (SM throughput 60-85 %, memory 12-35 %); brrrtui has no SM
counter, so it reads the low bandwidth of a long kernel instead. A latency-bound kernel (neither unit busy) has
the same signature and gets the same verdict: either way, moving fewer bytes would not make it faster. The
threshold was chosen on the hold-out set's disagreements (validation/holdout/RESULTS.md) and checked on the
four workloads scored before it (no kernel of theirs that Nsight Compute calls memory-bound crosses it).

`roof_fraction` = max(achieved FLOP/s / unit peak, achieved bytes/s / peak bandwidth), which equals achieved /
min(peak, intensity x bandwidth), the roof at the kernel's intensity.

**Ceilings that hold.** A roof fraction never reads above 100 % without a reason on the row (`over_roof`):

- bytes come from the level that served them (`bytes_level`). A kernel whose whole working set fits in L2
  (`fits_in_l2`) and that moved its bytes faster than DRAM can was served from L2 (its inputs were written or
  read just before and re-read): its bytes are measured against the L2 bandwidth where the datasheet table
  has one (peaks.DeviceSpec.l2_bytes_per_s), else its fraction is capped at 100 % (OVER_L2). Host<->device
  copies cross PCIe, not HBM: no bandwidth roof, the fraction is unknown;
- any other rate above its roof (a DRAM-sized working set above the bandwidth, FLOP/s above the unit's peak)
  says the roof is below what the GPU reached: a calibration is a median, a datasheet can be conservative.
  The fraction is capped at 100 % and the row marked OVER_PEAK.

**Roofs the run reached** (`reached_rates`, `reached_roofline`). A FLOP roof is raised to the highest rate a
kernel of the analysed windows sustained on its unit (cost/peaks.py: `raise_to_reached`), counting only kernels
whose rate is exact: the kernels of a matmul or convolution op (not attention: its FLOPs depend on masking
the kernel may skip) with recorded shapes, every tensor operand 16-bit float (the bf16 roof) or fp32 (TF32 or
SIMT: fp8 and int8 run at other rates), a kernel of the op's product (not a helper: HELPER_NAME), running
at least REACHED_MIN_NS. A forward convolution counts only with a profiler-recorded FLOP count (the formula
does not know the stride where the next op does not show the output's size), a convolution's backward only in
kernels named dgrad or wgrad (which gradients it computed is then known). A TF32 rate R (the kernel named
`tf32`) raises the tensor roof to R / TF32_OVER_BF16; an fp32 rate raises the SIMT roof only where the kernel
is named SIMT (`sgemm`): an fp32 GEMM of another name may run on TF32 tensor cores at several times the SIMT
rate. An op's FLOPs shared among its kernels by duration give each the op's mean rate, never above the
fastest one's: still a rate the GPU reached. A rate over MEASURED_MAX_SHARE of the device's datasheet figure
is not taken: no dense kernel beats the datasheet, so the FLOPs or the unit are wrong there, not the roof.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

import numpy as np

from analyzers.cost.gemm_shapes import narrow_load_bytes
from analyzers.cost.kernel_costs import GEMM_NAME, HELPER_NAME, OpCosts, cost_ops, recorded_flops, split_costs
from analyzers.cost.op_families import MATMUL_FAMILIES, Family
from analyzers.cost.opcost import OpCost
from analyzers.cost.peaks import MEASURED_MAX_SHARE, datasheet_spec, raise_to_reached
from analyzers.cost.rates import Rates, achieved, roof_fraction
from analyzers.cost.tensor_args import FP32, SIXTEEN_BIT_FLOAT
from analyzers.link.links import Calls
from analyzers.results import REGIME_CODES, Regime
from brrrtui.contract.model import NONE, GpuKind, Peaks, Trace, flag_of

SHORT_NS = 5_000  # kernels at most this long ...
TINY_ROOF_FRACTION = 0.05  # ... reaching under this share of both roofs are launch-bound (OVERHEAD)
TF32_OVER_BF16 = 0.5  # TF32 dense rate / bf16 dense rate (A100, H100, Ada)
SIMT_BOUND_MIN_NS = 20_000  # a kernel at least this long (ramp and tail a small part of it) ...
SIMT_BOUND_BYTES_SHARE = 1 / 3  # ... moving its bytes at under this share of the bandwidth is SIMT-bound
# a kernel raises a roof (reached_rates) only if a call ran at least this long: a GEMM's ramp and tail (its
# first and last waves, a few microseconds) and the timestamps' jitter are then ~1 % of it, and its rate is the
# unit's sustained one, not a burst (the calibration's own matmul, 8192^3 bf16, runs ~1.3 ms)
REACHED_MIN_NS = 100_000

COMPUTE, MEMORY, OVERHEAD = (REGIME_CODES[r] for r in (Regime.COMPUTE, Regime.MEMORY, Regime.OVERHEAD))
DRAM, L2, NO_ROOF = 0, 1, 2  # bytes_level: the bandwidth a row's bytes are measured against
WITHIN, OVER_L2, OVER_PEAK = (
    0,
    1,
    2,
)  # over_roof: why a row's fraction was capped at 100 % (WITHIN: it was not)

_TC_NAME = re.compile(
    r"tf32|s1688|s16816|s884|wgmma|hmma|tensorop|nvjet|bf16|f16|h1688|h16816|h884|e4m3|e5m2|fp8"
)
_SIMT_NAME = re.compile(r"sgemm|f32f32_f32f32|dgemm")
_LOW_PRECISION_NAME = re.compile(r"bf16|f16|e4m3|e5m2|fp8|h1688|h16816|h884|hmma")
_HOST_COPY = ("HtoD", "DtoH", "HtoH", "Pageable", "Pinned")
_FP8_NAME = re.compile(r"e4m3|e5m2|fp8")
_GRAD_NAME = re.compile(r"dgrad|wgrad")
_TF32_NAME = re.compile(r"tf32")
_EXACT_FAMILIES = (Family.MATMUL, Family.CONV, Family.CONV_BACKWARD)  # FLOPs from shapes, no masking
# _RowCosts.operands: every tensor operand of the flops op 16-bit float, every one fp32, or neither/unknown
OPERANDS_16, OPERANDS_32, OPERANDS_OTHER = 1, 0, -1


@dataclass(frozen=True)
class Roofline:
    """Per gpu row columns (float64 NaN / int8 -1 where unknown)."""

    flops: np.ndarray
    bytes: np.ndarray
    regime: np.ndarray  # int8 REGIME_CODES
    tensor_cores: np.ndarray  # int8: 1 tensor cores, 0 SIMT, -1 unknown
    unit_peak_flops_per_s: np.ndarray  # the FLOP roof that applies (NaN unknown)
    dur_ns: np.ndarray  # the trace's gpu.dur_ns (the rates come from it: rates())
    peak_bytes_per_s: float  # NaN unknown
    fits_in_l2: np.ndarray  # int8: 1/0/-1
    family: np.ndarray  # int8 op_families.Family of the costed op (-1: none)
    cost_op: np.ndarray  # op row whose cost was split onto the row (NONE)
    host_copy: np.ndarray  # bool: memcpy to or from the host
    op_costs: OpCosts
    # int8 per row: DRAM, L2 or NO_ROOF, the level its bytes are measured against (module doc); empty: DRAM
    bytes_level: np.ndarray = field(default_factory=lambda: np.zeros(0, np.int8))
    over_roof: np.ndarray = field(
        default_factory=lambda: np.zeros(0, np.int8)
    )  # int8 WITHIN/OVER_L2/OVER_PEAK
    l2_bytes_per_s: float = np.nan  # the L2 roof (NaN unknown)

    def rates(self, rows: np.ndarray | slice = slice(None)) -> Rates:
        """Achieved FLOP/s, bytes/s and roof fraction of `rows` (default: every row), worked out now; the
        fraction capped at 100 % (`over_roof` says why a row was)."""
        flops, nbytes, dur, peak = (
            self.flops[rows],
            self.bytes[rows],
            self.dur_ns[rows],
            self.unit_peak_flops_per_s[rows],
        )
        r = achieved(flops, nbytes, dur, peak, self.peak_bytes_per_s)
        frac = r.roof_fraction if self._all_dram(rows) else self.roof_fraction(rows)
        return Rates(r.flops_per_s, r.bytes_per_s, np.minimum(frac, 1.0))

    def roof_fraction(self, rows: np.ndarray | slice = slice(None)) -> np.ndarray:
        """rates(rows).roof_fraction, with fewer temporaries."""
        level = None if self._all_dram(rows) else self.bytes_level[rows]
        return level_fraction(
            self.flops[rows],
            self.bytes[rows],
            self.dur_ns[rows],
            self.unit_peak_flops_per_s[rows],
            self.peak_bytes_per_s,
            self.l2_bytes_per_s,
            level,
        )

    def _all_dram(self, rows: np.ndarray | slice) -> bool:
        return not len(self.bytes_level) or not bool((self.bytes_level[rows] != DRAM).any())


@dataclass(frozen=True)
class _RowCosts:
    """Per gpu row: the cost of its op(s), before memcpy/memset rows take their own bytes."""

    flops: np.ndarray  # the row's share of its flops op's FLOPs
    bytes: np.ndarray  # the row's share of its bytes op's bytes
    op_bytes: np.ndarray  # the whole bytes op's bytes (its working set)
    family: np.ndarray  # int8 Family of the flops op, else of the bytes op
    low: np.ndarray  # int8 low-precision operands: 1 yes, 0 no, -1 unknown
    padding: np.ndarray  # float64 the unit's work per FLOP counted (OpCost.padding of the flops op; 1 unknown)
    # int8 per row: OPERANDS_16/_32 where the flops op is of _EXACT_FAMILIES with recorded shapes and FLOPs,
    # every tensor operand of one of those precisions (OPERANDS_OTHER elsewhere)
    operands: np.ndarray


def _lower_flags(trace: Trace, pattern: re.Pattern[str]) -> np.ndarray:
    return trace.string_flags(lambda s: pattern.search(s.lower()))


def _row_costs(
    trace: Trace, links: Calls, op_costs: OpCosts, flops_op: np.ndarray, bytes_op: np.ndarray
) -> _RowCosts:
    """Each row's FLOPs and bytes: its op's cost (a profiler-recorded FLOP count wins) split by duration."""
    gpu, ops = trace.gpu, trace.ops
    costs, index = op_costs.costs, op_costs.index
    c_flops = np.array([np.nan if c.flops is None else c.flops for c in costs] + [np.nan])
    c_bytes = np.array([np.nan if c.bytes is None else c.bytes for c in costs] + [np.nan])
    c_fam = np.array([int(c.family) for c in costs] + [-1], dtype=np.int8)
    c_low = np.array([-1 if c.low_precision is None else int(c.low_precision) for c in costs] + [-1], np.int8)
    c_pad = np.array([c.padding for c in costs] + [1.0])
    c_operands = np.array([_exact_operands(c) for c in costs] + [OPERANDS_OTHER], np.int8)

    def slot(op: np.ndarray) -> np.ndarray:
        """Each op's place in the tables above (the last, unknown, for NONE and the ops not costed)."""
        ci = np.where(op >= 0, index[np.maximum(op, 0)], NONE) if len(index) else np.full(len(op), NONE)
        return np.where(ci >= 0, ci, len(costs))

    flops_slot, bytes_slot = slot(flops_op), slot(bytes_op)

    op_fam_all = np.full(len(ops), -1, dtype=np.int8)
    has = index >= 0
    op_fam_all[has] = c_fam[index[has]]
    op_flops = recorded_flops(trace, links, flops_op, op_fam_all) if len(ops) else np.full(len(gpu), np.nan)
    operands = np.where(flops_op >= 0, c_operands[flops_slot], OPERANDS_OTHER).astype(np.int8)
    # a forward convolution's formula assumes the output as large as the input where the op that reads it
    # did not say (kernel_costs.conv_output_hints): 4x the FLOPs at stride 2; only a recorded count is exact
    operands[(c_fam[flops_slot] == Family.CONV) & ~np.isfinite(op_flops)] = OPERANDS_OTHER
    # no recorded count: the formula's, in place (a second column of every row is 8 MB at 1 M kernels)
    np.copyto(op_flops, c_flops[flops_slot], where=~np.isfinite(op_flops))
    op_bytes = c_bytes[bytes_slot]
    row_flops, row_bytes = split_costs(trace, op_flops, op_bytes, flops_op, bytes_op)
    return _RowCosts(
        flops=row_flops,
        bytes=row_bytes,
        op_bytes=op_bytes,
        family=np.where(flops_op >= 0, c_fam[flops_slot], c_fam[bytes_slot]),
        low=c_low[np.where(flops_op >= 0, flops_slot, bytes_slot)],
        padding=c_pad[flops_slot],
        operands=operands,
    )


def _exact_operands(c: OpCost) -> int:
    """OPERANDS_16 or OPERANDS_32 for a matmul or convolution whose FLOPs came from recorded shapes and whose
    tensor operands are all 16-bit float or all fp32; OPERANDS_OTHER otherwise."""
    if c.family not in _EXACT_FAMILIES or c.flops is None or not c.flops > 0:
        return OPERANDS_OTHER
    dtypes = {t.dtype for t in c.inputs if t is not None}
    if dtypes and dtypes <= SIXTEEN_BIT_FLOAT:
        return OPERANDS_16
    if dtypes and dtypes <= FP32:
        return OPERANDS_32
    return OPERANDS_OTHER


def host_copies(trace: Trace) -> np.ndarray:
    """Per GPU row: a copy between host and device (overhead, not GPU work: the gaps need only this of the
    roofline, so they need not wait for it)."""
    host_flag = trace.string_flags(lambda s: any(h in s for h in _HOST_COPY))
    host_copy: np.ndarray = (trace.gpu.kind == GpuKind.MEMCPY) & flag_of(host_flag, trace.gpu.name)
    return host_copy


def _take_copy_bytes(trace: Trace, rc: _RowCosts) -> np.ndarray:
    """Memcpy / memset rows take their own byte counts (device-to-device copies read and write) and no FLOPs;
    updates `rc` in place and returns the host<->device copy mask."""
    gpu, kind = trace.gpu, trace.gpu.kind
    is_copy = kind == GpuKind.MEMCPY
    host_copy = host_copies(trace)
    mem_rows = (kind != GpuKind.KERNEL) & (gpu.bytes >= 0)
    factor = np.where(is_copy & ~host_copy, 2.0, 1.0)
    rc.bytes[mem_rows] = gpu.bytes[mem_rows] * factor[mem_rows]
    rc.flops[kind != GpuKind.KERNEL] = 0.0
    rc.family[kind != GpuKind.KERNEL] = Family.COPY
    return host_copy


def _fits_in_l2(trace: Trace, rc: _RowCosts, peaks: Peaks) -> np.ndarray:
    """int8 per row: the working set of the whole op (a copy's own bytes) fits in L2 (1/0, -1 unknown)."""
    fits = np.full(len(trace.gpu), -1, dtype=np.int8)
    if peaks.l2_bytes:
        work = np.where(trace.gpu.kind == GpuKind.KERNEL, rc.op_bytes, rc.bytes)
        ok = np.isfinite(work)
        fits[ok] = (work[ok] <= peaks.l2_bytes).astype(np.int8)
    return fits


def _tensor_cores(trace: Trace, rc: _RowCosts, is_mm: np.ndarray, k_gemm: np.ndarray) -> np.ndarray:
    """int8 per row: 1 on tensor cores, 0 on the SIMT units, -1 unknown (the rules in the module doc)."""
    gpu, kind, family, low = trace.gpu, trace.gpu.kind, rc.family, rc.low
    k_tc = flag_of(_lower_flags(trace, _TC_NAME), gpu.name)
    k_simt = flag_of(_lower_flags(trace, _SIMT_NAME), gpu.name)
    tensor_cores = np.full(len(gpu), -1, dtype=np.int8)
    tensor_cores[~is_mm & (family >= 0)] = 0
    tensor_cores[kind != GpuKind.KERNEL] = 0
    tensor_cores[is_mm & (low == 1)] = 1
    fp32_mm = is_mm & (low == 0)
    tensor_cores[fp32_mm] = (k_tc[fp32_mm] & ~k_simt[fp32_mm]).astype(np.int8)
    unknown = (tensor_cores < 0) & k_gemm
    tensor_cores[unknown] = (k_tc[unknown] & ~k_simt[unknown]).astype(np.int8)
    tensor_cores[(tensor_cores < 0) & ~k_gemm & (kind == GpuKind.KERNEL)] = 0
    return tensor_cores


def _tf32(trace: Trace, rc: _RowCosts, tensor_cores: np.ndarray) -> np.ndarray:
    """Per row: on TF32 tensor cores (fp32 operands, or a kernel name without a low-precision tag)."""
    k_low = flag_of(_lower_flags(trace, _LOW_PRECISION_NAME), trace.gpu.name)
    low = rc.low
    tf32: np.ndarray = (tensor_cores == 1) & (low != 1) & ~((low == -1) & k_low)
    return tf32


def _unit_peak(tensor_cores: np.ndarray, tf32: np.ndarray, peaks: Peaks) -> np.ndarray:
    """The FLOP roof of each row's unit: bf16 tensor cores, TF32 tensor cores at TF32_OVER_BF16 of it, or the
    SIMT fp32 rate."""
    tensor_peak = np.nan if peaks.tensor_flops_per_s is None else peaks.tensor_flops_per_s
    fp32_peak = np.nan if peaks.fp32_flops_per_s is None else peaks.fp32_flops_per_s
    unit_peak: np.ndarray = np.where(
        tensor_cores == 1, tensor_peak * np.where(tf32, TF32_OVER_BF16, 1.0), fp32_peak
    )
    return unit_peak


@dataclass(frozen=True)
class _Costs:
    """What the roofline needs that no roof changes: each row's FLOPs, bytes, family and unit."""

    rc: _RowCosts
    op_costs: OpCosts
    cost_op: np.ndarray
    host_copy: np.ndarray
    is_mm: np.ndarray
    k_gemm: np.ndarray
    tensor_cores: np.ndarray
    tf32: np.ndarray


def _costs(trace: Trace, links: Calls) -> _Costs:
    op_costs, flops_op, bytes_op = cost_ops(trace, links)
    rc = _row_costs(trace, links, op_costs, flops_op, bytes_op)
    host_copy = _take_copy_bytes(trace, rc)
    is_mm = np.isin(rc.family, [int(f) for f in MATMUL_FAMILIES])
    k_gemm = flag_of(trace.string_flags(GEMM_NAME.search), trace.gpu.name)
    tensor_cores = _tensor_cores(trace, rc, is_mm, k_gemm)
    return _Costs(
        rc=rc,
        op_costs=op_costs,
        cost_op=np.where(flops_op >= 0, flops_op, bytes_op).astype(links.op_parent.dtype),
        host_copy=host_copy,
        is_mm=is_mm,
        k_gemm=k_gemm,
        tensor_cores=tensor_cores,
        tf32=_tf32(trace, rc, tensor_cores),
    )


def roofline(trace: Trace, links: Calls, peaks: Peaks) -> Roofline:
    """Every GPU row's FLOPs, bytes and verdict against `peaks` (as given: `reached_roofline` raises them)."""
    return _judge(trace, _costs(trace, links), peaks)


def reached_roofline(
    trace: Trace, links: Calls, peaks: Peaks, fixed: frozenset[str] = frozenset()
) -> tuple[Roofline, Peaks]:
    """The roofline against `peaks` with each FLOP roof not in `fixed` raised to the rate a kernel of `trace`
    reached on its unit (module doc), and the Peaks it was judged against."""
    costs = _costs(trace, links)
    raised = raise_to_reached(peaks, reached_rates(trace, costs), fixed)
    return _judge(trace, costs, raised), raised


def reached_rates(trace: Trace, c: _Costs) -> dict[str, float]:
    """Peaks field -> the highest rate that unit sustained in one call of a kernel whose rate is exact (module
    doc), as the roof it implies (a TF32 rate over TF32_OVER_BF16); fields no kernel speaks for are absent."""
    gpu, rc = trace.gpu, c.rc
    candidates = (
        (gpu.kind == GpuKind.KERNEL)
        & (gpu.dur_ns >= REACHED_MIN_NS)
        & (rc.operands != OPERANDS_OTHER)
        & np.isfinite(rc.flops)
        & (rc.flops > 0)
    )
    if not candidates.any():
        return {}
    candidates &= ~flag_of(_lower_flags(trace, HELPER_NAME) | _lower_flags(trace, _FP8_NAME), gpu.name)
    # a convolution's backward counts the gradients its kernels' names say it computed (kernel_costs.
    # conv_backward_mask): exact where they say dgrad or wgrad, a guess from the GEMM count otherwise
    grads_named = flag_of(_lower_flags(trace, _GRAD_NAME), gpu.name)
    candidates &= (rc.family != Family.CONV_BACKWARD) | grads_named
    k_tf32 = flag_of(_lower_flags(trace, _TF32_NAME), gpu.name)
    k_simt = flag_of(_lower_flags(trace, _SIMT_NAME), gpu.name)
    tc, ops, tf32 = c.tensor_cores, rc.operands, c.tf32
    units = {
        # bf16/fp16 operands at the tensor roof itself; fp32 ones named TF32 at TF32_OVER_BF16 of it
        "tensor_flops_per_s": (
            candidates & (ops == OPERANDS_16) & (tc == 1) & ~tf32,
            candidates & (ops == OPERANDS_32) & (tc == 1) & tf32 & k_tf32,
        ),
        "fp32_flops_per_s": (candidates & (ops == OPERANDS_32) & (tc == 0) & k_simt, None),
    }
    spec = datasheet_spec(trace.device.name)
    out: dict[str, float] = {}
    for f, (full, tf32_rows) in units.items():
        rates = [_rates(rc.flops, gpu.dur_ns, full)]
        if tf32_rows is not None:
            rates.append(_rates(rc.flops, gpu.dur_ns, tf32_rows) / TF32_OVER_BF16)
        implied = np.concatenate(rates)
        sheet = getattr(spec, f) if spec is not None else None
        if sheet:
            implied = implied[implied <= MEASURED_MAX_SHARE * sheet]
        implied = implied[np.isfinite(implied)]
        if len(implied):
            out[f] = float(implied.max())
    return out


def _rates(flops: np.ndarray, dur_ns: np.ndarray, rows: np.ndarray) -> np.ndarray:
    """The FLOP/s of `rows` (bool mask), by the same arithmetic as the roof fractions (cost/rates.py)."""
    r = achieved(flops[rows], flops[rows], dur_ns[rows], np.full(int(rows.sum()), np.nan), np.nan)
    out: np.ndarray = r.flops_per_s
    return out


def _judge(trace: Trace, c: _Costs, peaks: Peaks) -> Roofline:
    """The verdict of every row against `peaks` (module doc)."""
    gpu, rc = trace.gpu, c.rc
    kind = gpu.kind
    flops, nbytes = rc.flops, rc.bytes
    is_mm, k_gemm, tensor_cores, host_copy = c.is_mm, c.k_gemm, c.tensor_cores, c.host_copy
    unit_peak = _unit_peak(tensor_cores, c.tf32, peaks)
    bw = np.nan if peaks.bytes_per_s is None else peaks.bytes_per_s

    frac = roof_fraction(flops, nbytes, gpu.dur_ns, unit_peak, bw)
    with np.errstate(divide="ignore", invalid="ignore"):
        intensity = flops * rc.padding / nbytes
        ridge = unit_peak / bw

    regime = np.full(len(gpu), MEMORY, dtype=np.int8)
    by_ai = np.isfinite(intensity) & np.isfinite(ridge)
    regime[by_ai & (intensity >= ridge)] = COMPUTE
    guess = ~by_ai & (is_mm | k_gemm) & (kind == GpuKind.KERNEL)
    regime[guess] = COMPUTE
    shaped = (kind == GpuKind.KERNEL) & (rc.family != Family.FOREACH)  # bytes from the op's shapes
    regime[simt_bound(regime, nbytes, gpu.dur_ns, bw, tensor_cores, is_mm, shaped)] = COMPUTE
    narrow = flag_of(trace.string_flags(lambda s: narrow_load_bytes(s) is not None), gpu.name)
    regime[narrow & (kind == GpuKind.KERNEL)] = MEMORY
    short = (gpu.dur_ns <= SHORT_NS) & ~(frac >= TINY_ROOF_FRACTION)
    regime[short] = OVERHEAD
    regime[host_copy] = OVERHEAD

    fits = _fits_in_l2(trace, rc, peaks)
    spec = datasheet_spec(trace.device.name)
    l2_bw = np.nan if spec is None or spec.l2_bytes_per_s is None else spec.l2_bytes_per_s
    level, over = _levels(flops, nbytes, gpu.dur_ns, unit_peak, bw, l2_bw, fits, host_copy, frac)
    return Roofline(
        flops=flops,
        bytes=nbytes,
        regime=regime,
        tensor_cores=tensor_cores,
        unit_peak_flops_per_s=unit_peak,
        dur_ns=gpu.dur_ns,
        peak_bytes_per_s=bw,
        fits_in_l2=fits,
        family=rc.family,
        cost_op=c.cost_op,
        host_copy=host_copy,
        op_costs=c.op_costs,
        bytes_level=level,
        over_roof=over,
        l2_bytes_per_s=l2_bw,
    )


def level_fraction(
    flops: np.ndarray,
    nbytes: np.ndarray,
    dur_ns: np.ndarray,
    unit_peak: np.ndarray,
    bw: float,
    l2_bw: float,
    level: np.ndarray | None,
) -> np.ndarray:
    """The roof fraction of rows whose bytes were served from `level` (None: all from DRAM): L2 bytes against
    the L2 bandwidth where known, no roof for a host copy (NaN), capped at 100 %."""
    if level is not None and np.isfinite(l2_bw):  # L2 bytes against L2: scaled by DRAM / L2
        nbytes = nbytes * np.where(level == L2, bw / l2_bw, 1.0)
    frac: np.ndarray = roof_fraction(flops, nbytes, dur_ns, unit_peak, bw)
    if level is not None:
        frac[level == NO_ROOF] = np.nan  # a host copy: PCIe, no roof here
    np.minimum(frac, 1.0, out=frac)
    return frac


CAPPED_REASONS = {OVER_L2: "l2_resident", OVER_PEAK: "over_peak"}  # over_roof codes as the report names them


def ceilings(
    trace: Trace,
    peaks: Peaks,
    flops: np.ndarray,
    nbytes: np.ndarray,
    unit_peak: np.ndarray,
    fits_in_l2: np.ndarray | None,
    rows: np.ndarray | slice = slice(None),
) -> tuple[Rates, np.ndarray]:
    """Achieved rates of gpu `rows` (per-row columns `flops`, `nbytes`, `unit_peak`, `fits_in_l2` already
    taken at `rows`) with the roof fraction the roofline reports (bytes against the level that served them,
    capped at 100 %), and each row's over_roof code (WITHIN, OVER_L2, OVER_PEAK): what a reader of an
    Analysis (which keeps these columns, not the Roofline) shows beside a fraction."""
    dur = trace.gpu.dur_ns[rows]
    bw = np.nan if peaks.bytes_per_s is None else peaks.bytes_per_s
    r = achieved(flops, nbytes, dur, unit_peak, bw)
    fits = np.full(len(dur), -1, np.int8) if fits_in_l2 is None else fits_in_l2
    spec = datasheet_spec(trace.device.name)
    l2_bw = np.nan if spec is None or spec.l2_bytes_per_s is None else spec.l2_bytes_per_s
    host = host_copies(trace)[rows]
    level, over = _levels(flops, nbytes, dur, unit_peak, bw, l2_bw, fits, host, r.roof_fraction)
    frac = level_fraction(flops, nbytes, dur, unit_peak, bw, l2_bw, level)
    return Rates(r.flops_per_s, r.bytes_per_s, frac), over


def simt_bound(
    regime: np.ndarray,
    nbytes: np.ndarray,
    dur_ns: np.ndarray,
    bw: float,
    tensor_cores: np.ndarray,
    is_mm: np.ndarray,
    is_kernel: np.ndarray,
) -> np.ndarray:
    """Per row: a MEMORY kernel (`is_kernel`) off the tensor cores and outside the matmul family that ran at least
    SIMT_BOUND_MIN_NS and moved its (known, non-zero) bytes at under SIMT_BOUND_BYTES_SHARE of bandwidth `bw`
    (module doc): its time goes to instructions, not bytes."""
    long = (dur_ns >= SIMT_BOUND_MIN_NS) & (nbytes > 0)
    with np.errstate(divide="ignore", invalid="ignore"):
        share = nbytes / (dur_ns.astype(np.float64) * 1e-9) / bw
    out: np.ndarray = (
        (regime == MEMORY) & (tensor_cores == 0) & ~is_mm & is_kernel & long & (share < SIMT_BOUND_BYTES_SHARE)
    )
    return out


def _levels(
    flops: np.ndarray,
    nbytes: np.ndarray,
    dur_ns: np.ndarray,
    unit_peak: np.ndarray,
    bw: float,
    l2_bw: float,
    fits: np.ndarray,
    host_copy: np.ndarray,
    frac: np.ndarray,
) -> tuple[np.ndarray, np.ndarray]:
    """(bytes_level, over_roof) per row, from the fractions against DRAM `frac` (the module doc's rules)."""
    level = np.zeros(len(frac), dtype=np.int8)
    level[host_copy] = NO_ROOF
    over = np.zeros(len(frac), dtype=np.int8)
    above = np.flatnonzero((frac > 1.0) & ~host_copy)
    if not len(above):
        return level, over
    with np.errstate(divide="ignore", invalid="ignore"):
        secs = dur_ns[above].astype(np.float64) * 1e-9
        by_bytes = nbytes[above] / secs / bw
        by_flops = flops[above] / secs / unit_peak[above]
    from_l2 = (fits[above] == 1) & (by_bytes > 1.0)
    level[above[from_l2]] = L2
    with np.errstate(divide="ignore", invalid="ignore"):
        l2_frac = by_bytes * bw / l2_bw  # NaN without an L2 roof
    over[above[from_l2 & ~(l2_frac <= 1.0)]] = OVER_L2  # no L2 roof, or above it
    over[above[~from_l2]] = OVER_PEAK
    over[above[from_l2 & (by_flops > 1.0)]] = OVER_PEAK
    return level, over


def capped_names(
    trace: Trace,
    peaks: Peaks,
    flops: np.ndarray,
    nbytes: np.ndarray,
    unit_peak: np.ndarray | None,
    fits_in_l2: np.ndarray | None,
) -> dict[str, str]:
    """Kernel name -> why its roof fraction was capped at 100 % (CAPPED_REASONS: the reason holding most
    of its capped calls' time), for the names with a capped call; every gpu row's columns given."""
    if unit_peak is None or not len(trace.gpu):
        return {}
    _, over = ceilings(trace, peaks, flops, nbytes, unit_peak, fits_in_l2)
    capped = np.flatnonzero(over != WITHIN)
    if not len(capped):
        return {}
    uniq, inv = np.unique(trace.gpu.name[capped], return_inverse=True)
    dur = trace.gpu.dur_ns[capped].astype(np.float64) + 1.0  # +1: a 0 ns call still counts
    codes = list(CAPPED_REASONS)
    by = np.stack([np.bincount(inv, weights=dur * (over[capped] == c), minlength=len(uniq)) for c in codes])
    return {trace.name(int(n)): CAPPED_REASONS[codes[int(j)]] for n, j in zip(uniq, by.argmax(axis=0), strict=True)}
