"""The benchmarks' synthetic run (benchmarks/synthetic_run.py) must keep up with the recording's schemas:
the scale benchmarks time nothing if it no longer builds or loads."""

import os
import sys

from analyzers.analyze import analyze
from brrrtui.recording.load import load_trace

sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "benchmarks"))
import synthetic_run  # noqa: E402


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
