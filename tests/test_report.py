"""report.py: the stable JSON schema (keys, types, nulls) and the text summary; analyzers stay pure."""

from __future__ import annotations

import json
import math
import subprocess
import sys

from fixtures.synthetic import BF16, TraceBuilder, phased_trace

from analyzers.analyze import analyze, analyze_with_other_phases, select_windows
from analyzers.phases.run_phases import Phase
from brrrtui.contract.units import fmt_bytes, fmt_lines, fmt_ns, fmt_pct
from brrrtui.present.report import render_text, short_kernel_name, to_json

N = 1 << 24


def small_run():
    b = TraceBuilder()
    ln = b.line("train.py", 41, "step")
    b.span(ln, 0, 20_000)
    b.op("aten::mm", 1_000, 10_000, shapes=[[4096, 4096], [4096, 4096]], dtypes=[BF16, BF16])
    b.launch("sm90_xmma_gemm_bf16bf16", 2_000, 5_000, 200_000)
    b.op("aten::_foreach_add_", 12_000, 5_000, shapes=[[], []], dtypes=["TensorList", "TensorList"])
    b.launch("multi_tensor_apply_kernel", 13_000, 210_000, 20_000)
    b.window(0, 300_000, first_step=0, last_step=0)
    return analyze(b.build())


def test_json_schema_exactly():
    doc = to_json(small_run())
    assert list(doc) == [
        "schema",
        "device",
        "span_ns",
        "breakdown_ns",
        "communication",
        "overhead",
        "lines",
        "kernels",
        "findings",
        "modules",
        "library_lines",
        "phase",
        "windows",
        "phases",
        "other_phases",
    ]
    assert doc["schema"] == 4
    assert doc["communication"] is None  # no collective recorded
    assert doc["modules"] is None  # no span names a module (a hand-built trace)
    # no optimizer step recorded: phases cannot be told, every window is analysed
    assert doc["phase"] == "unknown" and doc["windows"] == [0] and doc["other_phases"] == {}
    assert doc["phases"] == {
        "steps": 0,
        "steady_from_step": None,
        "steady_step_ns": None,
        "reached": False,
        "real_step_ns": None,
        "host_ahead": False,
        "windows": {"unknown": [0]},
    }
    assert doc["device"] == {"name": "NVIDIA H200", "peak_flops_per_s": 989e12, "peak_bytes_per_s": 4.8e12,
                             "peaks_source": "datasheet:H200 SXM", "peaks_raised_from": {}}  # fmt: skip
    assert list(doc["breakdown_ns"]) == ["compute", "memory", "communication", "overhead"]
    assert sum(doc["breakdown_ns"].values()) == doc["span_ns"] == 300_000
    assert list(doc["overhead"]) == [
        "raw_fraction",
        "corrected_fraction",
        "profiled_step_ns",
        "unprofiled_step_ns",
    ]
    assert doc["overhead"]["corrected_fraction"] is None
    (line,) = doc["lines"]
    assert list(line) == [
        "file",
        "line",
        "function",
        "gpu_ns",
        "idle_ns",
        "idle_profiled_ns",
        "cpu_ns",
        "sampled_ns",
        "host_ns",
        "regime",
        "flops",
        "bytes",
        "kernels",
        "display",
    ]
    assert (line["file"], line["line"], line["function"], line["kernels"]) == ("train.py", 41, "step", 2)
    assert line["display"] == "train.py:41"  # a relative path stays as recorded
    assert line["flops"] == 2 * 4096**3  # the foreach kernel's unknown FLOPs do not make the sum unknown
    kernels = {k["name"]: k for k in doc["kernels"]}
    assert list(kernels["sm90_xmma_gemm_bf16bf16"]) == [
        "name", "calls", "gpu_ns", "regime", "achieved_flops_per_s", "achieved_bytes_per_s", "narrow_load_bytes",
        "roof_fraction", "capped",
    ]  # fmt: skip
    assert kernels["sm90_xmma_gemm_bf16bf16"]["narrow_load_bytes"] is None
    assert kernels["sm90_xmma_gemm_bf16bf16"]["regime"] == "compute"
    assert kernels["multi_tensor_apply_kernel"]["achieved_flops_per_s"] is None  # unknown -> null, never NaN
    for f in doc["findings"]:
        assert list(f) == [
            "kind",
            "lines",
            "saving_ns",
            "message",
            "action",
            "module",
            "library_line",
            "knob",
        ]
    text = json.dumps(doc, allow_nan=False)  # raises on NaN / inf
    assert json.loads(text) == doc


def test_no_nan_anywhere_in_json():
    def walk(x):
        if isinstance(x, float):
            assert math.isfinite(x)
        elif isinstance(x, dict):
            for v in x.values():
                walk(v)
        elif isinstance(x, list):
            for v in x:
                walk(v)

    walk(to_json(small_run()))


def test_top_truncates_lines_and_kernels_only():
    doc = to_json(small_run(), top=1)
    assert len(doc["kernels"]) == 1 and doc["kernels"][0]["name"] == "sm90_xmma_gemm_bf16bf16"


def test_text_report_sections():
    text = render_text(small_run(), top=5)
    for part in (
        "where the time goes",
        "compute",
        "memory",
        "overhead",
        "top lines",
        "train.py:41",
        "top kernels",
    ):
        assert part in text, part


def test_empty_trace_reports_without_error():
    b = TraceBuilder()
    b.window(0, 1_000)
    a = analyze(b.build())
    assert a.breakdown.overhead_ns == a.breakdown.span_ns == 1_000
    assert any(n.startswith("no GPU activity in this recording") for n in a.notes)
    json.dumps(to_json(a), allow_nan=False)
    assert "CPU time per line" in render_text(a)


def test_units():
    assert fmt_bytes(1.6e9) == "1.6 GB" and fmt_bytes(None) == "?"
    assert fmt_ns(400_000) == "400 µs" and fmt_ns(1_234_567) == "1.23 ms" and fmt_ns(float("nan")) == "?"
    assert fmt_pct(0.5) == "50%" and fmt_pct(0.051) == "5.1%"
    assert fmt_lines([41, 42, 43, 44, 47]) == "41–44, 47"
    assert (
        short_kernel_name("void at::native::vectorized_elementwise_kernel<4>", 40)
        == "vectorized_elementwise_kernel<4>"
    )


def test_analyzers_import_no_ui_and_no_torch():
    code = (
        "import sys, analyzers.analyze, brrrtui.present.report\n"
        "bad = {'textual', 'rich', 'torch'} & {m.split('.')[0] for m in sys.modules}\n"
        "assert not bad, bad\n"
        "ours = {m for m in sys.modules if m.startswith('brrrtui.')}\n"
        "layers = ('brrrtui.contract', 'brrrtui.present', 'brrrtui.runtime')\n"
        "assert all(m in layers or m.startswith(tuple(f'{x}.' for x in layers)) for m in ours), ours\n"
    )
    subprocess.run([sys.executable, "-c", code], check=True)


def phased_run():
    """Set-up window 0 (model construction on line 10, before step 0), then steps of 5 ms after a 200 ms first
    step; window 1 holds step 1 (warm-up), window 2 holds step 20 (steady). Each step window: one 4 ms GEMM on
    line 41, the profiled step taking 10 ms against 5 ms unprofiled."""
    return phased_trace()


def test_report_leads_with_the_steady_state_and_shows_the_rest_apart():
    trace = phased_run()
    a, others = analyze_with_other_phases(trace)
    doc = to_json(a, others=others)
    assert doc["phase"] == "steady" and doc["windows"] == [2]
    # step 2 follows a window (its duration would hold the close): skipped, so the steady state starts at 3
    assert doc["phases"]["steady_from_step"] == 3 and doc["phases"]["steady_step_ns"] == 5_000_000
    assert doc["phases"]["windows"] == {"setup": [0], "warmup": [1], "steady": [2]}
    assert list(doc["other_phases"]) == ["setup", "warmup"]
    assert doc["other_phases"]["setup"]["lines"][0]["line"] == 10
    (line,) = [ln for ln in doc["lines"] if ln["line"] == 41]
    # profiled: the 4 ms GEMM, launched 0.2 ms into the 10 ms window (the call returns 2 us later), starts at
    # 2 ms: the line's 2 ms of idle. Replayed in the 5 ms unprofiled step, the CPU runs at f = 0.5 (10 ms of CPU
    # -> 5 ms): the launch returns at 0.101 ms and the GEMM starts 4 us later
    # (unprofiled_replay.LAUNCH_LATENCY_NS): 105 us of idle left
    assert line["idle_profiled_ns"] == 2_000_000 and line["idle_ns"] == 105_000
    text = render_text(a, others=others)
    assert "phase    steady state, from step 3 of 40 (5 ms a step)" in text
    assert "setup (window 0;" in text and "warm-up (window 1;" in text


def test_a_run_without_a_steady_window_says_so():
    trace = phased_run()
    a = analyze(trace, windows=[0, 1])
    assert a.phase is Phase.UNKNOWN  # a mix of phases asked for by hand
    warm = analyze(trace, phase=Phase.WARMUP)
    assert warm.windows == (1,) and warm.phase is Phase.WARMUP
    no_steady = analyze(select_windows(trace, [0, 1]))
    assert no_steady.phase is Phase.WARMUP
    assert any("no steady-state window: no window was recorded in it" in n for n in no_steady.notes)


def test_paths_read_relative_to_here_or_the_run_and_libraries_from_their_package(tmp_path, monkeypatch):
    from brrrtui.present.paths import readable_path, readable_text

    monkeypatch.chdir(tmp_path)
    run = "/data/runs/exp1"
    assert readable_path(str(tmp_path / "model.py"), run) == "model.py"  # below the current folder
    assert readable_path("/data/runs/exp1/src/train.py", run) == "src/train.py"  # below the run's folder
    assert readable_path("/venv/lib/python3.12/site-packages/transformers/activations.py", run) == (
        "transformers/activations.py"
    )
    assert (
        readable_path("/elsewhere/x.py", run) == "/elsewhere/x.py"
        and readable_path("rel/x.py", run) == "rel/x.py"
    )
    text = "9 kernels on /data/runs/exp1/src/train.py:32, 12× per step (lines 41–44 of /elsewhere/x.py)"
    assert (
        readable_text(text, run)
        == "9 kernels on src/train.py:32, 12× per step (lines 41–44 of /elsewhere/x.py)"
    )
