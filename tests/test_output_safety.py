"""Names from a recording or a trace are data: no terminal control reaches the user's terminal, the
printable text is kept, and the `brrrtui view` hint after a recording is shell-quoted."""

from __future__ import annotations

import json
import os
import re

from conftest import SCRIPTS, run_brrrtui

from brrrtui.contract.safe import safe_text
from brrrtui.recording.load import load_trace
from brrrtui.recording.store import RecordingWriter

OSC, CSI, LINK = "\x1b]0;owned\x07", "\x1b[2J", "[link=file:///etc/passwd]x[/link]"
T0 = 1_700_000_000_000_000_000


def crafted_trace(path: str) -> None:
    events = [
        {"ph": "X", "cat": "cpu_op", "name": f"aten::mm{OSC}", "ts": 10.0, "dur": 30.0, "tid": 1,
         "args": {"Sequence number": 1}},
        {"ph": "X", "cat": "cuda_runtime", "name": "cudaLaunchKernel", "ts": 12.0, "dur": 5.0, "tid": 1,
         "args": {"correlation": 1}},
        {"ph": "X", "cat": "kernel", "name": f"gemm{CSI}{LINK}\x9b31m", "ts": 40.0, "dur": 50.0, "tid": 7,
         "args": {"device": 0, "stream": 7, "correlation": 1}},
    ]  # fmt: off
    props = [{"name": f"GPU{OSC}", "numSms": 132, "computeMajor": 9, "computeMinor": 0}]
    with open(path, "w") as f:
        json.dump({"traceEvents": events, "baseTimeNanoseconds": T0, "deviceProperties": props}, f)


def assert_no_control(text: str) -> None:
    assert not re.search("[\x00-\x08\x0b-\x1f\x7f-\x9f]", text), repr(text)


def test_safe_text_escapes_controls_and_keeps_the_text():
    assert safe_text(f"a{OSC}b") == "a\\x1b]0;owned\\x07b"
    assert safe_text(f"x{CSI}") == "x\\x1b[2J"
    assert safe_text(LINK) == LINK  # markup is plain text here; widgets escape it
    assert safe_text("tab\there\u202eevil") == "tab\\x09here\\u202eevil"
    assert safe_text("aten::mm") == "aten::mm"


def test_report_of_a_crafted_trace_prints_no_escape_sequence(tmp_path):
    path = str(tmp_path / "evil.json")
    crafted_trace(path)
    for args in (["report", path], ["report", "--json", path]):
        proc = run_brrrtui(*args)
        assert proc.returncode == 0, proc.stderr
        assert_no_control(proc.stdout)
    trace = load_trace(path)
    assert "gemm\\x1b[2J[link=file:///etc/passwd]x[/link]\\x9b31m" in trace.strings
    assert "aten::mm\\x1b]0;owned\\x07" in trace.strings
    assert trace.device.name == "GPU\\x1b]0;owned\\x07"


def test_a_recording_s_names_lines_and_meta_are_made_safe(tmp_path):
    path = str(tmp_path / "r.brrr")
    w = RecordingWriter(path)
    w.set_meta(argv=[f"train{OSC}.py"], device={"name": f"H200{CSI}"}, status="finished")
    w.append({"strings": [(0, f"k{OSC}")], "lines": [(0, f"/t/{CSI}x.py", 3, f"f{OSC}")]})
    w.close()
    trace = load_trace(path)
    assert trace.strings == ["k\\x1b]0;owned\\x07"]
    assert trace.lines[0].file == "/t/\\x1b[2Jx.py" and trace.lines[0].function == "f\\x1b]0;owned\\x07"
    assert trace.meta["argv"] == ["train\\x1b]0;owned\\x07.py"] and trace.device.name == "H200\\x1b[2J"


def test_the_view_hint_is_shell_quoted(tmp_path):
    out = str(tmp_path / "my run; rm -rf x.brrr")
    proc = run_brrrtui("record", "-o", out, os.path.join(SCRIPTS, "exit3.py"))
    assert proc.returncode == 3, proc.stderr
    assert f"(brrrtui view '{out}')" in proc.stderr


def test_stream_help_says_what_the_readme_measured():
    proc = run_brrrtui("record", "--help")
    assert "+12%" not in proc.stdout and "2.4-2.9%" in proc.stdout.replace("\n", " ").replace("  ", " ")


def test_a_short_script_without_an_optimizer_gets_a_report_that_says_why_it_is_empty(tmp_path):
    script = tmp_path / "short.py"
    script.write_text(  # 0.6 s of work: shorter than the first time window's default 1 s
        "import time\nimport torch\nt = time.time()\nwhile time.time() - t < 0.6:\n    x = torch.ones(64) * 2\n"
    )
    out = str(tmp_path / "short.brrr")
    assert run_brrrtui("record", "-o", out, str(script)).returncode == 0
    proc = run_brrrtui("report", out)
    assert proc.returncode == 0, proc.stderr
    assert "note: no profiler window was opened" in proc.stdout and "--first-window 0" in proc.stdout
    assert run_brrrtui("record", "-o", out, "--first-window", "0", str(script)).returncode == 0
    assert len(load_trace(out).windows) >= 1
