"""Findings: each finder fires on the timeline it is about, with its numbers and action, and stays quiet otherwise."""

from __future__ import annotations

import pytest
from fixtures.synthetic import BF16, F32, TraceBuilder

from analyzers.analyze import analyze
from brrrtui.contract.model import GpuKind
from brrrtui.present.finding_words import action, message

N = 1 << 24


def kinds(a):
    return [f.kind for f in a.findings]


def test_fp32_matmul_off_tensor_cores():
    b = TraceBuilder()
    ln = b.line("train.py", 30)
    b.span(ln, 0, 20_000)
    n = 4096
    b.op("aten::mm", 1_000, 10_000, shapes=[[n, n], [n, n]], dtypes=[F32, F32])
    b.launch("ampere_sgemm_128x64_nn", 2_000, 5_000, 3_000_000)  # 137 GFLOP in 3 ms: 46 TFLOP/s
    b.window(0, 3_010_000, first_step=0, last_step=0)
    a = analyze(b.build())
    (f,) = [f for f in a.findings if f.kind == "no_tensor_cores"]
    # at the TF32 roof (494.5 TFLOP/s) the matmul would take 2 n^3 / 494.5e12 s
    assert f.saving_ns == pytest.approx(3_000_000 - 2 * n**3 / 494.5e12 * 1e9)
    assert 'set_float32_matmul_precision("high")' in action(f) and "autocast" in action(f)
    assert f.lines[0].line == 30 and "train.py:30" in message(f)


def test_bf16_matmul_raises_no_tensor_core_finding():
    b = TraceBuilder()
    b.op("aten::mm", 0, 10_000, shapes=[[4096, 4096], [4096, 4096]], dtypes=[BF16, BF16])
    b.launch("sm90_xmma_gemm_bf16bf16", 1_000, 5_000, 200_000)
    b.window(0, 210_000, first_step=0, last_step=0)
    assert "no_tensor_cores" not in kinds(analyze(b.build()))


def test_per_parameter_optimizer_loop():
    b = TraceBuilder()
    b.op("Optimizer.step#Adam.step", 0, 1_000_000)
    for i in range(120):  # two small kernels per parameter, no multi_tensor_apply
        b.op("aten::mul_", 1_000 + i * 8_000, 3_000, shapes=[[1024], []], dtypes=[F32, "Scalar"])
        b.launch("vectorized_elementwise_kernel<mul>", 2_000 + i * 8_000, 10_000 + i * 8_000, 3_000)
    b.step(0, 0)
    b.step(1, 1_000_000)
    b.window(0, 1_000_000, first_step=1, last_step=1)
    a = analyze(b.build())
    (f,) = [f for f in a.findings if f.kind == "optimizer"]
    assert message(f).startswith("Adam.step launches 120 kernels per step")
    assert "foreach=True" in action(f) and "fused=True" in action(f)


def test_matmul_softmax_matmul_suggests_sdpa():
    b = TraceBuilder()
    ln = b.line("attn.py", 12)
    b.span(ln, 0, 100_000)
    bh, s, d = 64, 1024, 64
    seq = [
        ("aten::bmm", [[bh, s, d], [bh, d, s]], [BF16, BF16], "sm90_xmma_gemm_bf16bf16", 40_000),
        ("aten::div", [[bh, s, s], []], [BF16, "Scalar"], "vectorized_elementwise_kernel<div>", 60_000),
        ("aten::_softmax", [[bh, s, s], [], []], [BF16, "Scalar", "Scalar"], "softmax_warp_forward", 80_000),
        ("aten::bmm", [[bh, s, s], [bh, s, d]], [BF16, BF16], "sm90_xmma_gemm_bf16bf16", 40_000),
    ]
    t = 10_000
    for i, (name, shapes, dtypes, kernel, dur) in enumerate(seq):
        b.op(name, 1_000 + i * 5_000, 4_000, shapes=shapes, dtypes=dtypes)
        b.launch(kernel, 2_000 + i * 5_000, t, dur)
        t += dur + 1_000
    b.window(0, t + 1_000, first_step=0, last_step=0)
    a = analyze(b.build())
    (f,) = [f for f in a.findings if f.kind == "attention"]
    assert f.saving_ns == 140_000  # the div and softmax kernels between the two matmuls
    assert "F.scaled_dot_product_attention" in action(f)
    assert "attn.py:12" in message(f)


def test_overhead_bound_loop_of_tiny_kernels():
    b = TraceBuilder()
    ln = b.line("loop.py", 5)
    for i in range(200):  # a 2 us kernel every 20 us of CPU time
        t = i * 20_000
        b.span(ln, t, 15_000)
        b.op("aten::add", t + 1_000, 12_000, shapes=[[32], [32], []], dtypes=[F32, F32, "Scalar"])
        b.launch("vectorized_elementwise_kernel<add>", t + 10_000, t + 15_000, 2_000)
    b.window(0, 200 * 20_000, first_step=0, last_step=0)
    a = analyze(b.build())
    assert a.breakdown.overhead_ns == a.breakdown.span_ns  # tiny kernels + idle
    assert a.overhead.raw_overhead_fraction == 1.0
    found = {f.kind: f for f in a.findings}
    assert {"overhead", "small_kernels"} <= set(found)
    assert "CUDA graphs" in action(found["overhead"])
    assert message(found["small_kernels"]).startswith("200 kernels per step (100% of all) finish before")
    assert found["overhead"].lines[0].line == 5


def test_small_kernels_mostly_without_a_line_say_so_rather_than_blame_the_few_lines_known():
    b = TraceBuilder()
    ln = b.line("loop.py", 5)
    for i in range(200):  # three of four tiny kernels launched outside any span
        t = i * 20_000
        if i % 4 == 0:
            b.span(ln, t, 15_000)
        b.op("aten::add", t + 1_000, 12_000, shapes=[[32], [32], []], dtypes=[F32, F32, "Scalar"])
        b.launch("vectorized_elementwise_kernel<add>", t + 10_000, t + 15_000, 2_000)
    b.window(0, 200 * 20_000, first_step=0, last_step=0)
    (f,) = [f for f in analyze(b.build()).findings if f.kind == "small_kernels"]
    assert message(f).endswith("in front of them; 75% of them from no known line, the others from loop.py:5")


def test_dataloader_finding_when_it_covers_most_of_the_gap():
    b = TraceBuilder()
    lk, ld, lh = b.line("t.py", 20), b.line("t.py", 18, "<module>"), b.line("t.py", 19, "<module>")
    b.span(lk, 0, 5_000)
    b.op("aten::mul", 0, 4_000, shapes=[[N], []], dtypes=[BF16, "Scalar"])
    b.launch("vectorized_elementwise_kernel<mul>", 1_000, 2_000, 20_000)
    b.span(ld, 23_000, 300_000)
    b.op("enumerate(DataLoader)#_SingleProcessDataLoaderIter.__next__", 24_000, 290_000)
    b.span(lh, 330_000, 200_000)
    b.op("aten::to", 331_000, 190_000, shapes=[[N]], dtypes=[BF16])
    b.launch("Memcpy HtoD (Pageable -> Device)", 332_000, 340_000, 150_000, kind=GpuKind.MEMCPY, nbytes=2 * N,
             launch_dur_ns=185_000)  # fmt: skip
    b.span(lk, 530_000, 5_000)
    b.op("aten::mul", 530_000, 4_000, shapes=[[N], []], dtypes=[BF16, "Scalar"])
    b.launch("vectorized_elementwise_kernel<mul>", 531_000, 540_000, 20_000)
    b.window(2_000, 560_000, first_step=0, last_step=0)
    a = analyze(b.build())
    # one gap, 22 -> 540 us: the DataLoader covers 290 of 518 us, more than half: DATA
    (f,) = [f for f in a.findings if f.kind == "data"]
    assert f.lines[0].line == 18 and f.saving_ns == 518_000
    assert "num_workers" in action(f)


def test_h2d_finding_reports_bytes_and_pageable_memory():
    b = TraceBuilder()
    lx, lh = b.line("t.py", 5), b.line("t.py", 6)
    b.span(lx, 0, 5_000)
    b.op("aten::mul", 0, 4_000, shapes=[[N], []], dtypes=[BF16, "Scalar"])
    b.launch("vectorized_elementwise_kernel<mul>", 1_000, 2_000, 20_000)
    b.span(lh, 21_000, 200_000)
    b.op("aten::to", 21_500, 190_000, shapes=[[N]], dtypes=[BF16])
    b.launch("Memcpy HtoD (Pageable -> Device)", 22_000, 30_000, 180_000, kind=GpuKind.MEMCPY, nbytes=2 * N,
             launch_dur_ns=185_000)  # fmt: skip
    b.span(lx, 215_000, 5_000)
    b.op("aten::mul", 215_000, 4_000, shapes=[[N], []], dtypes=[BF16, "Scalar"])
    b.launch("vectorized_elementwise_kernel<mul>", 216_000, 220_000, 20_000)
    b.window(2_000, 240_000, first_step=0, last_step=0)
    a = analyze(b.build())
    (f,) = [f for f in a.findings if f.kind == "h2d"]
    assert f.lines[0].line == 6 and f.saving_ns == 198_000  # 22 -> 220 us
    assert "33.6 MB per step" in message(f) and "pageable" in message(f)
    assert "pin_memory=True" in action(f) and "non_blocking=True" in action(f)
