"""Under torch.compile brrrtui stays out of Dynamo's sight: the same graph breaks, recompiles and graphs with
and without it, and none of Dynamo's warnings about brrrtui's own code (CPU, Dynamo with the aot_eager backend:
what Dynamo traces does not depend on the backend)."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys

import pytest

SCRIPTS = os.path.join(os.path.dirname(__file__), "scripts")
ENV = {**os.environ, "TORCH_LOGS": "graph_breaks,recompiles"}


def counters_and_logs(argv: list[str], tmp_path) -> tuple[dict, str]:
    proc = subprocess.run(argv, capture_output=True, text=True, env=ENV, cwd=tmp_path, timeout=300)
    assert proc.returncode == 0, proc.stderr
    (line,) = [ln for ln in proc.stdout.splitlines() if ln.startswith("COUNTERS ")]
    return json.loads(line.removeprefix("COUNTERS ")), proc.stderr


@pytest.mark.parametrize(
    "script", [["compiled_train.py"], ["compiled_train.py", "aot_eager", "head"], ["compile_in_window.py"]]
)
def test_compiled_model_compiles_the_same_under_brrrtui(tmp_path, script):
    """compile_in_window.py calls torch.compile while a window (with the line tagger) is open; compiled_train.py
    with `head` compiles one module of an eager model (nn.Module.compile), called from tagged code."""
    args = [os.path.join(SCRIPTS, script[0]), *script[1:]]
    plain, plain_log = counters_and_logs([sys.executable, *args], tmp_path)
    out = str(tmp_path / "c.brrr")
    traced, traced_log = counters_and_logs(
        [sys.executable, "-m", "brrrtui", "record", "-o", out, "--duty", "1", "--min-gap", "0", *args],
        tmp_path,
    )
    assert traced.get("graph_break", {}) == plain.get("graph_break", {}) == {}
    assert traced.get("recompiles", {}) == plain.get("recompiles", {})
    assert traced["stats"]["unique_graphs"] == plain["stats"]["unique_graphs"] == 1
    log_lines = re.compile(r"Graph break|Recompiling|_getframe|RecordFunctionFast|brrrtui/capture")
    assert not log_lines.findall(traced_log), traced_log[-2000:]
    assert len(log_lines.findall(plain_log)) == 0
    assert re.search(r"(\d+) windows", traced_log) and int(re.search(r"(\d+) windows", traced_log)[1]) >= 3


def test_a_compiled_call_runs_with_the_tagger_off_the_mode_stack_and_puts_it_back():
    """Dynamo guards a graph on the torch-function mode stack: a graph traced with the tagger on it would be
    compiled again once the window closes. So what torch.compile returns (a function, a module's forward, what
    a decorator factory makes) is wrapped to take an open tagger off the stack for the call, and only that."""
    import torch
    from torch.overrides import _get_current_function_mode_stack

    from brrrtui.capture import lines
    from brrrtui.capture.lines import LineTable, LineTagger, UserFrames, untagged
    from brrrtui.capture.torch_hooks import on_compile

    original, seen = torch.compile, []
    tagger = LineTagger(LineTable(), UserFrames(lambda path: True))
    tagger.__enter__()  # a window is open
    try:
        on_compile(torch, lambda: seen.append("compile called"), untagged)
        assert _get_current_function_mode_stack() == [tagger]
        fn = torch.compile(lambda x: x + 1, backend="eager")
        module = torch.compile(torch.nn.Linear(2, 2), backend="eager")
        factory = torch.compile(backend="eager")
        decorated = factory(lambda x: x * 2)
        assert seen == ["compile called"] * 4 and _get_current_function_mode_stack() == [tagger]
        assert all(hasattr(c, "__wrapped__") for c in (fn, module.forward, decorated))  # untagged's wrappers
        probe = untagged(lambda: list(_get_current_function_mode_stack()))
        assert probe() == [] and _get_current_function_mode_stack() == [tagger]
        assert fn(torch.ones(2)).tolist() == [2.0, 2.0] and decorated(torch.ones(1)).tolist() == [2.0]
        assert module(torch.ones(2)).shape == (2,) and _get_current_function_mode_stack() == [tagger]
        tagger.__exit__(None, None, None)  # the window closes: a compiled call then changes nothing
        assert probe() == [] and _get_current_function_mode_stack() == [] and lines._current is None
        later = LineTagger(LineTable(), UserFrames(lambda path: True))  # a window opened inside compiled code
        opens = untagged(lambda: (later.__enter__(), list(_get_current_function_mode_stack()))[1])
        assert opens() == [] and _get_current_function_mode_stack() == [later]  # pushed once the call returns
        later.__exit__(None, None, None)
    finally:
        torch.compile = original
        tagger.__exit__(None, None, None)


@pytest.mark.parametrize("head", [False, True])
def test_a_compiled_scripts_eager_lines_keep_their_spans(tmp_path, head):
    """compiled_train.py compiles the model: the loss (line 45), backward (46) and the optimizer step (47) run
    eager and are tagged with their exact lines, the model's own (17, 27-29) are not: the compiled call runs
    untagged. With only `head` compiled, the eager fc1 and GELU (27, 28) are tagged; the head's call (29) and
    its body (17) are not."""
    from brrrtui.recording.load import load_trace

    out = str(tmp_path / "c.brrr")
    script = [os.path.join(SCRIPTS, "compiled_train.py"), *(["aot_eager", "head"] if head else [])]
    argv = [sys.executable, "-m", "brrrtui", "record", "-o", out, "--duty", "1", "--min-gap", "0", *script]
    proc = subprocess.run(argv, capture_output=True, text=True, cwd=tmp_path, timeout=300)
    assert proc.returncode == 0, proc.stderr
    trace = load_trace(out)
    tagged = {trace.lines[i].line for i in trace.spans.line.tolist()}
    eager = {27, 28, 45, 46, 47} if head else {45, 46, 47}
    assert eager <= tagged and not tagged & ({17, 27, 28, 29} - eager), tagged
    # the compiled call's own ops (aot_eager: every op; Inductor would place its kernels' ops itself) take
    # the line that made the call: `step_fn(x)` (45), or `self.head(h)` (29)
    from analyzers.link.links import link
    from brrrtui.contract.model import flag_of

    links = link(trace)
    call = flag_of(trace.string_flags(lambda s: s.startswith("brrr.compiled:")), trace.ops.name)
    assert call.sum() >= 3  # one a step in every window
    inside = links.op_parent >= 0
    inside[inside] = call[links.op_parent[inside]]
    lines = {trace.lines[i].line for i in links.op_line[call | inside].tolist()}
    assert lines == ({29} if head else {45}), lines
    assert (links.op_line >= 0).all()  # every op of the windows has a line


def test_an_eager_script_that_imports_dynamo_keeps_its_exact_lines(tmp_path):
    """An eager script that imports torch._dynamo (eager CUDA training with a fused optimizer does) keeps its lines."""
    from brrrtui.recording.load import load_trace

    out = str(tmp_path / "e.brrr")
    script = os.path.join(SCRIPTS, "compiled_train.py")
    argv = [
        sys.executable,
        "-m",
        "brrrtui",
        "record",
        "-o",
        out,
        "--duty",
        "1",
        "--min-gap",
        "0",
        script,
        "none",
    ]
    proc = subprocess.run(argv, capture_output=True, text=True, cwd=tmp_path, timeout=300)
    assert proc.returncode == 0, proc.stderr
    trace = load_trace(out)
    tagged = {trace.lines[i].line for i in trace.spans.line.tolist()}
    assert len(trace.spans) > 100 and any(line > 40 for line in tagged)  # the training loop's own lines
    assert "torch.compile in use" not in proc.stderr


def test_code_that_torch_compile_generates_is_never_the_users():
    from brrrtui.contract.userfiles import is_user_file

    assert not is_user_file(
        "/tmp/torchinductor_root/ws/cwssvhtqwqc5m63sk4rjjr7v6zxac2ntquvhq7nxks6fr7uvjnlb.py"
    )
    assert not is_user_file("/home/me/.triton/cache/abc/triton_poi_fused_gelu_0.py")
    assert is_user_file("/home/me/nanogpt/model.py")


def test_code_generated_into_caches_the_environment_moved_is_never_the_users(monkeypatch):
    from brrrtui.contract.userfiles import is_model_library_file, is_user_file

    generated = "/scratch/run1/inductor/c5/c5y5ozz2ns3mutpqaid4q3xbsbrrqrvfkinuj62aiwhoxwfjmzn2.py"
    assert is_user_file(generated)  # nothing in the path says so
    monkeypatch.setenv("TORCHINDUCTOR_CACHE_DIR", "/scratch/run1/inductor/")
    monkeypatch.setenv("TRITON_CACHE_DIR", "/scratch/triton")
    assert not is_user_file(generated) and not is_model_library_file(generated)
    assert not is_user_file("/scratch/triton/ab/triton_poi_fused_gelu_0.py")
    assert is_user_file("/scratch/run1/train.py") and is_user_file("/scratch/inductor_notes.py")
