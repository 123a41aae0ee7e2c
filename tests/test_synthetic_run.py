"""The benchmarks' recordings (benchmarks/synthetic_run.py, benchmarks/tiled_recording.py) must keep up with
the recording's schemas: the scale benchmarks time nothing if they no longer build or load."""

import os

from analyzers.analyze import analyze
from benchmarks import synthetic_run, tiled_recording
from brrrtui.recording.load import load_trace


def test_the_synthetic_run_loads_back_from_both_writers_with_every_kernel(tmp_path):
    trace = synthetic_run.generate(50_000)
    assert len(trace.gpu) == 50_000 and len(trace.windows) == 3
    synthetic_run.write_recording(trace, str(tmp_path / "run.brrr"))
    synthetic_run.write_chrome(trace, str(tmp_path / "run.json"))
    recorded, chrome = load_trace(str(tmp_path / "run.brrr")), load_trace(str(tmp_path / "run.json"))
    assert len(recorded.gpu) == len(chrome.gpu) == 50_000 and len(recorded.steps) == len(trace.steps)
    a, b = analyze(recorded), analyze(chrome)
    assert a.overhead.corrected_overhead_fraction is not None  # the unprofiled steps between windows count
    assert {str(s.line) for s in a.lines} == {str(s.line) for s in b.lines} == {str(s) for s in trace.lines}


def test_a_tiled_recording_is_its_steady_window_repeated_and_analyses_alike(tmp_path):
    """benchmarks/tiled_recording.py: the copies of a real recording's steady window form one steady run whose
    per-step figures are the window's own (each copy's rows are the window's, shifted)."""
    source = load_trace(os.path.join(os.path.dirname(__file__), "fixtures", "h200_hf_gpt2_steady.brrr.gz"))
    one = analyze(source)
    assert len(one.windows) == 1
    tiled = tiled_recording.tile(source, kernels=5_000, every=10)
    path = str(tmp_path / "tiled.brrr")
    synthetic_run.write_recording(tiled, path)
    many = analyze(load_trace(path))
    copies = len(many.windows)
    assert copies >= 2 and many.phase == one.phase and len(many.trace.gpu) == copies * len(one.trace.gpu)
    assert many.steps_analysed == copies * one.steps_analysed
    b, b1 = many.breakdown, one.breakdown  # each copy's rows inside its own window's span, gaps and all
    assert (b.span_ns, b.compute_ns, b.memory_ns, b.idle_ns) == tuple(
        copies * v for v in (b1.span_ns, b1.compute_ns, b1.memory_ns, b1.idle_ns)
    )
    lines = {s.line_id: s for s in one.lines}
    for s in many.lines:  # the same lines, each with the copies' kernels and the same GPU time a step
        assert s.kernels == copies * lines[s.line_id].kernels
        assert abs(s.gpu_ns - copies * lines[s.line_id].gpu_ns) <= copies
    assert {f.kind for f in many.findings} == {f.kind for f in one.findings}
