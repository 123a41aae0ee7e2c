"""Issue 39, slow GEMMs by cause: a torchvision model ran GEMMs that brrrtui itself labels on-chip (narrow
loads), together 27 % of the step at 30-34 % of the roof, and no finding named them, their shapes or their
module. Every matmul far under its roof that holds a good share of the step now gets a finding: its cause and
cure (here: aligned shapes on narrow loads, a view's stride or start), or "cause unknown" with the evidence;
each with its shapes, module, library line and predicted saving. Hand-built H200 trace, exact arithmetic."""

from __future__ import annotations

import os

import pytest
from fixtures.synthetic import BF16, H200_BF16, TraceBuilder

from analyzers.analyze import analyze
from analyzers.results import FindingKind
from brrrtui.present.finding_words import action, message
from brrrtui.recording.load import load_trace

N = 4096
FLOPS = 2 * N**3
PLAIN = "sm90_xmma_gemm_bf16bf16_bf16f32_f32_tn_n_tilesize128x128x64_warpgroupsize1x1x1_execute_kernel"
NARROW = "cutlass3x_sm90_tensorop_gemm_bf16bf16_f32_bf16_bf16_128x128x64_1x1x1_0_tnn_align2"
SLOW = "sm90_xmma_gemm_bf16bf16_bf16f32_f32_nn_n_tilesize64x64x64_warpgroupsize1x1x1_execute_kernel"


def _dur(fraction: float) -> int:
    return round(FLOPS / (fraction * H200_BF16) * 1e9)


def model_trace(plain: int = 6):
    """One 3 ms step: six plain 4096^3 bf16 GEMMs at 80 % of the roof, one on narrow loads (`_align2`, the
    shapes aligned: a view's stride) at 30 % in `head.proj` from torchvision/models/vision.py:120, and one
    with no cause to find at 20 % in `blocks.0.mlp`. `plain`: how many of the 80 % GEMMs."""
    b = TraceBuilder()
    line = b.line("train.py", 30, "step")
    lib = b.line("/usr/lib/python3/site-packages/torchvision/models/vision.py", 120, "forward")
    root = ("", "VisionNet")
    calls = [([root, ("body", "Body")], PLAIN, 0.8)] * plain
    calls.append(([root, ("head", "Head"), ("head.proj", "Linear")], NARROW, 0.3))
    calls.append(([root, ("blocks.0", "Block"), ("blocks.0.mlp", "Linear")], SLOW, 0.2))
    t, rows = 0, []
    for chain, kernel, fraction in calls:
        b.span(line, t, 8_000, modules=chain, lib_line=lib if kernel == NARROW else -1)
        b.op("aten::mm", t + 500, 6_000, shapes=[[N, N], [N, N]], dtypes=[BF16, BF16])
        rows.append(b.launch(kernel, t + 1_000, t + 10_000, _dur(fraction)))
        t += _dur(fraction) + 20_000
    b.window(0, 3_000_000, first_step=1, last_step=1)
    b.step(0, 0)
    b.step(1, 3_000_000)
    return b.build()


def _slow_gemms():
    return [f for f in analyze(model_trace()).findings if f.kind is FindingKind.SLOW_GEMM]


def test_gemms_on_narrow_loads_with_aligned_shapes_get_a_finding_with_cause_and_cure():
    narrow = next(f for f in _slow_gemms() if "loaded 4 bytes at a time" in message(f))
    # the reference: the duration-weighted median of the undiagnosed GEMMs' fractions, 80 %
    assert narrow.saving_ns == pytest.approx(_dur(0.3) - FLOPS / (0.8 * H200_BF16) * 1e9, abs=1)
    assert "M=4096 N=4096 K=4096" in message(narrow) and "from a view" in message(narrow)
    assert ".contiguous()" in action(narrow)
    assert narrow.place is not None and (narrow.place.module, narrow.place.module_kind) == (
        "head.proj",
        "Linear",
    )
    assert narrow.place.library_line.file.endswith("torchvision/models/vision.py")


def test_a_slow_gemm_with_no_cause_found_says_so_with_its_evidence():
    unknown = next(f for f in _slow_gemms() if "cause unknown" in message(f))
    assert unknown.saving_ns == pytest.approx(_dur(0.2) - FLOPS / (0.8 * H200_BF16) * 1e9, abs=1)
    assert "M=4096 N=4096 K=4096" in message(unknown) and "16-byte aligned" in message(unknown)
    assert "(20% of the roof)" in message(unknown)
    assert "Nsight Compute" in action(unknown)
    assert unknown.place is not None and unknown.place.module == "blocks.*.mlp"


def test_gemms_at_their_roof_make_no_finding():
    assert len(_slow_gemms()) == 2


def test_no_cause_unknown_finding_without_the_run_s_own_gemms_doing_better():
    """Without MIN_REFERENCE matmuls of the run at half their roof or better, nothing shows that the GPU and
    library do better on such work: the narrow-load GEMM (a cause) keeps its finding, the other makes none."""
    found = [f for f in analyze(model_trace(plain=0)).findings if f.kind is FindingKind.SLOW_GEMM]
    assert len(found) == 1 and "loaded 4 bytes at a time" in message(found[0])


CNN = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "validation", "holdout", "data",
                   "cnn_channels_last.brrr.gz")  # fmt: skip


def test_a_stem_the_library_pads_itself_saves_its_padding_kernels():
    """The hold-out ResNet-18 (bf16, channels_last, H100): cuDNN pads the 3-channel stem to 8 with its
    nhwcAddPaddingKernel and runs the convolutions on the padded channels (`_nhwc_align8`). Padding the input
    and the weight once removes those kernels and leaves the convolutions as they are, so the finding's saving
    is the padding kernels' time, not the convolutions' shortfall to the run's other convolutions."""
    a = analyze(load_trace(CNN))
    (f,) = [f for f in a.findings if f.kind is FindingKind.SLOW_GEMM]
    gpu = a.trace.gpu
    names = [a.trace.name(int(n)) for n in gpu.name]
    pad = [r for r, n in enumerate(names) if "nhwcAddPaddingKernel" in n]
    assert len(pad) == 8  # input and weight, forward and backward, in each of the window's 2 steps
    assert f.saving_ns == pytest.approx(sum(int(gpu.dur_ns[r]) for r in pad) / 2)
    assert "cuDNN pads the channels itself, 4 padding kernels per step" in message(f)
    assert action(f).startswith("pad the channels 3 to 8")
    # the stem's backward computes the weight's gradient only: its FLOPs (shared by duration among its kernels)
    # are the forward's, not twice them (its CUTLASS split-K reduction is a helper, not a grad-input GEMM)
    stem = [r for r, n in enumerate(names) if "s16816fprop" in n]
    wgrad = [r for r, n in enumerate(names) if "Conv2dWgradOutputGradient" in n]
    split = [r for r, n in enumerate(names) if "ReduceSplitK" in n]
    assert len(stem) == len(wgrad) == len(split) == 2
    assert a.kernel_flops[wgrad].sum() + a.kernel_flops[split].sum() == pytest.approx(a.kernel_flops[stem].sum())
