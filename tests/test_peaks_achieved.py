"""A FLOP roof never sits below a rate the run's own GEMMs reached: the recorder calibrates after the user's
script, on a GPU that may be hot by then (the H100 recording below calibrated 667 TFLOP/s bf16 while its own
10240^3 bf16 GEMMs ran at 825-856), and every tensor-core kernel's roof fraction was inflated by that ratio.
The tensor roof (and the SIMT fp32 roof) is raised to the highest rate an exact matmul ran for long enough;
hand-built H100 traces with exact arithmetic, then the recording itself."""

from __future__ import annotations

import os

import numpy as np
import pytest
from fixtures.synthetic import BF16, F32, TraceBuilder

from analyzers.analyze import analyze, analyze_with_other_phases
from analyzers.cost.peaks import resolve_peaks
from analyzers.cost.roofline import OVER_PEAK, REACHED_MIN_NS, TF32_OVER_BF16, WITHIN, ceilings
from analyzers.results import Analysis
from brrrtui.contract.model import Peaks, Trace
from brrrtui.contract.units import fmt_flops
from brrrtui.present.report import render_text, to_json
from brrrtui.present.snapshot import build_snapshot
from brrrtui.present.status import opening_lines
from brrrtui.recording.load import load_trace

H100 = "NVIDIA H100 80GB HBM3"
CALIBRATED = Peaks(667e12, 51e12, 3.0e12, "measured", 50 * 2**20)  # inside the datasheet check (>= 0.6 x 989)
N = 8192
FLOPS = 2 * N**3
BF16_GEMM = "nvjet_sm90_tst_320x128_64x3_1x2_h_bz_coopB_NNT"
TF32_GEMM = "sm90_xmma_gemm_f32f32_tf32f32_f32_nn_n_tilesize128x256x32_warpgroupsize2x1x1_execute_kernel"
SIMT_GEMM = "ampere_sgemm_128x64_nn"
FIXTURE = os.path.join(os.path.dirname(__file__), "fixtures", "h100_slow_kernels_tf32.brrr.gz")


def _dur(rate: float, flops: float = FLOPS) -> int:
    """The whole ns a GEMM of `flops` takes at about `rate` FLOP/s."""
    return round(flops / rate * 1e9)


def _rate(dur: int, flops: float = FLOPS) -> float:
    """The rate a GEMM of `flops` reached in `dur` ns (the arithmetic of analyzers/cost/rates.py)."""
    return flops / (dur * 1e-9)


def gemm_trace(calls: list[tuple[str, str, int, int]]) -> tuple:
    """One window of aten::mm calls, each (kernel, dtype, n, dur_ns): n^3 GEMMs; returns (trace, gpu rows)."""
    b = TraceBuilder(device=H100, peaks=CALIBRATED)
    line = b.line("train.py", 30, "step")
    t, rows = 0, []
    for kernel, dtype, n, dur in calls:
        b.span(line, t, 8_000)
        b.op("aten::mm", t + 500, 6_000, shapes=[[n, n], [n, n]], dtypes=[dtype, dtype])
        rows.append(b.launch(kernel, t + 1_000, t + 10_000, dur))
        t += dur + 20_000
    b.window(0, t + 10_000, first_step=1, last_step=1)
    b.step(0, 0)
    b.step(1, t + 10_000)
    return b.build(), rows


def over_flop_roof(a: Analysis) -> np.ndarray:
    """Per GPU row: its FLOP/s above its unit's FLOP roof (a bandwidth above its roof is not this test's)."""
    r, _ = ceilings(
        a.trace, a.peaks, a.kernel_flops, a.kernel_bytes, a.kernel_unit_peak_flops_per_s, a.kernel_fits_in_l2
    )
    above: np.ndarray = r.flops_per_s > a.kernel_unit_peak_flops_per_s
    return above


def fractions(a: Analysis) -> tuple[np.ndarray, np.ndarray]:
    """Every GPU row's roof fraction and over_roof code, as the report shows them."""
    r, over = ceilings(
        a.trace, a.peaks, a.kernel_flops, a.kernel_bytes, a.kernel_unit_peak_flops_per_s, a.kernel_fits_in_l2
    )
    return r.roof_fraction, over


def test_a_bf16_gemm_above_the_calibration_raises_the_tensor_roof_to_its_rate():
    fast, slow = _dur(850e12), _dur(500e12)
    trace, (f, s) = gemm_trace([(BF16_GEMM, BF16, N, fast), (BF16_GEMM, BF16, N, slow)])
    a = analyze(trace)
    assert a.peaks.tensor_flops_per_s == pytest.approx(_rate(fast), rel=1e-12)
    assert a.peaks.raised_from == (("tensor_flops_per_s", CALIBRATED.tensor_flops_per_s),)
    assert a.peaks.fp32_flops_per_s == CALIBRATED.fp32_flops_per_s  # no fp32 GEMM: the SIMT roof stays
    device = to_json(a)["device"]
    assert device["peak_flops_per_s"] == a.peaks.tensor_flops_per_s
    assert device["peaks_raised_from"] == {"tensor_flops_per_s": CALIBRATED.tensor_flops_per_s}
    frac, over = fractions(a)
    assert frac[f] == pytest.approx(1.0, rel=1e-12) and over[f] == WITHIN  # at its roof, not over it
    assert frac[s] == pytest.approx(_rate(slow) / _rate(fast), rel=1e-9)
    # the calibrated roof alone would have capped the fast one and read the slow one 850/667 too high
    before = analyze(trace, CALIBRATED)
    assert before.peaks == CALIBRATED
    frac0, over0 = fractions(before)
    assert frac0[f] == 1.0 and over0[f] == OVER_PEAK
    assert frac0[s] == pytest.approx(_rate(slow) / CALIBRATED.tensor_flops_per_s, rel=1e-9)


def test_a_tf32_gemm_raises_the_tensor_roof_by_one_over_tf32_over_bf16():
    dur = _dur(400e12)  # above 667 x 0.5: the TF32 roof the calibration implies
    trace, (row,) = gemm_trace([(TF32_GEMM, F32, N, dur)])
    a = analyze(trace)
    assert a.peaks.tensor_flops_per_s == pytest.approx(_rate(dur) / TF32_OVER_BF16, rel=1e-12)
    frac, over = fractions(a)
    assert frac[row] == pytest.approx(1.0, rel=1e-12) and over[row] == WITHIN


def test_the_fastest_unit_wins_whichever_precision_reached_it():
    bf16, tf32 = _dur(700e12), _dur(400e12)  # 700 bf16 < 400 / 0.5 = 800 implied by the TF32 GEMM
    trace, (b, t) = gemm_trace([(BF16_GEMM, BF16, N, bf16), (TF32_GEMM, F32, N, tf32)])
    a = analyze(trace)
    assert a.peaks.tensor_flops_per_s == pytest.approx(_rate(tf32) / TF32_OVER_BF16, rel=1e-12)
    frac, _ = fractions(a)
    assert frac[b] == pytest.approx(_rate(bf16) / (_rate(tf32) / TF32_OVER_BF16), rel=1e-9)


def test_a_kernel_shorter_than_the_minimum_raises_nothing():
    n = 2048  # 17 GFLOP: ~20 us at 850 TFLOP/s
    dur = _dur(850e12, 2 * n**3)
    assert dur < REACHED_MIN_NS
    trace, (row,) = gemm_trace([(BF16_GEMM, BF16, n, dur)])
    a = analyze(trace)
    assert a.peaks == resolve_peaks(trace) and a.peaks.raised_from == ()
    _, over = fractions(a)
    assert over[row] == OVER_PEAK  # shown capped, with its reason


def test_a_user_override_is_never_raised():
    dur = _dur(850e12)
    trace, (row,) = gemm_trace([(BF16_GEMM, BF16, N, dur)])
    a = analyze(trace, "flops=700e12")
    assert a.peaks.tensor_flops_per_s == 700e12 and a.peaks.raised_from == ()
    assert fractions(a)[1][row] == OVER_PEAK
    # an override of the bandwidth alone leaves the tensor roof to the run
    b = analyze(trace, "bw=3.2e12")
    assert b.peaks.bytes_per_s == 3.2e12
    assert b.peaks.tensor_flops_per_s == pytest.approx(_rate(dur), rel=1e-12)


def test_fp8_operands_do_not_raise_the_bf16_roof():
    dur = _dur(900e12)  # an fp8 GEMM's rate is not a bf16 one
    fp8 = "c10::Float8_e4m3fn"
    b = TraceBuilder(device=H100, peaks=CALIBRATED)
    line = b.line("train.py", 30, "step")
    b.span(line, 0, 8_000)
    b.op("aten::_scaled_mm", 500, 6_000, shapes=[[N, N], [N, N], [], []], dtypes=[fp8, fp8, F32, F32])
    b.launch("nvjet_sm90_qqtst_256x128_64x4_2x1_v_bz_coopA_TNT", 1_000, 10_000, dur)
    b.window(0, dur + 20_000, first_step=1, last_step=1)
    b.step(0, 0)
    b.step(1, dur + 20_000)
    a = analyze(b.build())
    assert a.kernel_flops[0] == FLOPS  # costed: the FLOPs are there, the precision is not bf16
    assert a.peaks.tensor_flops_per_s == CALIBRATED.tensor_flops_per_s and a.peaks.raised_from == ()


def test_a_simt_gemm_raises_the_fp32_roof_only_when_named_simt():
    n = 4096
    flops = 2 * n**3
    sgemm = _dur(55e12, flops)  # above the calibrated 51
    # an fp32 GEMM of no telling name, faster than the SIMT units can go but inside H100's datasheet fp32 (67):
    # it may have run on TF32 tensor cores, so it is no floor of the SIMT roof
    unnamed = _dur(65e12, flops)
    trace, (s, _) = gemm_trace([(SIMT_GEMM, F32, n, sgemm), ("gemm_kernel", F32, n, unnamed)])
    a = analyze(trace)
    assert a.kernel_tensor_cores[1] == 0  # judged against the SIMT roof, yet no floor of it
    assert a.peaks.fp32_flops_per_s == pytest.approx(_rate(sgemm, flops), rel=1e-12)
    assert a.peaks.raised_from == (("fp32_flops_per_s", CALIBRATED.fp32_flops_per_s),)
    assert fractions(a)[0][s] == pytest.approx(1.0, rel=1e-12)


def test_a_rate_above_the_datasheet_is_not_a_roof():
    dur = _dur(1.2e15)  # over 1.05 x H100's dense 989: the FLOPs or the unit are wrong, not the roof
    trace, _ = gemm_trace([(BF16_GEMM, BF16, N, dur)])
    assert analyze(trace).peaks.raised_from == ()


def test_the_report_header_says_why_the_roof_is_above_the_calibration():
    dur = _dur(850e12)
    trace, _ = gemm_trace([(BF16_GEMM, BF16, N, dur)])
    text = render_text(analyze(trace))
    why = (
        f"{fmt_flops(_rate(dur))} tensor (reached by a GEMM of this run; the calibration gave "
        f"{fmt_flops(CALIBRATED.tensor_flops_per_s)})"
    )
    assert f"peaks measured: {why}, {fmt_flops(CALIBRATED.fp32_flops_per_s)} fp32" in text


@pytest.fixture(scope="module")
def recording():
    trace = load_trace(FIXTURE)
    return trace, analyze_with_other_phases(trace)


def _named(trace, part: str) -> np.ndarray:
    return np.array([part in trace.name(int(n)) for n in trace.gpu.name.tolist()], dtype=bool)


def test_the_h100_recording_takes_its_roof_from_its_fastest_bf16_gemm(recording):
    """slow_kernels.py --tf32 on an H100: the calibration gave 667 TFLOP/s after the script's 10240^3 bf16
    GEMMs ran faster; the tensor roof is the fastest of them, and no tensor-core kernel reads over its roof."""
    trace, (a, _) = recording
    assert trace.peaks is not None and a.peaks.raised_from == (
        ("tensor_flops_per_s", trace.peaks.tensor_flops_per_s),
    )
    t = a.trace
    gemms = _named(t, "nvjet_sm90_tst_320x128")
    assert gemms.any()
    fastest = max(_rate(int(d), 2 * 10240**3) for d in t.gpu.dur_ns[gemms])
    assert a.peaks.tensor_flops_per_s == pytest.approx(fastest, rel=1e-12)
    tf32 = _named(t, "tf32f32")  # its 4096^3 TF32 GEMMs imply less than the bf16 ones reached
    assert max(_rate(int(d), 2 * 4096**3) for d in t.gpu.dur_ns[tf32]) / TF32_OVER_BF16 < fastest
    assert not over_flop_roof(a).any()
    assert over_flop_roof(analyze(trace, trace.peaks))[
        gemms
    ].any()  # the calibration alone: they were over it
    frac, _ = fractions(a)
    # every other tensor-core kernel's fraction falls by calibration / reached: the attention kernels'
    attention = _named(t, "sdpa_sm90_flash")
    before = analyze(trace, trace.peaks)
    frac0, _ = fractions(before)
    assert frac[attention] == pytest.approx(
        frac0[attention] * trace.peaks.tensor_flops_per_s / fastest, rel=1e-9
    )


def test_the_recordings_phases_each_keep_their_own_floor(recording):
    trace, (a, others) = recording
    assert a.peaks == analyze(trace).peaks  # the report's lead is the plain analysis
    for o in others.values():
        assert o.peaks.tensor_flops_per_s is not None and trace.peaks is not None
        assert o.peaks.tensor_flops_per_s >= trace.peaks.tensor_flops_per_s
        assert not over_flop_roof(o).any()


def test_a_roof_from_the_datasheet_says_so_in_the_ui_log():
    dur = _dur(1.0e15)  # above H100's datasheet 989 but within 1.05 x of it: a dense rate it can reach
    b = TraceBuilder(device=H100)  # no calibration: the datasheet's roofs
    line = b.line("train.py", 30, "step")
    b.span(line, 0, 8_000)
    b.op("aten::mm", 500, 6_000, shapes=[[N, N], [N, N]], dtypes=[BF16, BF16])
    b.launch(BF16_GEMM, 1_000, 10_000, dur)
    b.window(0, dur + 20_000, first_step=1, last_step=1)
    b.step(0, 0)
    b.step(1, dur + 20_000)
    trace = b.build()
    sheet = resolve_peaks(trace).tensor_flops_per_s
    assert sheet is not None and sheet < _rate(dur)
    snap = build_snapshot(analyze(trace))
    assert opening_lines(snap, None)[1] == (
        f"tensor roof {fmt_flops(_rate(dur))}: reached by a GEMM of this run; the datasheet gives {fmt_flops(sheet)}"
    )


CONV = (
    "sm90_xmma_fprop_implicit_gemm_bf16bf16_bf16f32_f32_nhwckrsc_nhwc_tilesize128x128x64_warpgroupsize1x1x1"
)
X, W = [256, 256, 56, 56], [256, 256, 3, 3]
CONV_FLOPS_SAME = 2 * 256 * 256 * 256 * 9 * 56 * 56  # the formula's count: the output as large as the input


def one_op_trace(op: str, shapes: list[list[int]], kernel: str, dur: int, **extra: float) -> Trace:
    """One op `op` with `shapes` (bf16) that launched one kernel for `dur` ns, in a one-step window."""
    b = TraceBuilder(device=H100, peaks=CALIBRATED)
    line = b.line("train.py", 30, "step")
    b.span(line, 0, 8_000)
    b.op(op, 500, 6_000, shapes=shapes, dtypes=[BF16] * len(shapes), **extra)
    b.launch(kernel, 1_000, 10_000, dur)
    b.window(0, dur + 20_000, first_step=1, last_step=1)
    b.step(0, 0)
    b.step(1, dur + 20_000)
    return b.build()


def conv_trace(dur: int, recorded: float | None) -> Trace:
    """One forward convolution and no op after it to show its output's size (the stride is unknown)."""
    extra = {} if recorded is None else {"flops": recorded}
    return one_op_trace("aten::cudnn_convolution", [X, W], CONV, dur, **extra)


def test_a_forward_convolution_raises_the_roof_only_with_a_recorded_flop_count():
    dur = _dur(850e12, CONV_FLOPS_SAME)  # by the formula's count; at stride 2 it did a quarter of that
    assert dur >= REACHED_MIN_NS
    formula = analyze(conv_trace(dur, None))
    assert formula.kernel_flops[0] == CONV_FLOPS_SAME and formula.peaks.raised_from == ()
    counted = CONV_FLOPS_SAME / 4  # what the profiler's count (it knows the stride) says
    dur = _dur(850e12, counted)
    assert dur >= REACHED_MIN_NS
    recorded = analyze(conv_trace(dur, counted))
    assert recorded.peaks.tensor_flops_per_s == pytest.approx(_rate(dur, counted), rel=1e-12)


def conv_backward_trace(kernel: str, dur: int) -> Trace:
    """One convolution_backward (stride 1: grad_output as large as the input) that launched one kernel."""
    return one_op_trace("aten::convolution_backward", [X, X, W], kernel, dur)


def test_a_convolution_backward_raises_the_roof_only_where_its_kernels_name_the_gradient():
    dur = _dur(850e12, CONV_FLOPS_SAME)  # one gradient's FLOPs
    dgrad = "sm90_xmma_dgrad_implicit_gemm_bf16bf16_bf16f32_f32_nhwckrsc_nhwc_tilesize128x128x64"
    named = analyze(conv_backward_trace(dgrad, dur))
    assert named.kernel_flops[0] == CONV_FLOPS_SAME
    assert named.peaks.tensor_flops_per_s == pytest.approx(_rate(dur, CONV_FLOPS_SAME), rel=1e-12)
    # a GEMM of no such name: which gradients it computed is a guess from the kernel count
    gemm = "sm90_xmma_gemm_bf16bf16_bf16f32_f32_tn_n_tilesize128x128x64_warpgroupsize1x1x1_execute_kernel"
    assert analyze(conv_backward_trace(gemm, dur)).peaks.raised_from == ()
