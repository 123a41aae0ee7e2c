"""A real trace: one ResNet-50 training step on an NVIDIA H200 (bf16 autocast, channels-last, batch 128).

tests/fixtures/resnet50_h200_step.json.gz is cut from /work/shared/traces/resnet50_train_h200.json.gz by
tests/fixtures/make_resnet_step.py. The values below are pinned from the analysis; the FLOPs are checked against
the textbook count, the regimes against what the kernels are.
"""

from __future__ import annotations

import json
import os

import numpy as np
import pytest

from analyzers.analyze import analyze
from analyzers.results import GAP_CAUSE_CODES, GapCause, Regime
from brrrtui.contract.model import GpuKind
from brrrtui.present.finding_words import message
from brrrtui.present.report import render_text, to_json
from brrrtui.recording.load import load_trace

HERE = os.path.dirname(os.path.abspath(__file__))
FIXTURE = os.path.join(HERE, "fixtures", "resnet50_h200_step.json.gz")
FULL = "/work/shared/traces/resnet50_train_h200.json.gz"


@pytest.fixture(scope="module")
def a():
    return analyze(load_trace(FIXTURE))


def test_fixture_is_small():
    assert os.path.getsize(FIXTURE) < 300_000


def test_rows_and_regimes(a):
    gpu = a.trace.gpu
    assert np.bincount(gpu.kind, minlength=3).tolist() == [910, 2, 49]  # kernels, memcpys, memsets
    assert np.bincount(a.kernel_regime, minlength=3).tolist() == [199, 516, 246]  # compute, memory, overhead
    assert a.steps_analysed == 1
    assert a.peaks.source == "datasheet:H200 SXM"


def test_breakdown_sums_to_the_span(a):
    b = a.breakdown
    assert (b.span_ns, b.compute_ns, b.memory_ns, b.overhead_ns, b.idle_ns) == (
        53_901_539, 12_691_997, 15_262_254, 25_947_288, 25_659_251
    )  # fmt: skip
    assert b.compute_ns + b.memory_ns + b.overhead_ns == b.span_ns
    assert int(a.gaps.dur_ns.sum()) == b.idle_ns
    causes = {c: int(a.gaps.dur_ns[a.gaps.cause == GAP_CAUSE_CODES[c]].sum()) for c in GapCause}
    assert causes == {GapCause.HOST: 23_548_166, GapCause.SYNC: 993_695, GapCause.H2D: 0, GapCause.DATA: 0,
                      GapCause.OTHER: 1_117_390, GapCause.WAIT: 0, GapCause.COMMUNICATION: 0}  # fmt: skip


def test_flops_match_the_textbook_count(a):
    # ResNet-50 forward: 4.09 GMACs per 224x224 image; training step ~ 3x forward; batch 128
    textbook = 3 * 2 * 4.09e9 * 128
    total = float(np.nansum(a.kernel_flops))
    assert total == pytest.approx(3_137_084_554_549.0, rel=1e-9)
    # the stem's backward computes only the weight's gradient (its split-K reduction is no GEMM of its own)
    assert total == pytest.approx(textbook, rel=0.002)
    assert int(np.isnan(a.kernel_flops).sum()) == 9  # foreach kernels (TensorList shapes are not recorded)


def test_conv_and_gemm_kernels(a):
    by_name = {k.name: k for k in a.kernels}
    convs = [k for k in a.kernels if k.name.startswith("sm90_xmma_") or k.name.startswith("nvjet_")]
    assert all(k.uses_tensor_cores for k in convs)
    fprop = [k for k in convs if "fprop" in k.name]
    assert sum(k.calls for k in fprop) == 23  # 53 convs: the rest run as nvjet GEMMs (1x1) or cutlass
    # the big 3x3 forward convolutions are compute-bound at 71% of the bf16 roof (one call of the 14 reads 119 %
    # on the bytes side and counts as 100 %: a roof fraction is capped)
    big = by_name[
        next(n for n in by_name if "fprop" in n and "tilesize128x128x64" in n and "segment_k_off" in n)
    ]
    assert (big.calls, big.regime) == (14, Regime.COMPUTE)
    assert big.roof_fraction == pytest.approx(0.713, abs=0.005)
    # the stem (7x7 over 3 channels, padded to 8): compute-bound on its padded channels, 6 % of its roof
    stem = next(k for k in a.kernels if "s16816fprop" in k.name)
    assert (stem.calls, stem.regime) == (1, Regime.COMPUTE)
    # batch norm and pointwise kernels are memory-bound, but for the batch-norm kernels that move their bytes
    # at under a third of the bandwidth for long: their time goes to instructions (compute on the SIMT units)
    simt = ("batch_norm_collect_statistics_channels_last", "batch_norm_transform_input_channels_last")
    for k in a.kernels:
        if "batch_norm" in k.name or "elementwise_kernel<8" in k.name and k.gpu_ns > 1e6:
            allowed = (Regime.MEMORY, Regime.COMPUTE) if any(n in k.name for n in simt) else (Regime.MEMORY,)
            assert k.regime in allowed, k.name


def test_lines_and_findings(a):
    (line,) = [s for s in a.lines if s.kernels]
    assert (str(line.line), line.kernels, line.gpu_ns, line.idle_ns) == (
        "resnet_train.py:12",
        961,
        28_318_931,
        25_659_251,
    )
    assert line.regime == Regime.OVERHEAD
    kinds = [f.kind for f in a.findings]
    # no slow_gemm for the C_in=3 stem: cuDNN pads its channels itself, so padding them once saves only its
    # padding kernels (0.18 ms, a third of a percent of the step: under the findings' floor)
    assert kinds == ["overhead", "small_kernels", "fusion", "sync"]
    # the whole step is one line of one function: its chains are one "compile it" estimate over that function
    (fusion,) = [f for f in a.findings if f.kind == "fusion"]
    assert "native_batch_norm, clamp_min_" in message(fusion)
    assert "threshold_backward, native_batch_norm_backward" in message(fusion)


def test_report_round_trips(a):
    doc = to_json(a)
    again = json.loads(json.dumps(doc))
    parts = {"compute": 12_691_997, "memory": 15_262_254, "communication": 0, "overhead": 25_947_288}
    assert again["breakdown_ns"] == parts
    assert sum(again["breakdown_ns"].values()) == again["span_ns"]
    text = render_text(a, top=5)
    assert "resnet_train.py:12" in text and "findings" in text


def test_h2d_memcpy_is_not_busy_and_dtoh_is_tiny(a):
    gpu = a.trace.gpu
    copies = np.nonzero(gpu.kind == GpuKind.MEMCPY)[0]
    names = sorted(a.trace.name(int(gpu.name[i])) for i in copies)
    assert names == ["Memcpy DtoD (Device -> Device)", "Memcpy DtoH (Device -> Pinned)"]


@pytest.mark.skipif(not os.path.exists(FULL), reason="the shared H200 trace is not on this machine")
def test_full_three_step_trace():
    a = analyze(load_trace(FULL))
    assert a.steps_analysed == 3
    assert float(np.nansum(a.kernel_flops)) == pytest.approx(3 * 3_167_296_254_006.0, rel=0.01)
    assert a.breakdown.compute_ns + a.breakdown.memory_ns + a.breakdown.overhead_ns == a.breakdown.span_ns
    assert any("profiler stopping" in n for n in a.notes)  # the trailing 70 ms of the foreign trace
