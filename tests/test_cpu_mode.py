"""A recording without GPU activity, end to end: `report` (text and --json), the view and `diff` carry no GPU
regime, idle or verdict; the view lists the lines the report lists; each line's CPU-side time counts the
main thread's sampled time on it, where no torch call runs too (a `time.sleep`, a Python loop), so a removed
sleep shows in `diff`. Real recordings of a tiny CPU training script, made with `brrrtui record` on this machine."""

from __future__ import annotations

import asyncio
import json
import os

import pytest
from conftest import run_brrrtui

from brrrtui.recording.load import load_trace
from brrrtui.tui.app import make_app

SCRIPT = """import time

import torch

torch.manual_seed(0)
lin = torch.nn.Linear(32, 32)
opt = torch.optim.SGD(lin.parameters(), lr=0.01)
for step in range(12):
    x = torch.randn(16, 32)
    loss = lin(x).relu().sum()  # L:forward
    loss.backward()
    total = sum([i * i for i in range(300_000)])  # L:loop
    time.sleep(0.2)  # L:sleep
    opt.step()
    opt.zero_grad()
"""
# the only change: the sleep line removed (the lines below it move up one)
AFTER = "".join(line for line in SCRIPT.splitlines(keepends=True) if "L:sleep" not in line)
GPU_WORDS = (
    "overhead",
    "compute",
    "memory",
    "GPU idle",
    "idle it caused",
    "verdict:",
    "-bound",
    "C 0%",
    "O 100%",
)


def line_no(src: str, marker: str) -> int:
    return next(n for n, text in enumerate(src.splitlines(), 1) if f"# L:{marker}" in text)


@pytest.fixture(scope="module")
def runs(tmp_path_factory) -> dict[str, str]:
    """before.brrr and after.brrr: the script recorded with and without its `time.sleep(0.2)` line, each
    from its own folder as train.py (the diff matches the two files by name and their lines by text)."""
    root = tmp_path_factory.mktemp("cpu_mode")
    out = {}
    for name, src in (("before", SCRIPT), ("after", AFTER)):
        folder = root / name
        folder.mkdir()
        (folder / "train.py").write_text(src)
        path = str(root / f"{name}.brrr")
        proc = run_brrrtui("record", "-o", path, "--duty", "1", "--min-gap", "0", "train.py", cwd=str(folder),
                           timeout=300)  # fmt: skip
        assert proc.returncode == 0, proc.stderr
        assert "0 kernels" in proc.stderr  # this machine has no GPU: a CPU-only recording
        out[name] = path
    return out


def report_json(path: str) -> dict:
    proc = run_brrrtui("report", "--json", path)
    assert proc.returncode == 0, proc.stderr
    return json.loads(proc.stdout)


def test_report_json_has_no_gpu_regime_and_counts_sampled_time(runs):
    doc = report_json(runs["before"])
    assert doc["breakdown_ns"] is None and doc["overhead"] is None and doc["kernels"] == []
    assert doc["findings"] == []
    lines = doc["lines"]
    assert len(lines) >= 5
    for ln in lines:
        assert (
            ln["regime"] is None and ln["gpu_ns"] == 0 and ln["idle_ns"] == 0 and ln["idle_profiled_ns"] == 0
        )
        assert ln["host_ns"] == max(ln["cpu_ns"], ln["sampled_ns"])  # sampled, or in torch calls where more
    # listed by CPU-side time, most first
    assert [ln["host_ns"] for ln in lines] == sorted((ln["host_ns"] for ln in lines), reverse=True)
    by_line = {ln["line"]: ln for ln in lines}
    sleep, loop = by_line[line_no(SCRIPT, "sleep")], by_line[line_no(SCRIPT, "loop")]
    # the sleep calls no torch: all its time is sampled, ~200 ms a step (generous bounds: a shared machine)
    assert sleep["cpu_ns"] == 0 and sleep["host_ns"] == sleep["sampled_ns"] > 0
    assert lines[0]["line"] == sleep["line"]
    assert loop["cpu_ns"] == 0 and loop["host_ns"] > 0  # a Python loop: no torch call either
    for other in doc["other_phases"].values():  # set-up / warm-up shown apart: no regime there either
        assert other["breakdown_ns"] is None
        assert all(ln["regime"] is None for ln in other["lines"])


def test_report_text_says_there_was_no_gpu_and_lists_cpu_side_time(runs):
    proc = run_brrrtui("report", runs["before"])
    assert proc.returncode == 0, proc.stderr
    text = proc.stdout
    assert "no GPU activity recorded" in text and "CPU time per line, per step" in text
    for word in GPU_WORDS:
        assert word not in text, word
    listed = [ln for ln in text.splitlines() if ln.startswith("  train.py:")]
    doc = report_json(runs["before"])
    want = [f"train.py:{ln['line']}" for ln in doc["lines"]]
    assert [ln.split()[0] for ln in listed[: len(want)]] == want  # the same lines, in the same order
    sleep = next(ln for ln in listed if ln.split()[0] == f"train.py:{line_no(SCRIPT, 'sleep')}")
    value, unit = sleep.split()[2:4]
    assert unit == "ms" and 100 < float(value) < 400  # time.sleep(0.2) a step, sampled


def screen_text(app) -> str:
    """Every row of the app's screen as plain text (from its SVG screenshot)."""
    import html
    import re

    rows: dict[float, list[tuple[float, str]]] = {}
    svg = app.export_screenshot()
    for m in re.finditer(r'<text class="[^"]*" x="([\d.]+)" y="([\d.]+)"[^>]*>(.*?)</text>', svg):
        rows.setdefault(float(m.group(2)), []).append((float(m.group(1)), html.unescape(m.group(3))))
    return "\n".join("".join(t for _, t in sorted(r)) for _, r in sorted(rows.items())).replace("\xa0", " ")


def test_view_shows_no_regime_and_the_report_s_lines(runs):
    path = runs["before"]
    doc = report_json(path)
    want = [(os.path.basename(ln["file"]), ln["line"]) for ln in doc["lines"]]
    seen: dict[str, object] = {}

    async def go() -> None:
        app = make_app(path, trace=load_trace(path))
        async with app.run_test(size=(160, 50)) as pilot:
            for _ in range(600):
                if app.analyses >= 1:
                    break
                await pilot.pause(0.05)
            await pilot.pause(0.2)
            snap = app.snapshot
            assert snap is not None
            hot = app.main.hot
            shown = [
                snap.lines_by_id[int(str(hot.get_option_at_index(i).id))].line
                for i in range(hot.option_count)
            ]
            seen["hot"] = [(os.path.basename(ln.file), ln.line) for ln in shown]
            seen["subtitle"] = str(hot.border_subtitle)
            seen["summary"] = screen_text(app)
            # the hot lines' first row: the sleep line's details
            await pilot.press("tab", "tab", "down", "enter")
            await pilot.pause(0.2)
            seen["line"] = screen_text(app)
            seen["drilled"] = app.main.details.stack[-1]

    asyncio.run(go())
    assert seen["hot"] == want  # the same lines as the report, in its order
    assert "CPU-side time" in str(seen["subtitle"])
    for screen in (seen["summary"], seen["line"]):
        assert "no GPU activity recorded" in screen
        for word in (*GPU_WORDS, "+idle"):
            assert word not in screen, word
    assert seen["drilled"].key == (snap_line_id(runs["before"], line_no(SCRIPT, "sleep")),)
    assert "CPU-side time:" in seen["line"] and "0 ns in its torch calls" in seen["line"]


def snap_line_id(path: str, lineno: int) -> int:
    lines = load_trace(path).lines
    return next(i for i, ln in enumerate(lines) if ln.line == lineno and ln.file.endswith("train.py"))


def test_diff_lists_the_removed_sleep_as_faster(runs):
    proc = run_brrrtui("diff", "--json", runs["before"], runs["after"])
    assert proc.returncode == 0, proc.stderr
    d = json.loads(proc.stdout)
    assert d["measure"] == "CPU"
    sleep_line = line_no(SCRIPT, "sleep")
    first = d["lines"][0]  # the largest change
    assert first["before"]["line"] == sleep_line and first["after"] is None  # gone
    assert d["schema"] == 2  # lines of a CPU comparison name their time host_ns (schema 1: gpu_ns)
    assert (
        "gpu_ns" not in first
        and "idle_ns" not in first
        and first["regime"] == {"before": None, "after": None}
    )
    assert first["host_ns"]["after"] == 0 and 100e6 < first["host_ns"]["before"] < 400e6
    assert -400e6 < first["change_ns"] < -100e6  # faster by about the 200 ms sleep a step
    loop = next(x for x in d["lines"] if x["before"] and x["before"]["line"] == line_no(SCRIPT, "loop"))
    assert loop["after"]["line"] == line_no(AFTER, "loop") and loop["matched_by"] == "text"
    text = run_brrrtui("diff", runs["before"], runs["after"]).stdout
    row = next(ln for ln in text.splitlines() if f"train.py:{sleep_line} (gone)" in ln)
    assert row.split()[0].startswith("-") and "ms" in row.split()[1]
    assert "CPU-side time" in text and "kernels (" not in text


def test_a_gpu_run_s_set_up_window_without_kernels_keeps_its_gpu_idle():
    """The set-up window of an H200 run holds no kernel, yet its GPU idled: that idle stays charged to the line
    that kept it waiting, with its regime. Only a run without a GPU has no idle and no regime."""
    fixture = os.path.join(os.path.dirname(__file__), "fixtures", "h200_gpt2_compiled.brrr.gz")
    doc = report_json(fixture)
    assert doc["breakdown_ns"] is not None and doc["overhead"] is not None
    assert doc["lines"] and all(ln["regime"] is not None for ln in doc["lines"])
    setup = doc["other_phases"]["setup"]
    assert setup["breakdown_ns"]["overhead"] == setup["span_ns"] > 0  # no kernel: all of it idle
    (line,) = setup["lines"]
    assert line["gpu_ns"] == 0 and line["idle_ns"] == setup["span_ns"] and line["regime"] == "overhead"
