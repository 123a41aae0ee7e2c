"""Lines of torch.compile'd kernels: the capture reads Inductor's provenance (CPU: Inductor's C++ kernels
name the model's lines), the analysis gives a compiled kernel's launch op its top line and splits the
kernel's GPU time over every line it fused by the recorded shares (hand-built trace, exact), and a
generated kernel gets bytes from its buffers."""

from __future__ import annotations

import json
import os

from fixtures.recording import record
from fixtures.synthetic import BF16, TraceBuilder

from analyzers.analyze import analyze
from analyzers.cost.opcost import op_cost, parse_args
from brrrtui.capture.inductor_sources import kernel_name, source_rows
from brrrtui.capture.lines import LineTable, UserFrames
from brrrtui.contract.model import NONE
from brrrtui.present.finding_words import action, message
from brrrtui.recording.load import load_trace


def test_provenance_keys_become_the_names_the_profiler_records():
    assert kernel_name("triton_poi_fused_add_mul_tanh_3:7") == "triton_poi_fused_add_mul_tanh_3"
    assert kernel_name("extern_kernels.addmm:6") == "aten::addmm"
    assert kernel_name("torch.ops.aten._scaled_dot_product_cudnn_attention.default:9") == (
        "aten::_scaled_dot_product_cudnn_attention"
    )


def test_stack_traces_give_the_innermost_user_line_and_library_line_with_shares():
    model = '  File "/home/u/train.py", line 67, in forward\n    x = x + self.attn(self.ln_1(x))\n'
    lib = '  File "/venv/lib/python3.11/site-packages/transformers/activations.py", line 66, in forward\n'
    provenance = json.dumps(
        {
            "triton_poi_fused_add_mul_tanh_3:7": [
                '  File "/home/u/train.py", line 100, in forward\n' + model,
                '  File "/home/u/train.py", line 100, in forward\n' + model,
                '  File "/home/u/train.py", line 101, in forward\n' + lib,
            ],
            "triton_poi_fused_0:1": [
                '  File "/venv/lib/python3.11/site-packages/torch/nn/x.py", line 1, in f\n'
            ],
            "triton_per_fused_gelu_2:3": [lib, lib],  # a library model compiled whole: no user frame
        }
    )
    lines = LineTable()
    frames = UserFrames(lambda path: path.startswith("/home/u/"))
    rows = source_rows(provenance, lines, frames, lambda path: "transformers/" in path)
    key = {i: k for k, i in lines.ids.items()}  # line id -> (file, line, function)
    named = {(r[0], r[1] >= 0 and key[r[1]][1], r[2] >= 0 and key[r[2]][1], round(r[3], 3)) for r in rows}
    assert named == {
        ("triton_poi_fused_add_mul_tanh_3", 67, False, 0.667),
        ("triton_poi_fused_add_mul_tanh_3", 101, 66, 0.333),
        ("triton_per_fused_gelu_2", False, 66, 1.0),  # its library line alone
    }  # neither a user nor a model-library frame in the second kernel's trace: dropped
    assert source_rows("not json", lines, frames, lambda p: False) == []


def compiled_trace():
    """Two launches of one Triton kernel that fused ops of lines 57 (3/4 of its traces) and 58 (1/4)."""
    b = TraceBuilder()
    l57, l58, lib = b.line("model.py", 57, "forward"), b.line("model.py", 58, "forward"), b.line(
        "/venv/site-packages/transformers/activations.py", 66, "forward")  # fmt: skip
    for i, t in enumerate((0, 100_000)):
        b.op("triton_poi_fused_add_tanh_0", t, 5_000, shapes=[[8192, 4096], [8192, 4096], []],
             dtypes=[BF16, BF16, "Scalar"])  # fmt: skip
        b.launch("triton_poi_fused_add_tanh_0", t + 1_000, t + 10_000, 40_000 + 20_000 * i)
    b.window(0, 200_000, first_step=0, last_step=0)
    trace = b.build()
    trace.meta["compiled_kernels"] = [
        ["triton_poi_fused_add_tanh_0", l57, -1, 0.75],
        ["triton_poi_fused_add_tanh_0", l58, lib, 0.25],
        ["not_in_this_recording", l57, -1, 1.0],
        ["triton_poi_fused_add_tanh_0", 99, -1, 1.0],  # no such line: ignored
    ]
    return trace


def test_a_compiled_kernel_takes_its_top_line_and_splits_its_time_by_share():
    a = analyze(compiled_trace())
    assert set(a.links.kernel_line.tolist()) == {0}  # line 57, the top share
    by_line = {s.line.line: s for s in a.lines}
    assert by_line[57].gpu_ns == 75_000 and by_line[58].gpu_ns == 25_000  # (40 + 60 µs) x 3/4 and x 1/4
    assert by_line[57].kernels == 2 and by_line[58].kernels == 0  # half a launch rounds down
    assert a.kernel_bytes[0] == 2 * 8192 * 4096 * 2  # two bf16 buffers of 32 Mi elements
    assert a.kernel_flops[0] == 2 * 8192 * 4096  # two fused ops per element
    assert a.kernels[0].regime.value == "memory"  # 134 MB in 40-60 µs: 2.2-3.4 TB/s, bandwidth-bound


def test_a_kernel_traced_to_library_code_only_takes_its_library_line_and_the_compiled_calls_line():
    """A library model compiled whole (HF GPT-2): Inductor's traces hold no user frame, so its kernels take
    their library line from them and their line from the capture's op around the compiled call (the user's
    `model(...)`). A kernel also traced to a user line keeps only its user places."""
    b = TraceBuilder()
    call, l57 = b.line("train.py", 35, "loss_of"), b.line("train.py", 57, "forward")
    lib = b.line("/venv/site-packages/transformers/activations.py", 66, "forward")
    b.op(f"brrr.compiled:{call}", 0, 90_000)
    b.op("triton_poi_fused_gelu_0", 100, 5_000)
    b.launch("triton_poi_fused_gelu_0", 1_000, 10_000, 40_000)
    b.op("triton_poi_fused_add_1", 50_000, 5_000)
    b.launch("triton_poi_fused_add_1", 51_000, 60_000, 20_000)
    b.op("aten::convolution", 70_000, 10_000)  # an extern call Inductor traced to the library...
    b.op("aten::cudnn_convolution", 71_000, 8_000)  # ... and the op that launches its kernel
    b.launch("sm90_xmma_fprop_implicit_gemm", 72_000, 90_000, 10_000)
    b.window(0, 200_000, first_step=0, last_step=0)
    trace = b.build()
    trace.meta["compiled_kernels"] = [
        ["triton_poi_fused_gelu_0", -1, lib, 1.0],
        ["triton_poi_fused_add_1", -1, lib, 0.5],
        ["triton_poi_fused_add_1", l57, -1, 0.5],
        ["triton_poi_fused_add_1", -1, -1, 1.0],  # neither: ignored
        ["aten::convolution", -1, lib, 1.0],
    ]
    a = analyze(trace)
    assert a.links.kernel_line.tolist() == [call, l57, call]
    assert a.links.kernel_lib_line.tolist() == [lib, NONE, lib]
    assert a.links.op_compiled.tolist() == [False, False, True, False, False]
    assert {s.line.line: s.gpu_ns for s in a.lines} == {35: 50_000, 57: 20_000}
    assert [(s.line.line, s.gpu_ns) for s in a.library_lines] == [(66, 50_000)]


def test_a_generated_kernel_without_buffers_or_a_template_gets_no_estimate():
    args = parse_args(json.dumps([[64, 64], [64, 64]]), json.dumps([BF16, BF16]))
    assert op_cost("triton_tem_fused_mm_0", args).bytes is not None  # costed as an unknown op, not as Triton
    assert op_cost("triton_poi_fused_add_0", parse_args("[[]]", '["Scalar"]')).flops is None


def test_inductor_on_cpu_names_the_model_lines_and_windows_keep_opening(tmp_path):
    """Inductor compiles the model to C++ on a CPU: the recording holds its kernels' lines (fc1, gelu, the head),
    the compile changes nothing (same graphs, no graph break) and windows keep opening (a window opened or
    closed inside the compiler's own tracing once left the profiler on and the capture stepped aside)."""
    env = {**os.environ, "TORCHINDUCTOR_CACHE_DIR": str(tmp_path / "inductor")}
    proc, out = record(tmp_path, "compiled_train.py", "inductor", env=env, timeout=600)
    assert proc.returncode == 0, proc.stderr
    assert "stepped aside" not in proc.stderr
    counters = json.loads(next(ln for ln in proc.stdout.splitlines() if ln.startswith("COUNTERS "))[9:])
    assert counters["graph_break"] == {} and counters["stats"]["unique_graphs"] == 1
    trace = load_trace(out)
    assert len(trace.windows) >= 3
    rows = trace.meta["compiled_kernels"]
    lines = {(trace.lines[r[1]].line, r[0].split("_")[0]) for r in rows}
    assert {27, 28, 17} <= {line for line, _ in lines}  # h = fc1(x); gelu(h); the head's fc(h).tanh()
    assert any(name.startswith("cpp_fused_gelu") for name, *_ in rows)
    assert all(os.path.basename(trace.lines[r[1]].file) == "compiled_train.py" for r in rows)


def test_ops_nested_in_a_named_extern_call_take_its_line():
    """Inductor names the extern call (aten::_scaled_dot_product_cudnn_attention); the kernel launches from
    the op nested in it (aten::_cudnn_attention_forward), which takes the call's line."""
    b = TraceBuilder()
    line = b.line("model.py", 43, "forward")
    b.op("aten::_scaled_dot_product_cudnn_attention", 0, 20_000)
    b.op("aten::_cudnn_attention_forward", 1_000, 15_000)
    b.launch("cudnn_generated_fort_native_sdpa_sm90_flash_fprop", 2_000, 30_000, 50_000)
    b.window(0, 100_000, first_step=0, last_step=0)
    trace = b.build()
    trace.meta["compiled_kernels"] = [["aten::_scaled_dot_product_cudnn_attention", line, -1, 1.0]]
    a = analyze(trace)
    assert a.links.kernel_line.tolist() == [line] and a.links.op_compiled.tolist() == [True, True]
    assert [(s.line.line, s.gpu_ns) for s in a.lines] == [(43, 50_000)]


def test_a_graph_break_is_a_finding_on_its_line_and_dynamo_prints_nothing(tmp_path):
    proc, out = record(tmp_path, "graph_break.py")
    assert proc.returncode == 0, proc.stderr
    assert "Graph break" not in proc.stderr and "Graph Break Reason" not in proc.stderr
    a = analyze(load_trace(out))
    (found,) = [f for f in a.findings if f.kind.value == "graph_break"]
    assert (os.path.basename(found.lines[0].file), found.lines[0].line) == ("graph_break.py", 12)
    assert "print" in message(found) and "print" in action(found)


def test_graph_break_messages_of_two_torch_versions_parse():
    from brrrtui.capture.compile_events import parse_break

    new = (
        "Graph break in user code at /home/u/train.py:57\nGraph Break Reason: Encountered graph break when "
        "attempting to trace CALL\n\nFailed to trace builtin operator\n  Explanation: Dynamo does not know how "
        "to trace builtin operator `print`\n"
    )
    assert parse_break(new) == (
        "/home/u/train.py",
        57,
        "Dynamo does not know how to trace builtin operator `print`",
        (),
    )
    old = "Graph break in user code at /home/u/train.py:9\nGraph Break Reason: Tensor.item\nUser code traceback:"
    assert parse_break(old) == ("/home/u/train.py", 9, "Tensor.item", ())
    assert parse_break("Graph break: no user code") is None


def test_a_graph_break_in_library_code_belongs_to_the_users_line_that_called_it():
    """HF GPT-2 compiled whole breaks in transformers' `logger.warning_once` (H200 log of
    `python -m validation.run compile-models`): Dynamo's "user code" is the library's; the break goes on the
    user's innermost frame of the stack it prints, `return model(...).loss`, and says where it broke."""
    from brrrtui.capture.compile_events import parse_break, user_place

    site = "/venv/lib/python3.12/site-packages/"
    message = (
        f"Graph break in user code at {site}transformers/modeling_utils.py:4635\n"
        "Graph Break Reason: Logger not supported for non-export cases.\n"
        "User code traceback:\n"
        '  File "/w/validation/workloads/common.py", line 38, in train\n    loss = loss_of()\n'
        '  File "/w/validation/workloads/hf_gpt2.py", line 35, in loss_of\n    return model(input_ids=ids).loss\n'
        f'  File "{site}torch/nn/modules/module.py", line 1779, in _wrapped_call_impl\n'
        f'  File "{site}transformers/models/gpt2/modeling_gpt2.py", line 702, in forward\n'
        f'  File "{site}transformers/modeling_utils.py", line 4635, in loss_function\n'
    )
    file, line, reason, frames = parse_break(message)
    assert (file, line) == (f"{site}transformers/modeling_utils.py", 4635) and len(frames) == 5
    is_user = lambda path: path.startswith("/w/")  # noqa: E731
    assert user_place(file, line, reason, frames, is_user) == (
        "/w/validation/workloads/hf_gpt2.py",
        35,
        "transformers/modeling_utils.py:4635: Logger not supported for non-export cases.",
    )
    assert user_place("/w/train.py", 9, "Tensor.item", (), is_user) == ("/w/train.py", 9, "Tensor.item")
    assert user_place(file, line, reason, (), is_user) is None  # a repeated break prints no stack


def test_a_recompiled_function_is_a_finding_on_its_def_line(tmp_path):
    proc, out = record(tmp_path, "recompile.py")
    assert proc.returncode == 0, proc.stderr
    assert "Recompiling" not in proc.stderr
    a = analyze(load_trace(out))
    (found,) = [f for f in a.findings if f.kind.value == "recompile"]  # one per function
    assert (os.path.basename(found.lines[0].file), found.lines[0].line) == ("recompile.py", 10)
    assert "again 2× (failed guards: scale == 1; scale == 2)" in message(found)  # the changing Python int
    assert "pass it as a tensor" in action(found)


def test_guard_failure_texts_are_cut_to_the_guard():
    from brrrtui.capture.compile_events import guard_text

    text = (
        "0/1: scale == 2      # return (model(x) * scale).sum()  # x.py:11 in step\nUser stack trace:\n  File"
    )
    assert guard_text(text) == "scale == 2"
    assert guard_text("tensor 'x' size mismatch at index 0. expected 4, actual 8") == (
        "tensor 'x' size mismatch at index 0. expected 4, actual 8"
    )
    assert guard_text("") == ""


def test_the_scope_around_a_compiled_call_reads_as_what_it_is_in_the_ops_of_a_line():
    from brrrtui.present.details.line import line
    from brrrtui.present.snapshot import build_snapshot

    b = TraceBuilder()
    call = b.line("train.py", 35, "loss_of")
    b.op(f"brrr.compiled:{call}", 0, 90_000)
    b.launch("triton_poi_fused_gelu_0", 1_000, 10_000, 40_000)  # launched by the call's scope itself
    b.window(0, 200_000, first_step=0, last_step=0)
    snap = build_snapshot(analyze(b.build()))
    sid = int(snap.trace.ops.name[0])
    assert snap.op_name(sid) == "torch.compile'd call" and snap.trace.name(sid) == f"brrr.compiled:{call}"
    assert snap.analysis.links.kernel_line.tolist() == [call]
    assert any("torch.compile'd call" in label for label, _ in line(snap, call).children)  # the line's ops
