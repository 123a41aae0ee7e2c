"""validation/op_classes.py: Ivanov et al.'s operator classes from kernel and op names, and the share sums."""

from __future__ import annotations

import importlib.util
import math
import os
import sys

import pytest

from brrrtui.contract.model import (
    GPU_SCHEMA,
    OP_SCHEMA,
    RUNTIME_SCHEMA,
    SPAN_SCHEMA,
    STEP_SCHEMA,
    TELEMETRY_SCHEMA,
    WINDOW_SCHEMA,
    GpuKind,
    StringTable,
    Trace,
    empty_table,
    table_from_rows,
)

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
_spec = importlib.util.spec_from_file_location(
    "op_classes", os.path.join(ROOT, "validation", "op_classes.py")
)
oc = importlib.util.module_from_spec(_spec)
sys.modules["op_classes"] = oc  # dataclasses look their module up by name
_spec.loader.exec_module(oc)
CON, NORM, ELEM, OTH = (
    oc.OpClass.CONTRACTION,
    oc.OpClass.NORMALIZATION,
    oc.OpClass.ELEMENTWISE,
    oc.OpClass.OTHER,
)

GENERIC_ADD = (
    "void at::native::vectorized_elementwise_kernel<4, at::native::CUDAFunctor_add<float>, "
    "std::array<char*, 3ul> >(int, at::native::CUDAFunctor_add<float>, std::array<char*, 3ul>)"
)
CLAMP = (
    "void at::native::vectorized_elementwise_kernel<8, at::native::(anonymous namespace)::launch_clamp_scalar("
    "at::TensorIteratorBase&, c10::Scalar, c10::Scalar, at::native::detail::ClampLimits)::{lambda()#1}::operator()"
    "() const::{lambda()#9}::operator()() const::{lambda(c10::BFloat16)#1}, std::array<char*, 2ul> >(int, ...)"
)
DROPOUT = (
    "void at::native::(anonymous namespace)::fused_dropout_kernel_vec<float, float, unsigned int, 1, 4, bool>("
    "at::cuda::detail::TensorInfo<float const, unsigned int>, at::cuda::detail::TensorInfo<float, unsigned int>, "
    "at::cuda::detail::TensorInfo<bool, unsigned int>, unsigned int, float, at::PhiloxCudaState)"
)
LOG_SOFTMAX = (
    "void at::native::(anonymous namespace)::cunn_SoftMaxForward<4, float, float, float, "
    "at::native::(anonymous namespace)::LogSoftMaxForwardEpilogue>(float*, float const*, int)"
)


@pytest.mark.parametrize(
    ("kernel", "ops", "want"),
    [
        # contractions by kernel name, whatever launched them
        ("nvjet_sm90_tst_256x128_64x4_1x2_h_bz_coopA_NNN", (), CON),
        ("sm90_xmma_fprop_implicit_gemm_bf16bf16_bf16f32_f32_nhwckrsc_nhwc_tilesize128x128x64", (), CON),
        ("void cutlass::Kernel2<cutlass_80_tensorop_s16816gemm_bf16_64x128_64x4_nt_align8>(Params)", (), CON),
        ("ampere_sgemm_128x64_nn", ("aten::mm", "MmBackward0"), CON),
        ("void cublasLt::splitKreduce_kernel<32, 16, int, float>(...)", ("aten::addmm",), CON),
        ("void pytorch_flash::flash_fwd_kernel<Flash_fwd_kernel_traits<64>>(Params)", (), CON),
        ("fmha_cutlassF_f32_aligned_64x64_rf_sm80", (), CON),
        ("triton_tem_fused_addmm_0", (), CON),
        # normalisations by kernel name
        ("void (anonymous namespace)::softmax_warp_forward<float, float, float, 9, false, false>(...)", (), NORM),
        ("void at::native::(anonymous namespace)::vectorized_layer_norm_kernel<float, float>(int, float, ...)", (), NORM),
        ("void at::native::(anonymous namespace)::GammaBetaBackwardCUDAKernel_32x32<float, float>(...)", (), NORM),
        ("void at::native::batch_norm_collect_statistics_channels_last_kernel<at::native::Var, float>", (), NORM),
        ("triton_per_fused_native_layer_norm_3", (), NORM),
        ("triton_red_fused__softmax_add_5", (), NORM),
        # element-wise: named, or generic under an element-wise or no op
        (DROPOUT, ("aten::native_dropout", "aten::dropout"), ELEM),  # PhiloxCudaState is not an RNG kernel
        (CLAMP, ("aten::clamp_min_", "aten::relu_"), ELEM),  # "{lambda" must not read as an optimizer name
        (GENERIC_ADD, ("aten::add",), ELEM),
        (GENERIC_ADD, (), ELEM),
        ("triton_poi_fused_add_gelu_0", (), ELEM),
        # generic kernels take the outermost op with a class
        (GENERIC_ADD, ("aten::addmm", "aten::linear"), ELEM),  # bias of a matmul op
        ("void at::native::reduce_kernel<512, 1, ...>", ("aten::sum", "AddmmBackward0",
                                                          "autograd::engine::evaluate_function: AddmmBackward0"), ELEM),
        (GENERIC_ADD, ("aten::add", "aten::native_layer_norm_backward", "NativeLayerNormBackward0",
                       "autograd::engine::evaluate_function: NativeLayerNormBackward0"), NORM),
        (GENERIC_ADD, ("aten::copy_", "aten::to", "aten::softmax"), NORM),  # autocast cast inside softmax
        # other: copies, optimizer, embedding, loss, RNG, and whatever runs under them
        ("Memcpy HtoD (Pageable -> Device)", (), OTH),
        ("void at::native::(anonymous namespace)::multi_tensor_apply_kernel<TensorListMetadata<4>, "
         "FusedAdamMathFunctor<float, 4>>(...)", ("aten::_fused_adamw_", "Optimizer.step#AdamW.step"), OTH),
        (GENERIC_ADD, ("aten::add_", "aten::_foreach_add_", "Optimizer.step#AdamW.step"), OTH),
        ("void at::native::(anonymous namespace)::indexSelectLargeIndex<float, long, unsigned int, 2, 2, -2, true>",
         ("aten::index_select", "aten::embedding"), OTH),
        (LOG_SOFTMAX, ("aten::_log_softmax", "aten::log_softmax", "aten::cross_entropy_loss"), OTH),
        ("void at::native::(anonymous namespace)::nll_loss_forward_reduce_cuda_kernel_2d<float, float, long>", (), OTH),
        (GENERIC_ADD, ("aten::add_", "torch::autograd::AccumulateGrad",
                       "autograd::engine::evaluate_function: torch::autograd::AccumulateGrad"), OTH),
        ("void at::native::(anonymous namespace)::max_pool_forward_nhwc<float, int>(...)", ("aten::max_pool2d",), OTH),
    ],
)  # fmt: skip
def test_classify(kernel, ops, want):
    assert oc.classify(kernel, ops) is want


def test_copy_rows_are_other_whatever_their_name():
    assert oc.classify("nvjet_sm90_tst_x", (), is_copy=True) is OTH


@pytest.mark.parametrize(
    ("op", "squashed"),
    [
        ("aten::native_layer_norm_backward", "nativelayernorm"),
        ("NativeLayerNormBackward0", "nativelayernorm"),
        ("autograd::engine::evaluate_function: AddmmBackward0", "addmm"),
        ("aten::_softmax_backward_data", "softmaxbackwarddata"),
        ("aten::relu_", "relu"),
        ("torch::autograd::AccumulateGrad", "accumulategrad"),
    ],
)
def test_squash_op(op, squashed):
    assert oc.squash_op(op) == squashed


def test_op_class():
    assert oc.op_class("aten::linear") is CON
    assert oc.op_class("ScaledDotProductEfficientAttentionBackward0") is CON
    assert oc.op_class("aten::layer_norm") is NORM
    assert oc.op_class("Optimizer.zero_grad#AdamW.zero_grad") is OTH
    assert oc.op_class("aten::_foreach_norm") is OTH
    assert oc.op_class("aten::native_dropout") is ELEM
    assert oc.op_class("aten::copy_") is None
    assert oc.op_class("ProfilerStep#3") is None


def test_shares_exact():
    rows = [
        oc.KernelRow("nvjet_a", (), 600.0, 9_980.0),
        oc.KernelRow("softmax_warp_forward", (), 250.0, 17.0),
        oc.KernelRow(GENERIC_ADD, ("aten::add",), 100.0, 3.0),
        oc.KernelRow(GENERIC_ADD, ("aten::add",), 50.0, float("nan")),  # FLOPs unknown
        oc.KernelRow("multi_tensor_apply_kernel<x>", (), 1000.0, 5.0, calls=4),
    ]
    s = oc.shares(rows)
    assert (s[CON].calls, s[CON].gpu_ns, s[CON].flops) == (1, 600.0, 9_980.0)
    assert s[CON].time_share == 0.6 and s[NORM].time_share == 0.25 and s[ELEM].time_share == 0.15
    assert s[CON].flop_share == pytest.approx(0.998, rel=1e-15)
    assert s[NORM].flop_share == pytest.approx(0.0017, rel=1e-12)
    assert s[ELEM].flop_share == pytest.approx(0.0003, rel=1e-12)
    assert (s[ELEM].calls, s[ELEM].gpu_ns, s[ELEM].unknown_flops_ns) == (2, 150.0, 50.0)
    assert (s[OTH].calls, s[OTH].time_share, s[OTH].flop_share) == (4, None, None)
    assert s[OTH].time_share_all == 0.5 and s[CON].time_share_all == 0.3
    text = oc.format_table(s)
    assert "| tensor contraction | 1 | 0.00 | 99.80 % | 99.80 % | 60.0 % | 61.0 % | 30.0 % |" in text
    assert "FLOPs unknown for kernels holding 5.0 %" in text


def test_rows_from_report():
    report = {"kernels": [
        {"name": "nvjet_a", "calls": 3, "gpu_ns": 2_000_000, "regime": "compute", "achieved_flops_per_s": 5e14},
        {"name": GENERIC_ADD, "calls": 7, "gpu_ns": 1000, "regime": "memory", "achieved_flops_per_s": None},
    ]}  # fmt: skip
    a, b = oc.rows_from_report(report)
    assert (a.calls, a.gpu_ns, a.flops) == (3, 2e6, 1e12)
    assert (b.calls, b.flops, oc.classify(b.name, b.ops)) == (7, None, ELEM)


def _trace() -> Trace:
    """One thread: linear(addmm: gemm + bias add), layer_norm, an AdamW step, and a memcpy."""
    st = StringTable()
    nan = float("nan")
    ops = table_from_rows(
        [  # window, name, start, dur, tid, seq, fwd_tid, shapes, dtypes, flops
            (0, st("aten::linear"), 0, 100, 1, -1, -1, -1, -1, nan),
            (0, st("aten::addmm"), 10, 80, 1, -1, -1, -1, -1, 1000.0),
            (0, st("aten::layer_norm"), 200, 100, 1, -1, -1, -1, -1, nan),
            (0, st("aten::native_layer_norm"), 210, 80, 1, -1, -1, -1, -1, nan),
            (0, st("Optimizer.step#AdamW.step"), 400, 100, 1, -1, -1, -1, -1, nan),
            (0, st("aten::_foreach_add_"), 410, 80, 1, -1, -1, -1, -1, nan),
        ],
        OP_SCHEMA,
    )
    launch = st("cudaLaunchKernel")
    runtime = table_from_rows(
        [(0, launch, t, 5, 1, corr) for t, corr in ((20, 1), (30, 2), (220, 3), (420, 4))], RUNTIME_SCHEMA
    )
    k = GpuKind.KERNEL
    gpu = table_from_rows(
        [  # window, kind, name, start, dur, device, stream, correlation, grid, block, bytes
            (0, k, st("nvjet_sm90_tst_x"), 40, 50, 0, 7, 1, -1, -1, -1),
            (0, k, st(GENERIC_ADD), 95, 10, 0, 7, 2, -1, -1, -1),
            (
                0,
                k,
                st("void at::native::vectorized_layer_norm_kernel<float, float>"),
                230,
                20,
                0,
                7,
                3,
                -1,
                -1,
                -1,
            ),
            (0, k, st("void multi_tensor_apply_kernel<x>"), 430, 5, 0, 7, 4, -1, -1, -1),
            (0, GpuKind.MEMCPY, st("Memcpy DtoH (Device -> Pinned)"), 600, 7, 0, 7, -1, -1, -1, 4),
        ],
        GPU_SCHEMA,
    )
    schemas = {
        "spans": SPAN_SCHEMA,
        "windows": WINDOW_SCHEMA,
        "steps": STEP_SCHEMA,
        "telemetry": TELEMETRY_SCHEMA,
    }
    empty = {name: empty_table(schema) for name, schema in schemas.items()}
    return Trace(strings=st.strings, lines=[], gpu=gpu, runtime=runtime, ops=ops, **empty)


def test_rows_from_trace_without_analyze(monkeypatch):
    monkeypatch.setitem(sys.modules, "analyzers.analyze", None)  # import fails: torch.profiler's FLOPs
    rows, source = oc.rows_from_trace(_trace())
    assert "no analyzers.analyze" in source
    assert [r.ops for r in rows[:2]] == [("aten::addmm", "aten::linear")] * 2
    assert rows[4].ops == () and rows[4].is_copy
    assert [oc.classify(r.name, r.ops, r.is_copy) for r in rows] == [CON, ELEM, NORM, OTH, OTH]
    assert rows[0].flops == 1000.0 and all(math.isnan(r.flops) for r in rows[1:])
    s = oc.shares(rows)
    assert (s[CON].time_share, s[ELEM].time_share, s[NORM].time_share) == (0.625, 0.125, 0.25)
    assert s[CON].flop_share == 1.0
    assert s[OTH].gpu_ns == 12.0
