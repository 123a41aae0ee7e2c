"""Issue 39, slow GEMMs inside a library recurrent op: cuDNN's LSTM (`_cudnn_rnn`, `_cudnn_rnn_backward`) runs one
small GEMM per time step and layer whose M is the batch, beside one big input projection per layer. The slow_gemm
finding on such kernels showed empty shapes "()" and blamed a pre-Hopper fallback kernel, with a cure
(.contiguous(), multiples of 64) that does nothing for a recurrence. It now names the recurrence, the per-step
GEMM's shapes read from the op's recorded tensors, and cures that hold (float16 under autocast, a larger batch).
Hand-built H200 traces with exact arithmetic, and the committed LSTM recording."""

from __future__ import annotations

import ast
import os
import re

import numpy as np
import pytest
from fixtures.synthetic import H200_BF16, TraceBuilder

from analyzers.analyze import analyze
from analyzers.cost.gemm_shapes import Recurrence, diagnose, recurrence
from analyzers.cost.op_families import Family
from analyzers.cost.tensor_args import TensorArg
from analyzers.findings.efficiency import RECURRENT_SAVING
from analyzers.results import FindingKind
from brrrtui.present.finding_words import action, message

B, T, IN, H, LAYERS = 16, 32, 256, 512, 2  # batch, time steps, input features, hidden size, layers
GATES = 4  # an LSTM
GEMM = "void cutlass::Kernel2<cutlass_80_tensorop_s1688gemm_64x64_32x6_nn_align4>(cutlass_80_tensorop_s1688gemm_64x64_32x6_nn_align4::Params)"  # noqa: E501
CELL = (
    "void elemWiseRNNcell<float, float, float, (cudnnRNNMode_t)2, (cudnnRNNBiasMode_t)2>(int, int, int, int)"
)
TF32 = 0.5 * H200_BF16  # the roof of fp32 GEMMs on tensor cores (roofline.TF32_OVER_BF16)
FRACTION = 0.1  # the GEMMs' rate, of that roof
GEMM_NS = 20_000  # each step's GEMM kernel
CELL_NS = 4_000


def _weights(inp: int = IN, gates: int = GATES, hidden: int = H, layers: int = LAYERS, dirs: int = 1) -> int:
    """Elements of cuDNN's flat weight buffer: per layer and direction W_ih, W_hh and two biases."""
    first = gates * hidden * (inp + hidden) + 2 * gates * hidden
    rest = gates * hidden * (dirs * hidden + hidden) + 2 * gates * hidden
    return dirs * (first + (layers - 1) * rest)


def _rnn_args(backward: bool) -> tuple[list[list[int]], list[str]]:
    """The recorded shapes and dtypes of _cudnn_rnn(input, weight[], weight_stride0, weight_buf, hx, cx, mode,
    ...) and of _cudnn_rnn_backward(..., output, grad_output, ...), batch_first."""
    shapes: list[list[int]] = [[B, T, IN], [], [], [_weights()], [LAYERS, B, H], [LAYERS, B, H]]
    dtypes = ["float", "TensorList", "Scalar", "float", "float", "float"]
    if backward:
        shapes += [[B, T, H], [B, T, H]]
        dtypes += ["float", "float"]
    return shapes + [[]] * 8, dtypes + ["Scalar"] * 8


def _gemm_rate_ns(backward: bool) -> int:
    """Each op's GEMM kernels' total time: the op's FLOPs (cost/layer_costs.py: 2 x tokens x weights forward,
    twice that backward) at FRACTION of the TF32 roof."""
    flops = 2.0 * B * T * _weights() * (2 if backward else 1)
    return round(flops / (FRACTION * TF32) * 1e9)


def lstm_trace():
    """One step: the forward op launches LAYERS x T per-step GEMMs with an elementwise cell kernel after each,
    the backward op the same; the GEMMs of each op together run at FRACTION of the TF32 roof."""
    b = TraceBuilder()
    line = b.line("lm.py", 25, "forward")
    root = ("", "LM")
    t = 0
    gemm_rows: list[int] = []
    for backward in (False, True):
        n = LAYERS * T
        per = _gemm_rate_ns(backward) / n
        span = round(n * (per + CELL_NS) + 200_000)
        b.span(line, t, span, modules=[root, ("rnn", "LSTM")])
        shapes, dtypes = _rnn_args(backward)
        b.op(
            "aten::_cudnn_rnn_backward" if backward else "aten::_cudnn_rnn",
            t + 100,
            span - 200,
            shapes,
            dtypes,
        )
        g = t + 1_000
        for i in range(n):
            dur = round(per * (i + 1)) - round(per * i)
            gemm_rows.append(b.launch(GEMM, t + 200 + 10 * i, g, dur))
            g += dur
            b.launch(CELL, t + 205 + 10 * i, g, CELL_NS)
            g += CELL_NS
        t += span
    b.window(0, t, first_step=1, last_step=1)
    b.step(0, 0)
    b.step(1, t)
    return b.build(), gemm_rows


def _finding():
    trace, rows = lstm_trace()
    a = analyze(trace)
    return a, next(f for f in a.findings if f.kind is FindingKind.SLOW_GEMM), rows


def test_recurrence_read_from_the_op_s_recorded_tensors():
    T_ = lambda *s: TensorArg(tuple(s), "float")  # noqa: E731
    shapes, _ = _rnn_args(False)
    args = [T_(*s) if s else None for s in shapes]
    assert recurrence("aten::_cudnn_rnn", args) == Recurrence(B, T, LAYERS, 1, GATES, H, H, False)
    # not batch_first: [steps, batch, features]
    args[0] = T_(T, B, IN)
    assert recurrence("aten::_cudnn_rnn", args) == Recurrence(B, T, LAYERS, 1, GATES, H, H, False)
    # a bidirectional GRU: no cx, three gates, found from the weight buffer's size
    gru = [T_(T, B, IN), None, None, T_(_weights(gates=3, dirs=2)), T_(2 * LAYERS, B, H), None]
    assert recurrence("aten::_cudnn_rnn", gru) == Recurrence(B, T, LAYERS, 2, 3, H, H, False)
    assert recurrence("aten::mm", [T_(B, H), T_(H, H)]) is None


def test_rnn_gemm_diagnosis_has_the_per_step_shapes():
    shapes, _ = _rnn_args(True)
    args = [TensorArg(tuple(s), "float") if s else None for s in shapes]
    d = diagnose("aten::_cudnn_rnn_backward", int(Family.MATMUL), args, GEMM, None, 132, True)
    assert d is not None and d.cause == "recurrent" and d.shape == f"M={B} N={H} K={GATES * H}"


def test_the_finding_names_the_recurrence_and_its_shapes():
    _, f, _ = _finding()
    text = message(f)
    assert f"M={B} N={GATES * H} K={H}" in text  # forward: h [B, H] by W_hh^T [H, 4H]
    assert f"M={B} N={H} K={GATES * H}" in text  # backward: the transposed one per step
    assert "()" not in text
    assert f"M = batch = {B}" in text and f"{LAYERS} layers of {T} time steps" in text
    assert "pre-Hopper" not in text and "contiguous" not in action(f)
    assert "torch.autocast" in action(f) and "larger batch" in action(f)


def test_the_saving_is_half_the_gemm_time_fp16_gives_at_most():
    a, f, rows = _finding()
    gemm_ns = float(a.trace.gpu.dur_ns[rows].sum())  # one step
    assert f.saving_ns == pytest.approx(RECURRENT_SAVING * gemm_ns, abs=1)
    rates = f.facts.rates
    assert rates.fraction_lo == pytest.approx(FRACTION, rel=1e-3)
    assert rates.fraction_hi == pytest.approx(FRACTION, rel=1e-3)


def test_half_precision_rnn_gemms_claim_no_fp16_saving():
    """On 2-byte operands float16 gains nothing: no saving is claimed, so these GEMMs (a pre-Hopper kernel on
    a Hopper GPU, whose cure does not apply to a recurrence) make no finding."""
    trace, _ = lstm_trace()
    half = [s.replace('"float"', '"c10::Half"') for s in trace.strings]
    assert half != trace.strings
    trace.strings[:] = half
    assert [f for f in analyze(trace).findings if f.kind is FindingKind.SLOW_GEMM] == []


def test_a_saving_at_an_assumed_reference_does_not_claim_the_run_s_other_matmuls_reach_it():
    """With no undiagnosed matmuls to measure a reference from, the saving uses DEFAULT_TARGET, and the words
    say it is assumed rather than what "this run's other matmuls reach"."""
    from test_issue39_slow_gemms import model_trace

    from analyzers.findings.efficiency import DEFAULT_TARGET

    f = next(f for f in analyze(model_trace(plain=0)).findings if f.kind is FindingKind.SLOW_GEMM)
    assert f.facts.target == DEFAULT_TARGET
    assert "other matmuls reach" not in message(
        f
    ) and f"at {DEFAULT_TARGET:.0%} of the roof (assumed" in message(f)


# ---------------------------------------------------------------------------------------------- the recording

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SCRIPT = os.path.join(ROOT, "validation", "holdout", "lstm_lm.py")
RECORDING = os.path.join(ROOT, "validation", "holdout", "data", "lstm_lm.brrr.gz")


def _script_defaults() -> dict[str, int]:
    """The defaults the recorded run used: `p.add_argument("--hidden", type=int, default=1024)` and
    `parser(__doc__, steps=60, batch=64)` read from the script itself."""
    tree = ast.parse(open(SCRIPT).read())
    out: dict[str, int] = {}
    for node in ast.walk(tree):
        if not isinstance(node, ast.Call):
            continue
        name = getattr(node.func, "attr", getattr(node.func, "id", ""))
        kw = {k.arg: k.value for k in node.keywords}
        if name == "add_argument" and "default" in kw and isinstance(node.args[0], ast.Constant):
            out[str(node.args[0].value).lstrip("-")] = ast.literal_eval(kw["default"])
        if name == "parser" and "batch" in kw:
            out["batch"] = ast.literal_eval(kw["batch"])
    return out


@pytest.fixture(scope="module")
def lstm():
    from brrrtui.recording.load import load_trace

    return analyze(load_trace(RECORDING))


def test_lstm_recording_finding_names_the_recurrence(lstm):
    args = _script_defaults()
    f = next(f for f in lstm.findings if f.kind is FindingKind.SLOW_GEMM and "recurrent" in message(f))
    text = message(f)
    assert f"M={args['batch']} N={4 * args['hidden']} K={args['hidden']}" in text
    assert f"{args['layers']} layers of {args['seq']} time steps" in text
    assert "()" not in text and "contiguous" not in action(f)


def test_lstm_recording_saving_is_its_rnn_gemms_not_counted_twice(lstm):
    """The slow_gemm finding's saving is RECURRENT_SAVING of the cuDNN ops' tensor-core GEMM time (per step),
    and no_tensor_cores takes none of those kernels (it takes SIMT ones)."""
    tr = lstm.trace
    f = next(f for f in lstm.findings if f.kind is FindingKind.SLOW_GEMM and "recurrent" in message(f))
    rnn_gemm = re.compile(r"gemm|xmma")
    op_of = lstm.links.kernel_op
    names = np.array([tr.name(int(n)) for n in tr.gpu.name])
    op_names = np.array([tr.name(int(tr.ops.name[o])) if o >= 0 else "" for o in op_of])
    rows = np.flatnonzero(
        (np.char.find(op_names.astype(str), "_cudnn_rnn") >= 0)
        & np.array([bool(rnn_gemm.search(n)) for n in names])
        & (lstm.kernel_tensor_cores == 1)
    )
    per_step = float(tr.gpu.dur_ns[rows].sum()) / lstm.steps_analysed
    assert f.saving_ns == pytest.approx(RECURRENT_SAVING * per_step, rel=1e-6)
    ntc = [g for g in lstm.findings if g.kind is FindingKind.NO_TENSOR_CORES]
    assert all(not set(g.kernels) & set(rows.tolist()) for g in ntc)


def test_lstm_recording_no_tensor_cores_takes_only_the_simt_matmuls(lstm):
    """no_tensor_cores is the head's fp32 SIMT GEMMs (line 26), not the LSTM's elementwise cell kernels (line 25,
    family matmul by their op, no FLOPs): TF32 would not run them, and their time is no saving of it."""
    f = next(f for f in lstm.findings if f.kind is FindingKind.NO_TENSOR_CORES)
    assert [ln.line for ln in f.lines] == [26]
    tr = lstm.trace
    ops = [tr.name(int(tr.ops.name[o])) if o >= 0 else "" for o in lstm.links.kernel_op]
    mm = np.array([o.split("::")[-1] in ("linear", "addmm", "mm") for o in ops])
    simt = mm & (lstm.kernel_tensor_cores == 0) & (lstm.kernel_flops > 0)
    assert f.facts.gpu_ns == pytest.approx(float(tr.gpu.dur_ns[simt].sum()))
