"""Roofline: FLOPs, bytes, tensor cores and regime per GPU row, on hand-built traces with exact arithmetic."""

from __future__ import annotations

import math
import os

import numpy as np
import pytest
from fixtures.synthetic import BF16, F32, H200_BF16, H200_BW, H200_FP32, TraceBuilder

from analyzers.cost.kernel_costs import conv_backward_mask
from analyzers.cost.op_families import Family
from analyzers.cost.opcost import op_cost, parse_args
from analyzers.cost.peaks import datasheet_spec, parse_override, resolve_peaks
from analyzers.cost.roofline import roofline
from analyzers.link.links import link
from analyzers.results import REGIME_CODES, Regime
from analyzers.totals.kernel_stats import kernel_stats
from brrrtui.contract.errors import InputError
from brrrtui.contract.model import GpuKind, Peaks

C, M, OV = (REGIME_CODES[r] for r in (Regime.COMPUTE, Regime.MEMORY, Regime.OVERHEAD))


def analyse(b: TraceBuilder):
    trace = b.build()
    links = link(trace)
    return trace, roofline(trace, links, resolve_peaks(trace))


def single_op(name, shapes, dtypes, kernel, dur_ns, **kw):
    b = TraceBuilder(**kw)
    b.op(name, 0, 10_000, shapes=shapes, dtypes=dtypes)
    b.launch(kernel, cpu_ns=1_000, gpu_ns=5_000, dur_ns=dur_ns)
    b.window(0, dur_ns + 10_000)
    return analyse(b)


def test_bf16_matmul_is_compute_bound_with_exact_flops():
    n = 4096
    _, r = single_op(
        "aten::mm", [[n, n], [n, n]], [BF16, BF16], "sm90_xmma_gemm_bf16bf16_bf16f32_f32_tn_n", 200_000
    )
    assert r.flops[0] == 2 * n**3 == 137_438_953_472
    assert r.bytes[0] == 3 * n * n * 2 == 100_663_296
    assert r.regime[0] == C
    assert r.tensor_cores[0] == 1
    assert r.unit_peak_flops_per_s[0] == H200_BF16
    assert r.rates().flops_per_s[0] == pytest.approx(2 * n**3 / 200e-6)
    assert r.rates().roof_fraction[0] == pytest.approx(2 * n**3 / 200e-6 / H200_BF16)
    assert r.fits_in_l2[0] == 0  # 100.7 MB > 60 MiB


UNALIGNED = "void cutlass::Kernel2<cutlass_75_tensorop_bf16_s1688gemm_bf16_128x128_tn_align{a}>(P::Params)"


@pytest.mark.parametrize(("align", "regime"), [(1, M), (2, M), (8, C)])
def test_unaligned_cutlass_gemm_is_memory_bound_on_chip(align, regime):
    # GPT-2's vocabulary GEMM (16384 x 50257 x 768): 1.3 kFLOP/B, far right of the ridge, yet an align1/align2
    # kernel loads 2-4 bytes at a time and Nsight Compute finds it L1/shared-bound (memory), not tensor-bound
    m, n, k = 16384, 50257, 768
    _, r = single_op("aten::mm", [[m, k], [k, n]], [BF16, BF16], UNALIGNED.format(a=align), 13_000_000)
    assert r.flops[0] == 2 * m * n * k
    assert r.regime[0] == regime
    roof = 2 * m * n * k / 13e-3 / H200_BF16  # the tensor roof still
    assert r.rates().roof_fraction[0] == pytest.approx(roof)


def test_narrow_load_bytes_reads_the_alignment_and_dtype_from_the_name():
    from analyzers.cost.gemm_shapes import narrow_load_bytes

    assert narrow_load_bytes(UNALIGNED.format(a=1)) == 2
    assert narrow_load_bytes("cutlass_80_tensorop_bf16_s16816gemm_bf16_256x128_64x3_nn_align2") == 4
    assert narrow_load_bytes("cutlass_80_tensorop_s1688gemm_tf32_128x128_16x4_nn_align2") == 8
    assert narrow_load_bytes("cutlass_80_tensorop_s1688gemm_tf32_128x128_16x4_nn_align4") is None  # 16 B
    assert narrow_load_bytes("cutlass_80_tensorop_bf16_s16816gemm_relu_bf16_64x64_32x6_tn_align8") is None
    assert (
        narrow_load_bytes("cutlass_tensorop_bf16_s16816fprop_optimized_bf16_256x64_32x4_nhwc_align8") is None
    )
    assert narrow_load_bytes("nvjet_sm90_tst_192x128_64x5_1x2_h_bz_coopB_TNT") is None
    assert narrow_load_bytes("vectorized_elementwise_kernel<4, align2>") is None


def test_fp32_matmul_without_tf32_uses_the_simt_roof():
    n = 2048
    _, r = single_op("aten::mm", [[n, n], [n, n]], [F32, F32], "ampere_sgemm_128x64_nn", 400_000)
    assert r.tensor_cores[0] == 0
    assert r.unit_peak_flops_per_s[0] == H200_FP32
    assert r.regime[0] == C  # 2n^3 / (3 n^2 4) = 341 FLOP/B > 67/4.8 = 14


def test_fp32_matmul_with_tf32_kernel_uses_half_the_bf16_roof():
    _, r = single_op(
        "aten::mm", [[1024, 1024], [1024, 1024]], [F32, F32], "sm80_xmma_gemm_tf32f32_tf32f32_f32_nn", 50_000
    )
    assert r.tensor_cores[0] == 1
    assert r.unit_peak_flops_per_s[0] == H200_BF16 / 2


def test_pointwise_add_is_memory_bound_with_exact_bytes():
    n = 1 << 24
    _, r = single_op(
        "aten::add", [[n], [n], []], [BF16, BF16, "Scalar"], "vectorized_elementwise_kernel<add>", 30_000
    )
    assert r.bytes[0] == 3 * n * 2
    assert r.flops[0] == n
    assert r.regime[0] == M
    assert r.rates().bytes_per_s[0] == pytest.approx(3 * n * 2 / 30e-6)
    assert r.rates().roof_fraction[0] == pytest.approx(3 * n * 2 / 30e-6 / H200_BW)


def test_tiny_kernel_is_overhead():
    _, r = single_op(
        "aten::add", [[32], [32], []], [F32, F32, "Scalar"], "vectorized_elementwise_kernel<add>", 2_000
    )
    assert r.bytes[0] == 3 * 32 * 4
    assert r.regime[0] == OV


def test_short_kernel_near_the_memory_roof_is_not_overhead():
    n = 1 << 22  # 25 MB moved in 5 us: 5 TB/s ~ the roof
    _, r = single_op(
        "aten::add", [[n], [n], []], [F32, F32, "Scalar"], "vectorized_elementwise_kernel<add>", 5_000
    )
    assert r.regime[0] == M


def test_inplace_and_write_only_ops():
    n = 1000
    _, r = single_op("aten::add_", [[n], [n], []], [F32, F32, "Scalar"], "k", 10_000)
    assert r.bytes[0] == 3 * n * 4  # read self, read other, write self
    _, r = single_op("aten::fill_", [[n], []], [F32, "Scalar"], "k", 10_000)
    assert r.bytes[0] == n * 4
    _, r = single_op("aten::copy_", [[n], [n], []], [BF16, F32, "Scalar"], "k", 10_000)
    assert r.bytes[0] == n * 2 + n * 4


def test_op_cost_is_split_among_its_kernels_by_duration():
    b = TraceBuilder()
    b.op("aten::mm", 0, 20_000, shapes=[[1024, 1024], [1024, 1024]], dtypes=[BF16, BF16])
    b.launch("nvjet_sm90_tst_128x256_splitK", cpu_ns=1_000, gpu_ns=10_000, dur_ns=30_000)
    b.launch("cublasLt::splitKreduce_kernel", cpu_ns=5_000, gpu_ns=41_000, dur_ns=10_000)
    b.window(0, 60_000)
    _, r = analyse(b)
    total = 2 * 1024**3
    assert r.flops[0] == pytest.approx(total * 0.75)
    assert r.flops[1] == pytest.approx(total * 0.25)
    assert r.flops.sum() == pytest.approx(total)
    assert r.bytes.sum() == pytest.approx(3 * 1024 * 1024 * 2)


def test_nearest_op_with_a_cost_wins_bias_add_inside_linear():
    b = TraceBuilder()
    b.op("aten::linear", 0, 30_000, shapes=[[64, 512], [256, 512], [256]], dtypes=[BF16, BF16, BF16])
    b.op("aten::mm", 1_000, 10_000, shapes=[[64, 512], [512, 256]], dtypes=[BF16, BF16])
    b.launch("nvjet_gemm", cpu_ns=2_000, gpu_ns=40_000, dur_ns=8_000)
    b.op("aten::add_", 15_000, 10_000, shapes=[[64, 256], [256], []], dtypes=[BF16, BF16, "Scalar"])
    b.launch("vectorized_elementwise_kernel<add>", cpu_ns=16_000, gpu_ns=50_000, dur_ns=3_000)
    b.window(0, 60_000)
    _, r = analyse(b)
    assert r.flops[0] == 2 * 64 * 512 * 256
    assert r.bytes[1] == (2 * 64 * 256 + 256) * 2  # the add's own tensors, not the matmul's
    assert r.family[0] == Family.MATMUL and r.family[1] == Family.POINTWISE


def test_conv_output_size_comes_from_the_consumer_op():
    # stride-2 3x3 conv: 56x56 -> 28x28; only the consumer (relu) shows the output size
    x, w, out = [8, 64, 56, 56], [128, 64, 3, 3], [8, 128, 28, 28]
    b = TraceBuilder()
    b.op("aten::conv2d", 0, 20_000, shapes=[x, w, []], dtypes=[BF16, BF16, ""])
    b.op("aten::cudnn_convolution", 1_000, 15_000, shapes=[x, w], dtypes=[BF16, BF16])
    b.launch("sm90_xmma_fprop_implicit_gemm_bf16bf16", cpu_ns=2_000, gpu_ns=30_000, dur_ns=20_000)
    b.op("aten::relu_", 21_000, 5_000, shapes=[out], dtypes=[BF16])
    b.window(0, 60_000)
    _, r = analyse(b)
    expected = 2 * 8 * 128 * 64 * 9 * 28 * 28
    assert r.flops[0] == expected
    assert r.bytes[0] == (math.prod(x) + math.prod(w) + math.prod(out)) * 2
    assert r.tensor_cores[0] == 1


def test_recorded_flops_of_an_ancestor_of_the_same_family_win():
    x, w = [8, 64, 56, 56], [128, 64, 3, 3]
    b = TraceBuilder()
    b.op("aten::conv2d", 0, 20_000, shapes=[x, w, []], dtypes=[BF16, BF16, ""], flops=1.5e9)
    b.op("aten::cudnn_convolution", 1_000, 15_000, shapes=[x, w], dtypes=[BF16, BF16])
    b.launch("sm90_xmma_fprop_implicit_gemm_bf16bf16", cpu_ns=2_000, gpu_ns=30_000, dur_ns=20_000)
    b.window(0, 60_000)
    _, r = analyse(b)
    assert r.flops[0] == 1.5e9


def test_memcpy_and_memset_use_their_byte_counts():
    b = TraceBuilder()
    b.launch("Memcpy DtoD (Device -> Device)", 0, 10_000, 100_000, kind=GpuKind.MEMCPY, nbytes=10**8)
    b.launch(
        "Memset (Device)", 1_000, 120_000, 50_000, kind=GpuKind.MEMSET, nbytes=10**8, api="cudaMemsetAsync"
    )
    b.launch("Memcpy HtoD (Pageable -> Device)", 2_000, 200_000, 100_000, kind=GpuKind.MEMCPY, nbytes=10**8)
    b.window(0, 400_000)
    _, r = analyse(b)
    assert list(r.bytes) == [2e8, 1e8, 1e8]  # device copies read and write
    assert list(r.flops) == [0, 0, 0]
    assert list(r.regime) == [M, M, OV]  # PCIe transfers are overhead, not HBM bandwidth
    assert list(r.host_copy) == [False, False, True]


def test_kernel_without_op_falls_back_to_its_name():
    b = TraceBuilder()
    b.gpu_row("sm90_xmma_gemm_bf16bf16_bf16f32", 0, 50_000)
    b.gpu_row("void at::native::vectorized_elementwise_kernel<4>", 60_000, 50_000)
    b.window(0, 120_000)
    _, r = analyse(b)
    assert np.isnan(r.flops).all()
    assert list(r.regime) == [C, M]
    assert list(r.tensor_cores) == [1, 0]


def test_unknown_device_has_no_roofs_and_uses_names():
    _, r = single_op(
        "aten::mm", [[64, 64], [64, 64]], [BF16, BF16], "gemm_bf16", 50_000, device="Mystery GPU"
    )
    assert np.isnan(r.rates().roof_fraction[0]) and np.isnan(r.unit_peak_flops_per_s[0])
    assert r.regime[0] == C
    assert r.flops[0] == 2 * 64**3  # FLOPs need no roofs


def test_attention_flops_in_both_layouts():
    bh = [4, 16, 1024, 64]  # (batch, heads, seq, dim)
    bs = [4, 1024, 16, 64]  # (batch, seq, heads, dim) as _flash_attention_forward takes it
    fwd = 2 * (2 * 4 * 16 * 1024 * 1024 * 64)  # QK^T and PV: 2 x 2bhs^2d
    sdpa = op_cost("aten::_scaled_dot_product_flash_attention", parse_args(_j([bh, bh, bh]), _j([BF16] * 3)))
    flash = op_cost("aten::_flash_attention_forward", parse_args(_j([bs, bs, bs]), _j([BF16] * 3)))
    assert sdpa.flops == flash.flops == fwd
    bwd = op_cost(
        "aten::_scaled_dot_product_flash_attention_backward", parse_args(_j([bh] * 4), _j([BF16] * 4))
    )
    assert bwd.flops == pytest.approx(2.5 * sdpa.flops)  # five bmms vs two


def test_conv_backward_mask_from_kernel_names():
    assert conv_backward_mask(["sm90_xmma_dgrad_x", "init_device_workspace", "sm90_xmma_wgrad_y"]) == (
        True,
        True,
    )
    assert conv_backward_mask(["sm90_xmma_wgrad_y"]) == (False, True)
    assert conv_backward_mask(["nvjet_a", "nvjet_b"]) == (True, True)
    assert conv_backward_mask(["cutlass_kernel_a", "splitKreduce_kernel"]) == (False, True)


def test_kernel_stats_aggregate_by_name():
    b = TraceBuilder()
    for i in range(3):
        b.op("aten::mul", i * 100_000, 5_000, shapes=[[1 << 20], []], dtypes=[BF16, "Scalar"])
        b.launch("vectorized_elementwise_kernel<mul>", i * 100_000 + 1_000, i * 100_000 + 10_000, 10_000)
    b.window(0, 400_000)
    trace, r = analyse(b)
    (k,) = kernel_stats(trace, r)
    assert (k.calls, k.gpu_ns, k.regime) == (3, 30_000, Regime.MEMORY)
    assert k.bytes == 3 * 2 * (1 << 20) * 2
    assert k.achieved_bytes_per_s == pytest.approx(3 * 2 * (1 << 20) * 2 / 30e-6)
    assert k.uses_tensor_cores is False


def _j(x):
    import json

    return json.dumps(x)


# ------------------------------------------------------------------------------------------- peaks


@pytest.mark.parametrize(
    ("name", "expected"),
    [
        ("NVIDIA H200", "H200 SXM"),
        ("NVIDIA H100 80GB HBM3", "H100 SXM"),
        ("NVIDIA H100 PCIe", "H100 PCIe"),
        ("NVIDIA A100-SXM4-80GB", "A100 80GB SXM"),
        ("NVIDIA A100-SXM4-40GB", "A100 40GB SXM"),
        ("NVIDIA A100 80GB PCIe", "A100 80GB PCIe"),
        ("NVIDIA A100-PCIE-40GB", "A100 40GB PCIe"),
        ("NVIDIA L4", "L4"),
        ("NVIDIA L40S", "L40S"),
        ("NVIDIA A10G", "A10G"),
        ("NVIDIA A10", "A10"),
        ("NVIDIA GeForce RTX 4090", "RTX 4090"),
        ("Tesla V100-SXM2-16GB", "V100 SXM2"),
        ("Tesla T4", "T4"),
        ("NVIDIA GeForce GTX 1080", None),
    ],
)
def test_datasheet_matching(name, expected):
    spec = datasheet_spec(name)
    assert (spec.name if spec else None) == expected


def test_datasheet_figures_are_dense():
    h100 = datasheet_spec("NVIDIA H100 80GB HBM3")
    assert h100.tensor_flops_per_s == 989e12  # not the 1979 sparse figure
    assert datasheet_spec("NVIDIA A100-SXM4-80GB").tensor_flops_per_s == 312e12


def test_resolve_peaks_prefers_override_then_measured_then_datasheet():
    measured = Peaks(800e12, None, 4.26e12, "measured")
    trace = TraceBuilder(peaks=measured).build()
    p = resolve_peaks(trace, "fp32=50e12,bw=1")  # the user's fields win; the rest come from measurement
    assert (p.tensor_flops_per_s, p.fp32_flops_per_s, p.bytes_per_s, p.source) == (
        800e12,
        50e12,
        1.0,
        "override",
    )
    p = resolve_peaks(trace)
    assert (p.tensor_flops_per_s, p.bytes_per_s, p.source) == (800e12, 4.26e12, "measured")
    p = resolve_peaks(TraceBuilder().build(), {"flops": 700e12})
    assert (p.tensor_flops_per_s, p.fp32_flops_per_s, p.bytes_per_s, p.source) == (
        700e12,
        67e12,
        4.8e12,
        "override",
    )
    p = resolve_peaks(TraceBuilder().build())
    assert p.source == "datasheet:H200 SXM" and p.l2_bytes == 60 * 2**20
    p = resolve_peaks(TraceBuilder(device=None).build())
    assert (p.tensor_flops_per_s, p.bytes_per_s, p.source) == (None, None, "unknown")


def test_override_string_errors_are_one_line_value_errors():
    assert parse_override("flops=800e12, bw=4.2e12") == {"tensor_flops_per_s": 800e12, "bytes_per_s": 4.2e12}
    for bad in ("flops", "speed=3", "bw=fast", "bw=-1"):
        with pytest.raises(InputError):  # the CLI prints InputErrors as one line, no traceback
            parse_override(bad)


def test_layout_conversions_move_bytes_and_leave_the_flops_to_the_conv_kernel():
    x, w, out = [128, 256, 56, 56], [256, 256, 3, 3], [128, 256, 56, 56]
    b = TraceBuilder()
    b.op("aten::cudnn_convolution", 0, 20_000, shapes=[x, w, [], []], dtypes=[BF16, BF16, "", ""])
    b.launch("void cudnn::engines_precompiled::nchwToNhwcKernel<__nv_bfloat16>", 1_000, 10_000, 160_000)
    b.launch("sm90_xmma_fprop_implicit_gemm_bf16bf16_bf16f32_f32_nhwckrsc_nhwc", 2_000, 200_000, 100_000)
    b.launch("void cudnn::engines_precompiled::nhwcToNchwKernel<__nv_bfloat16>", 3_000, 350_000, 240_000)
    b.op("aten::add_", 30_000, 5_000, shapes=[out, out, []], dtypes=[BF16, BF16, "Scalar"])  # the consumer
    b.window(0, 700_000)
    _, r = analyse(b)
    flops = 2 * 128 * 256 * 256 * 9 * 56 * 56
    op_bytes = (2 * 128 * 256 * 56 * 56 + 256 * 256 * 9) * 2
    assert r.flops[:3].tolist() == [0.0, flops, 0.0]
    assert r.bytes[1] == op_bytes  # the conv kernel's own traffic
    assert r.bytes[0] == pytest.approx(2 * op_bytes * 160 / 400)  # conversions share 2x the op's bytes
    assert r.bytes[2] == pytest.approx(2 * op_bytes * 240 / 400)
    assert r.regime[:3].tolist() == [M, C, M]
    assert r.family[0] == Family.CONV  # still the conv's rows


def test_cudnn_sdpa_kernels_on_an_h200_recording_are_compute_bound():
    """GPT-2 small (B=16, T=1024, bf16) on an H200: the cuDNN SDPA kernels take the FLOPs of
    `_cudnn_attention_forward/backward` (they were costed per element as pointwise ops: ~0.05 TFLOP/s, memory)."""
    from analyzers.analyze import analyze
    from brrrtui.recording.load import load_trace

    a = analyze(load_trace(os.path.join(os.path.dirname(__file__), "fixtures", "h200_gpt_stream.brrr.gz")))
    fwd, bwd = (
        next(k for k in a.kernels if k.name.startswith(f"cudnn_generated_fort_native_sdpa_sm90_flash_{p}"))
        for p in ("fprop", "bprop")
    )
    per_call = 4 * 16 * 12 * 1024 * 1024 * 64  # QK^T and PV
    assert (fwd.calls, fwd.flops, fwd.bytes) == (24, 24 * per_call, 24 * 4 * 16 * 12 * 1024 * 64 * 2)
    # five bmms to the forward's two, all on the main kernel: cuDNN's helper kernels (dO.O row sums, dQ to
    # bf16) do no matrix math and move a share of the op's bytes
    assert bwd.calls == 24 and bwd.flops == 2.5 * fwd.flops
    helpers = [k for k in a.kernels if "compute_dot_do_o" in k.name or "convert_dq_to_16bits" in k.name]
    assert len(helpers) == 2 and all(k.flops == 0 and k.regime == Regime.MEMORY for k in helpers)
    assert helpers[0].bytes + helpers[1].bytes == pytest.approx(
        24 * (2 + 3) / 8 * 8 * 16 * 12 * 1024 * 64 * 2
    )
    for k in (fwd, bwd):
        assert k.regime == Regime.COMPUTE and k.uses_tensor_cores
        assert k.achieved_flops_per_s > 400e12 and k.roof_fraction > 0.4
