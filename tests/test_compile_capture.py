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


@pytest.mark.parametrize("script", ["compiled_train.py", "compile_in_window.py"])
def test_compiled_model_compiles_the_same_under_brrrtui(tmp_path, script):
    """compile_in_window.py calls torch.compile while a window (with the line tagger) is open."""
    SCRIPT = os.path.join(SCRIPTS, script)
    plain, plain_log = counters_and_logs([sys.executable, SCRIPT], tmp_path)
    out = str(tmp_path / "c.brrr")
    traced, traced_log = counters_and_logs(
        [sys.executable, "-m", "brrrtui", "record", "-o", out, "--duty", "1", "--min-gap", "0", SCRIPT], tmp_path
    )
    assert traced.get("graph_break", {}) == plain.get("graph_break", {}) == {}
    assert traced.get("recompiles", {}) == plain.get("recompiles", {})
    assert traced["stats"]["unique_graphs"] == plain["stats"]["unique_graphs"] == 1
    log_lines = re.compile(r"Graph break|Recompiling|_getframe|RecordFunctionFast|brrrtui/capture")
    assert not log_lines.findall(traced_log), traced_log[-2000:]
    assert len(log_lines.findall(plain_log)) == 0
    assert re.search(r"(\d+) windows", traced_log) and int(re.search(r"(\d+) windows", traced_log)[1]) >= 3


def test_torch_compile_called_inside_a_window_takes_the_tagger_off_the_mode_stack():
    """Dynamo guards a graph on the torch-function mode stack: a graph first traced with the tagger on it would
    be compiled again once the window closes. So the agent's torch.compile hook suspends an open tagger."""
    import torch
    from torch.overrides import TorchFunctionMode, _get_current_function_mode_stack

    from brrrtui.capture.lines import LineTable, LineTagger, UserFrames
    from brrrtui.capture.torch_hooks import on_compile

    original = torch.compile
    tagger = LineTagger(LineTable(), UserFrames(lambda path: True))
    TorchFunctionMode.__enter__(tagger)  # as a window opened before the script called torch.compile
    tagger.pushed = True
    try:
        on_compile(torch, tagger.suspend)
        assert _get_current_function_mode_stack() == [tagger]
        torch.compile(lambda x: x + 1, backend="eager")
        assert _get_current_function_mode_stack() == [] and not tagger.pushed
        tagger.__exit__(None, None, None)  # the window closes: nothing left to pop
        assert _get_current_function_mode_stack() == []
    finally:
        torch.compile = original
        tagger.suspend()


def test_an_eager_script_that_imports_dynamo_keeps_its_exact_lines(tmp_path):
    """Only a call of torch.compile turns the tagger off: eager CUDA training imports torch._dynamo too."""
    from brrrtui.recording.load import load_trace

    out = str(tmp_path / "e.brrr")
    script = os.path.join(SCRIPTS, "compiled_train.py")
    argv = [sys.executable, "-m", "brrrtui", "record", "-o", out, "--duty", "1", "--min-gap", "0", script, "none"]
    proc = subprocess.run(argv, capture_output=True, text=True, cwd=tmp_path, timeout=300)
    assert proc.returncode == 0, proc.stderr
    trace = load_trace(out)
    tagged = {trace.lines[i].line for i in trace.spans.line.tolist()}
    assert len(trace.spans) > 100 and any(line > 20 for line in tagged)  # the training loop's own lines
    assert "torch.compile in use" not in proc.stderr


def test_code_that_torch_compile_generates_is_never_the_users():
    from brrrtui.contract.userfiles import is_user_file

    assert not is_user_file("/tmp/torchinductor_root/ws/cwssvhtqwqc5m63sk4rjjr7v6zxac2ntquvhq7nxks6fr7uvjnlb.py")
    assert not is_user_file("/home/me/.triton/cache/abc/triton_poi_fused_gelu_0.py")
    assert is_user_file("/home/me/nanogpt/model.py")
