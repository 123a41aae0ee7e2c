"""Fusion chains: which kernels join, the bytes a fused kernel would not move, and the finding's numbers."""

from __future__ import annotations

import pytest
from fixtures.synthetic import BF16, H200_BW, TraceBuilder

from analyzers.analyze import analyze
from analyzers.cost.peaks import resolve_peaks
from analyzers.cost.roofline import roofline
from analyzers.fusion.chains import fusion_chains, named_pattern
from analyzers.link.links import link
from brrrtui.contract.model import GpuKind
from brrrtui.present.finding_words import action, message

N = 1 << 24  # bf16 elements: 32 MiB per tensor
T = N * 2


def pointwise_trace(ops, gap_ns=2_000, dur_ns=20_000, between=None) -> TraceBuilder:
    """ops: [(line, aten name, shapes, dtypes)], one kernel each, back to back on stream 7.
    `between`: {index: (kernel name, aten name, shapes, dtypes, kind)} launched before ops[index]."""
    b = TraceBuilder()
    lines: dict[int, int] = {}
    cpu, gpu = 0, 10_000
    for i, (ln, name, shapes, dtypes) in enumerate(ops):
        if between and i in between:
            kname, oname, s, d, kind = between[i]
            b.op(oname, cpu, 3_000, shapes=s, dtypes=d)
            b.launch(kname, cpu + 1_000, gpu, 1_000, kind=kind, nbytes=64 if kind != GpuKind.KERNEL else -1)
            cpu, gpu = cpu + 4_000, gpu + 1_000 + gap_ns
        if ln not in lines:
            lines[ln] = b.line("model.py", ln, "forward")
        b.span(lines[ln], cpu, 4_000)
        b.op(name, cpu + 500, 3_000, shapes=shapes, dtypes=dtypes)
        b.launch(f"vectorized_elementwise_kernel<{name}>", cpu + 1_000, gpu, dur_ns)
        cpu, gpu = cpu + 4_000, gpu + dur_ns + gap_ns
    b.window(0, gpu + 10_000, first_step=0, last_step=0)
    return b


CHAIN = [
    (10, "aten::mul", [[N], []], [BF16, "Scalar"]),  # y = x * 2
    (11, "aten::add", [[N], []], [BF16, "Scalar"]),  # z = y + 1
    (12, "aten::sin", [[N]], [BF16]),  # w = z.sin()
]


def chains_of(b: TraceBuilder):
    trace = b.build()
    links = link(trace)
    peaks = resolve_peaks(trace)
    roof = roofline(trace, links, peaks)
    return fusion_chains(trace, links, roof, peaks, per_launch_ns=2_000.0)


def test_pointwise_chain_bytes_and_saving_are_exact():
    (c,) = chains_of(pointwise_trace(CHAIN))
    assert c.op_names == ["aten::mul", "aten::add", "aten::sin"]
    assert c.occurrences == 1
    assert c.bytes_now == 3 * 2 * T  # each op reads and writes one tensor
    assert c.bytes_saved == 2 * 2 * T  # y and z: not written, not re-read
    assert c.bytes_fused == 2 * T  # read x, write w
    # fused at the chain's own bandwidth (2T per 20 us kernel, under H200_BW): the intermediates' share of
    # its kernels' time
    assert 2 * T / 20_000e-9 < H200_BW
    assert c.saving_ns == pytest.approx(2 * 2 * T / (2 * T / 20_000e-9) * 1e9 + 2 * 2_000)
    assert c.pattern is None


def test_fusion_finding_in_the_analysis():
    a = analyze(pointwise_trace(CHAIN).build())
    (f,) = [f for f in a.findings if f.kind == "fusion"]
    assert [ln.line for ln in f.lines] == [10, 11, 12]
    assert f.saving_ns == pytest.approx(2 * 2 * T / (2 * T / 20_000e-9) * 1e9 + 2 * a.per_launch_ns)
    assert a.per_launch_ns == 2_000
    assert (
        "3 memory-bound kernels (mul, add, sin) on lines 10–12 of model.py move 201 MB per step" in message(f)
    )
    assert "134 MB less" in message(f) and "2 launches" in message(f)
    assert "torch.compile the function `forward`" in action(f)


def test_shapes_that_do_not_flow_break_the_chain():
    ops = [CHAIN[0], (11, "aten::add", [[N // 2], []], [BF16, "Scalar"])]
    assert chains_of(pointwise_trace(ops)) == []


def test_distant_lines_break_the_chain_unless_one_function():
    far = [CHAIN[0], (40, "aten::add", [[N], []], [BF16, "Scalar"])]
    (c,) = chains_of(pointwise_trace(far))  # same file, same function `forward`
    assert c.line_ids == [0, 1]


def test_a_matmul_between_breaks_the_chain():
    mm = ("sm90_xmma_gemm_bf16", "aten::mm", [[4096, 4096], [4096, 4096]], [BF16, BF16], GpuKind.KERNEL)
    assert chains_of(pointwise_trace(CHAIN[:2], between={1: mm})) == []


def test_a_small_fill_between_is_skipped():
    fill = (
        "vectorized_elementwise_kernel<FillFunctor>",
        "aten::fill_",
        [[16], []],
        ["int", "Scalar"],
        GpuKind.KERNEL,
    )
    (c,) = chains_of(pointwise_trace(CHAIN, between={1: fill}))
    assert len(c.rows) == 3


def test_a_longer_run_is_one_chain():
    (c,) = chains_of(pointwise_trace(CHAIN + CHAIN))  # w (line 12) feeds the next mul (line 10)
    assert len(c.rows) == 6 and c.occurrences == 1


def test_repeats_of_a_chain_are_grouped():
    mm = ("sm90_xmma_gemm_bf16", "aten::mm", [[4096, 4096], [4096, 4096]], [BF16, BF16], GpuKind.KERNEL)
    (c,) = chains_of(pointwise_trace(CHAIN + CHAIN, between={3: mm}))  # as in two steps
    assert c.occurrences == 2 and len(c.rows) == 3 and len(c.all_rows) == 6
    assert c.bytes_now == 2 * 3 * 2 * T and c.bytes_saved == 2 * 2 * 2 * T


def test_named_patterns():
    gelu = [
        "aten::pow",
        "aten::mul",
        "aten::add",
        "aten::mul",
        "aten::tanh",
        "aten::add",
        "aten::mul",
        "aten::mul",
    ]
    assert named_pattern(gelu) == "gelu_tanh"
    assert named_pattern(["aten::mul", "aten::div", "aten::erf", "aten::add", "aten::mul"]) == "gelu"
    assert (
        named_pattern(["aten::mean", "aten::sub", "aten::pow", "aten::mean", "aten::add", "aten::rsqrt"])
        == "layer_norm"
    )
    assert named_pattern(["aten::pow", "aten::mean", "aten::add", "aten::rsqrt", "aten::mul"]) == "rms_norm"
    assert named_pattern(["aten::mul", "aten::add", "aten::tanh"]) is None
    assert named_pattern(["aten::sigmoid", "aten::mul"]) == "silu"
    # the old counting rule called these GELU / norms; their structure is not the formula's
    assert named_pattern(["aten::tanh", "aten::mul", "aten::add"] * 3) is None  # h = tanh(h) + 0.5*h, looped
    assert (
        named_pattern(["aten::mul", "aten::tanh", "aten::pow", "aten::add", "aten::mul", "aten::mul"]) is None
    )
    assert named_pattern(["aten::rsqrt", "aten::mul", "aten::sub"]) is None  # no reduction before it
    assert named_pattern(["aten::erf", "aten::mul"]) is None


SC, TN = [], [N]  # a Python-number operand is recorded as [] (dtype double), a tensor by its shape


def ops_with_operands(*spec: tuple[str, list[list[int]]]):
    """(aten name, operand shapes) -> pointwise_trace ops on line 20, dtypes as torch.profiler records them."""
    return [(20, f"aten::{n}", shapes, [BF16 if s else "double" for s in shapes]) for n, shapes in spec]


# HF NewGELUActivation, op by op as recorded on the H200 (hf_gpt2): 0.5*x * (1 + tanh(c * (x + k * x**3)))
REAL_GELU = ops_with_operands(
    ("mul", [TN, SC]),
    ("pow", [TN, SC]),
    ("mul", [TN, SC]),
    ("add", [TN, TN]),
    ("mul", [TN, SC]),
    ("tanh", [TN]),
    ("add", [TN, SC]),
    ("mul", [TN, TN]),
)


def test_gelu_chain_suggests_f_gelu():
    a = analyze(pointwise_trace(REAL_GELU).build())
    (f,) = [f for f in a.findings if f.kind == "fusion"]
    assert 'F.gelu(x, approximate="tanh")' in action(f)


def test_tanh_plus_half_is_not_called_gelu():
    """`tanh(h) + 0.5*h`: tanh, mul, add of the right names, but not GELU's structure -> generic advice."""
    not_gelu = ops_with_operands(("tanh", [TN]), ("mul", [TN, SC]), ("add", [TN, TN]))
    for ops in (not_gelu, not_gelu * 3):  # once, and in a loop
        a = analyze(pointwise_trace(ops).build())
        (f,) = [f for f in a.findings if f.kind == "fusion"]
        assert "gelu" not in action(f).lower() and "torch.compile the function `forward`" in action(f)


def test_operands_decide_between_a_formula_and_a_look_alike():
    """Same op names as REAL_GELU, but x + k*x**3 added a scalar (add_s) instead of x: not GELU."""
    look_alike = [
        op if i != 3 else (20, "aten::add", [TN, SC], [BF16, "double"]) for i, op in enumerate(REAL_GELU)
    ]
    chains = chains_of(pointwise_trace(look_alike))
    assert chains and chains[0].pattern is None
    (c,) = chains_of(pointwise_trace(REAL_GELU))
    assert c.pattern == "gelu_tanh"
