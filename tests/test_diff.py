"""`brrrtui diff`: two recordings of one script, before and after a fusion fix, written as real .brrr files
(hand-built traces with exact arithmetic, tests/fixtures/synthetic.py) next to the script's two versions."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time

import pytest

from analyzers.diff.line_match import LineMatch, align, match_lines, pair_files
from brrrtui.contract.model import Trace
from brrrtui.recording.store import RecordingWriter
from tests.fixtures.synthetic import BF16, T0, TraceBuilder

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
MS, US = 1_000_000, 1_000
STEPS, WINDOW_STEP = 40, 30

BEFORE_SRC = """import torch
def step(x, w):
    y = x @ w
    a = y * 0.5
    b = a + 1.0
    c = b.tanh()
    return c
"""
# the fix: two lines inserted above, and the chain of three pointwise ops replaced by one fused call
AFTER_SRC = """import torch
from fused import fused_tail
# fused the pointwise tail
def step(x, w):
    y = x @ w
    c = fused_tail(y)
    return c
"""


def _rows(table) -> list[tuple]:
    return list(zip(*(c.tolist() for c in table.columns.values()), strict=True))


def write_recording(trace: Trace, path: str, script: str, started_ns: int) -> None:
    w = RecordingWriter(path)
    w.set_meta(
        argv=[script],
        cwd=os.path.dirname(script),
        device={"name": "NVIDIA H200"},
        status="finished",
        started_at_ns=started_ns,
    )
    batch = {
        "strings": list(enumerate(trace.strings)),
        "lines": [(i, ln.file, ln.line, ln.function) for i, ln in enumerate(trace.lines)],
    }
    for name, table in (
        ("windows", trace.windows),
        ("steps", trace.steps),
        ("gpu", trace.gpu),
        ("runtime", trace.runtime),
        ("ops", trace.ops),
        ("spans", trace.spans),
        ("line_samples", trace.line_samples),
    ):
        batch[name] = _rows(table)
    w.append(batch)
    w.close()


def build_run(script: str, fused: bool, step_ms: float, jitter_us: int = 50) -> Trace:
    """40 steps of `step_ms` (± jitter); window 0 holds step 30: a bf16 8192² GEMM (4 ms) on the `y = x @ w`
    line, then three 1 ms memory-bound pointwise kernels on their three lines, or one fused 1 ms kernel."""
    b = TraceBuilder()
    gemm_line = 5 if fused else 3
    tail = (
        [(6, "fused_tail", "triton_poi_fused_add_mul_tanh_0")]
        if fused
        else [
            (4, "aten::mul", "vectorized_elementwise_kernel<mul>"),
            (5, "aten::add", "vectorized_elementwise_kernel<add>"),
            (6, "aten::tanh", "vectorized_elementwise_kernel<tanh>"),
        ]
    )
    t = 100 * MS
    b.step(0, t)
    for step in range(1, STEPS):
        start = t
        t += int(step_ms * MS) + (jitter_us if step % 2 else -jitter_us) * US
        if step == WINDOW_STEP:
            t += 5 * MS  # a profiled step is slower
            ln = b.line(script, gemm_line, "step")
            b.span(ln, start + 10 * US, 300 * US)
            b.op(
                "aten::mm",
                start + 20 * US,
                200 * US,
                shapes=[[8192, 8192], [8192, 8192]],
                dtypes=[BF16, BF16],
            )
            b.launch("sm90_xmma_gemm_bf16bf16_bf16f32_f32_tn_n", start + 50 * US, start + 400 * US, 4 * MS)
            gpu_t = start + 400 * US + 4 * MS
            for k, (line, op, kernel) in enumerate(tail):
                cpu = start + (400 + 100 * k) * US
                ln = b.line(script, line, "step")
                b.span(ln, cpu, 90 * US)
                b.op(op, cpu + 5 * US, 80 * US, shapes=[[8192, 65536], []], dtypes=[BF16, "Scalar"])
                b.launch(kernel, cpu + 10 * US, gpu_t, 1 * MS)
                gpu_t += 1 * MS
            b.window(start, t, first_step=step, last_step=step)
        b.step(step, t)
    return b.build()


@pytest.fixture()
def runs(tmp_path):
    (tmp_path / "v1").mkdir()
    (tmp_path / "v2").mkdir()
    before_script, after_script = str(tmp_path / "v1" / "train.py"), str(tmp_path / "v2" / "train.py")
    with open(before_script, "w") as f:
        f.write(BEFORE_SRC)
    with open(after_script, "w") as f:
        f.write(AFTER_SRC)
    before, after = str(tmp_path / "before.brrr"), str(tmp_path / "after.brrr")
    write_recording(build_run(before_script, False, 10.0), before, before_script, T0)
    write_recording(build_run(after_script, True, 8.0), after, after_script, T0)
    return tmp_path, before, after


def diff(*args: str) -> subprocess.CompletedProcess[str]:
    cmd = [sys.executable, "-m", "brrrtui", "diff", *args]
    return subprocess.run(cmd, capture_output=True, text=True, cwd=ROOT, timeout=120)


def test_the_fusion_fix_shows_its_saving_per_line_and_kernel(runs):
    _, before, after = runs
    r = diff(before, after, "--json")
    assert r.returncode == 0, r.stderr
    d = json.loads(r.stdout)
    assert d["unit"] == "step"
    step = d["run"][0]
    assert step["what"] == "step time" and step["before"] == 10 * MS and step["after"] == 8 * MS
    assert step["change"] == -2 * MS and step["beyond_noise"] is True
    by_what = {c["what"]: c for c in d["run"]}
    assert by_what["GPU compute"]["change"] == 0  # the GEMM did not change
    assert by_what["GPU memory"]["before"] - by_what["GPU memory"]["after"] == pytest.approx(2 * MS, abs=1)
    lines = {
        (
            os.path.basename(x["before"]["file"]) if x["before"] else None,
            x["before"] and x["before"]["line"],
            x["after"] and x["after"]["line"],
        ): x
        for x in d["lines"]
    }
    # the GEMM line moved from 3 to 5 (two lines inserted) and is matched by its text: no change
    gemm = lines[("train.py", 3, 5)]
    # its GPU time is the same; its idle moves by microseconds (each run's window is replayed at its own
    # unprofiled speed: analyzers/idle/unprofiled_replay.py)
    assert gemm["matched_by"] == "text" and gemm["gpu_ns"]["before"] == gemm["gpu_ns"]["after"]
    assert abs(gemm["change_ns"]) < 5 * US and gemm["beyond_noise"] is False
    # the three pointwise lines are gone (3 ms per step); the fused line is new (1 ms)
    gone = [x for x in d["lines"] if x["after"] is None]
    assert sorted(x["before"]["line"] for x in gone) == [4, 5, 6]
    assert sum(x["change_ns"] for x in gone) == -3 * MS
    (new,) = [x for x in d["lines"] if x["before"] is None]
    assert new["after"]["line"] == 6 and new["change_ns"] == 1 * MS and new["beyond_noise"] is True
    kernels = {k["name"]: k for k in d["kernels"]}
    assert kernels["triton_poi_fused_add_mul_tanh_0"]["calls"] == {"before": 0, "after": 1}
    assert kernels["vectorized_elementwise_kernel<mul>"]["change_ns"] == -1 * MS


def test_text_output_and_the_ci_gate(runs):
    _, before, after = runs
    r = diff(before, after)
    assert r.returncode == 0
    assert "10 ms -> 8 ms  -2 ms (-20%)  beyond the noise" in r.stdout
    # a line that moved by microseconds (< 0.1 % of a step) is not listed
    assert "train.py:3 -> :5" not in r.stdout
    assert "(gone)" in r.stdout and "(new)" in r.stdout
    # after -> before is 25 % slower, far beyond the noise: the gate fails
    r = diff(after, before, "--fail-if-slower", "5")
    assert r.returncode == 1 and "slower" in r.stderr and "+25.0%" in r.stderr
    r = diff(before, after, "--fail-if-slower", "5")
    assert r.returncode == 0 and "not slower" in r.stderr


def test_a_change_within_the_noise_does_not_fail_the_gate(tmp_path):
    script = str(tmp_path / "train.py")
    with open(script, "w") as f:
        f.write(BEFORE_SRC)
    a, b = str(tmp_path / "a.brrr"), str(tmp_path / "b.brrr")
    started = time.time_ns() + 60 * 10**9  # both runs started after the script was last written
    write_recording(build_run(script, False, 10.0, jitter_us=400), a, script, started)
    write_recording(build_run(script, False, 10.2, jitter_us=400), b, script, started)
    r = diff(a, b, "--json", "--fail-if-slower", "1")
    d = json.loads(r.stdout)
    step = d["run"][0]
    assert step["relative"] == pytest.approx(0.02) and step["beyond_noise"] is False
    assert d["noise_ns"] > 200_000
    assert r.returncode == 0 and "not slower" in r.stderr
    # the same file in both runs, not edited since: its lines are matched by number, without a note
    assert d["lines"][0]["matched_by"] == "line" and d["notes"] == []
    # once the script is edited after the before run started, the diff says its lines go by number
    os.utime(script, ns=(started + 10**9, started + 10**9))
    d = json.loads(diff(a, b, "--json").stdout)
    assert len(d["notes"]) == 1 and "matched by number" in d["notes"][0] and "--before-src" in d["notes"][0]


def test_bad_input_is_one_line(tmp_path, runs):
    _, before, _ = runs
    r = diff(before, str(tmp_path / "missing.brrr"))
    assert r.returncode == 2 and r.stderr.startswith("brrrtui: error:") and "Traceback" not in r.stderr
    r = diff(before, before, "--before-src", str(tmp_path / "nope"))
    assert r.returncode == 2 and "not a directory" in r.stderr


def test_lines_are_matched_by_text_across_inserted_lines():
    old = ["a = 1", "b = f(a)", "c = g(b)", "d = h(c)"]
    new = ["import x", "a = 1", "", "b = f(a)", "c = G(b)", "d = h(c)"]
    assert align(old, new) == {1: 2, 2: 4, 4: 6}  # line 3 changed: no match
    assert pair_files(["/v1/train.py", "/v1/model.py"], ["/v2/train.py", "/v1/model.py"]) == {
        "/v1/train.py": "/v2/train.py",
        "/v1/model.py": "/v1/model.py",
    }
    m = match_lines(
        ["/v1/train.py", "/v1/util.py"],
        ["/v2/train.py", "/v2/util.py"],
        {"/v1/train.py": old},
        {"/v2/train.py": new},
    )
    assert m.find("/v1/train.py", 2) == ("/v2/train.py", 4, LineMatch.TEXT)
    assert m.find("/v1/train.py", 3) is None
    assert m.find("/v1/util.py", 7) == ("/v2/util.py", 7, LineMatch.LINE)  # no text: by number


def test_a_script_edited_in_place_is_matched_by_text_against_before_src(tmp_path):
    script, old = tmp_path / "train.py", tmp_path / "old"
    old.mkdir()
    (old / "train.py").write_text(BEFORE_SRC)
    script.write_text(AFTER_SRC)  # the working copy holds the fixed version only
    a, b = str(tmp_path / "a.brrr"), str(tmp_path / "b.brrr")
    write_recording(build_run(str(script), False, 10.0), a, str(script), T0)
    write_recording(build_run(str(script), True, 8.0), b, str(script), T0)
    by_number = json.loads(diff(a, b, "--json").stdout)
    assert "matched by number" in by_number["notes"][0]
    assert any(
        x["before"] and x["before"]["line"] == 5 and x["after"] for x in by_number["lines"]
    )  # add -> GEMM
    d = json.loads(diff(a, b, "--json", "--before-src", str(old)).stdout)
    assert d["notes"] == []
    (gemm,) = [x for x in d["lines"] if x["before"] and x["before"]["line"] == 3]
    assert gemm["after"]["line"] == 5 and gemm["matched_by"] == "text" and abs(gemm["change_ns"]) < 5 * US


@pytest.fixture(scope="module")
def cpu_runs(tmp_path_factory):
    """Two real recordings of a tiny CPU training loop (no GPU: the lines' CPU time in torch calls)."""
    out = tmp_path_factory.mktemp("cpu")
    paths = []
    for name in ("a", "b"):
        path = str(out / f"{name}.brrr")
        cmd = [
            sys.executable,
            "-m",
            "brrrtui",
            "record",
            "-o",
            path,
            "--no-calibrate",
            # windows all through the loop: with the default spacing a 120-step run (~30 ms) could end
            # after one time-based window around step 0, whose lines are the set-up's
            "--duty",
            "0.5",
            "--min-gap",
            "0",
            os.path.join(ROOT, "tests", "scripts", "train_lines.py"),
            "400",
        ]
        r = subprocess.run(cmd, capture_output=True, text=True, cwd=str(out), timeout=300)
        assert r.returncode == 0, r.stderr
        paths.append(path)
    return paths


def test_two_cpu_recordings_compare_cpu_time_per_line(cpu_runs):
    a, b = cpu_runs
    r = diff(a, b, "--json", "--fail-if-slower", "1000")
    assert r.returncode == 0 and "not slower" in r.stderr
    d = json.loads(r.stdout)
    assert d["measure"] == "CPU" and [c["what"] for c in d["run"]] == ["step time"]
    assert d["before"]["steps"] > 50 and d["after"]["steps"] > 50 and d["noise_ns"] > 0
    lines = {x["before"]["line"]: x for x in d["lines"] if x["before"] and x["after"]}
    matmul = lines[15]  # `y = x @ w`: the same file in both runs, matched by number
    assert (
        matmul["matched_by"] == "line" and matmul["host_ns"]["before"] > 0 and matmul["host_ns"]["after"] > 0
    )
    assert matmul["beyond_noise"] is None and matmul["regime"] == {"before": None, "after": None}
    assert any("no GPU activity" in n for n in d["notes"])
    text = diff(a, b).stdout
    assert (
        "lines (CPU-side time: sampled, or in torch calls where more, per step" in text
        and "kernels (" not in text
    )
