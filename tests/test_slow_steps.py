"""Slow steps: hand-built step times where the arithmetic is exact, the step times of real H200 recordings, and
the finding through analyze() and the report."""

import gzip
import os
import shutil
from dataclasses import replace

import numpy as np
import pytest
from fixtures.synthetic import TraceBuilder, phased_trace

from analyzers.analyze import analyze, phases_of
from analyzers.phases.run_phases import Phase
from analyzers.phases.slow_steps import slow_steps, slow_steps_finding
from analyzers.results import FindingKind
from brrrtui.contract.model import Table
from brrrtui.contract.schema import CAPTURE_COST_SCHEMA
from brrrtui.present.finding_words import action, message
from brrrtui.recording.load import load_trace

MS = 1_000_000
HERE = os.path.dirname(os.path.abspath(__file__))


def run_of(durations_ms, windows=(), convert_ms=()):
    """Steps ending at the running sum of `durations_ms` (step 0 ends at 100 ms); `windows`: (first, last) step
    of each step window, which opens as its first step starts and closes as its last one ends; `convert_ms`:
    each window's conversion after it closed."""
    b = TraceBuilder()
    ends = (100 + np.concatenate([[0], np.cumsum(durations_ms)])) * MS
    for step, t in enumerate(ends.astype(np.int64).tolist()):
        b.step(step, t)
    for w, (first, last) in enumerate(windows):
        b.window(int(ends[first - 1]) + 1, int(ends[last]) + 1, first_step=first, last_step=last, window=w)
    trace = b.build()
    if convert_ms:
        costs = {
            "window": np.arange(len(convert_ms), dtype=CAPTURE_COST_SCHEMA["window"]),
            "convert_ns": (np.asarray(convert_ms) * MS).astype(np.int64),
            "cost_ns": (np.asarray(convert_ms) * MS).astype(np.int64),
        }
        trace = replace(trace, capture_costs=Table(costs))
    return trace


def test_a_periodic_slow_step_that_costs_time_is_counted_and_its_period_found():
    # 10 ms steps, every 10th takes 30 ms (steps 10, 20, ..., 90 of 100)
    durations = [30 if s % 10 == 0 else 10 for s in range(1, 101)]
    trace = run_of(durations)
    s = slow_steps(trace, phases_of(trace).run)
    assert s.slow == tuple(range(10, 101, 10)) and s.period == 10
    assert s.median_ns == 10 * MS and s.steps == 100 and s.mean_ns == pytest.approx(12 * MS)
    assert s.lost_ns == pytest.approx(2 * MS)  # 10 slow steps x 20 ms over 100 steps
    f = slow_steps_finding(s, streamed=False)
    assert f.kind is FindingKind.SLOW_STEPS and f.saving_ns == pytest.approx(2 * MS) and f.lines == ()
    assert (
        "every 10 steps (steps 10, 20, 30, 40 and 6 more)" in message(f)
        and "mean step is 2 ms (20%) longer than the median" in message(f)
    )
    assert ".item()" in action(f) and "--stream" not in action(f)


def test_slow_steps_that_the_next_steps_make_up_for_lose_nothing():
    # a step that waits for the GPU (loss.item() every 10 steps) is slow on the CPU's clock; the GPU stayed
    # busy, so the next step, its queue drained, is quicker by as much
    durations = [18 if k % 10 == 0 else 2 if k % 10 == 1 and k > 1 else 10 for k in range(1, 101)]
    trace = run_of(durations)
    s = slow_steps(trace, phases_of(trace).run)
    assert s.slow == tuple(range(10, 101, 10)) and s.period == 10
    # step 100 has no quick step after it
    assert s.median_ns == 10 * MS and s.mean_ns == pytest.approx(10.08 * MS)
    assert s.lost_ns < 0.01 * s.median_ns and slow_steps_finding(s, streamed=False) is None


def test_steps_inside_a_window_and_its_conversion_are_brrrtuis_not_the_scripts():
    # window 0 holds steps 40-41 (profiled, 50 ms); its conversion, 60 ms after the close, slows steps 42-44
    # (25 ms): 42 and 43 end inside it, 44 is the first to end after it (it paid the rest)
    durations = [10] * 100
    for s in (40, 41):
        durations[s - 1] = 50
    for s in (42, 43, 44):
        durations[s - 1] = 25
    trace = run_of(durations, windows=[(40, 41)], convert_ms=[60])
    s = slow_steps(trace, phases_of(trace).run)
    assert s.slow == () and s.steps == 100 - 5 and s.lost_ns == 0
    assert slow_steps_finding(s, streamed=False) is None
    without_conversion = run_of(durations, windows=[(40, 41)])  # only the window and the step after it
    assert slow_steps(without_conversion, phases_of(without_conversion).run).slow == (43, 44)


def test_a_run_without_a_steady_state_or_steps_has_none():
    assert slow_steps(run_of([]), phases_of(run_of([])).run) is None
    climbing = run_of([10 * 1.5**k for k in range(12)])
    assert slow_steps(climbing, phases_of(climbing).run) is None


def test_two_slow_steps_of_a_few_percent_are_reported_one_is_not():
    one = run_of([10] * 99 + [260])  # +250 ms once in 100 steps: 2.5 ms a step, but a single step
    s = slow_steps(one, phases_of(one).run)
    assert s.slow == (100,) and slow_steps_finding(s, False) is None
    two = run_of([10] * 50 + [110] + [10] * 48 + [110])  # +200 ms in 100 steps: 2 ms a step, 20 %
    s = slow_steps(two, phases_of(two).run)
    assert s.slow == (51, 100) and s.period is None
    f = slow_steps_finding(s, streamed=True)
    assert f is not None and "steps 51, 100." in message(f) and "garbage collector" in action(f)
    assert action(f).startswith("This run was recorded with --stream")


def recording(name, tmp_path):
    path = str(tmp_path / f"{name}.brrr")
    with gzip.open(os.path.join(HERE, "fixtures", f"{name}.brrr.gz")) as src, open(path, "wb") as dst:
        shutil.copyfileobj(src, dst)
    return load_trace(path)


def test_h200_hf_gpt2_logging_every_10_steps_costs_nothing(tmp_path):
    """Hugging Face GPT-2 on the H200 (validation/workloads: `loss.item()` every 10 steps): every 10th step
    74-90 ms against a 57.8 ms median, yet the mean step is the median's: the GPU never waited."""
    trace = recording("h200_hf_gpt2_steady", tmp_path)
    s = slow_steps(trace, phases_of(trace).run)
    assert s.period == 10 and s.slow[:3] == (11, 21, 31) and len(s.slow) == 11
    assert abs(s.mean_ns - s.median_ns) < 0.005 * s.median_ns
    assert slow_steps_finding(s, streamed=False) is None
    assert FindingKind.SLOW_STEPS not in [f.kind for f in analyze(trace).findings]


def test_h200_gpt2_stream_recording_loses_time_to_slow_steps(tmp_path):
    """GPT-2 small recorded with --stream on the H200: 8 of 88 steady steps over 1.25x the median (47.6 ms),
    up to 102 ms, 3.1 ms a step lost; the finding says the stream may be the cause."""
    trace = recording("h200_gpt_stream", tmp_path)
    a = analyze(trace)
    (f,) = [f for f in a.findings if f.kind is FindingKind.SLOW_STEPS]
    assert f.saving_ns == pytest.approx(3.11 * MS, rel=0.01)
    assert message(f).startswith(
        "8 of 88 steady steps took over 1.25× the median step (47.6 ms), up to 102 ms"
    )
    assert action(f).startswith("This run was recorded with --stream")


def test_the_finding_reaches_the_report_and_sarif():
    from brrrtui.present.report import render_text, to_json
    from brrrtui.present.sarif import to_sarif

    trace = phased_trace()  # 5 ms steady steps; windows hold steps 1 and 20
    assert FindingKind.SLOW_STEPS not in [f.kind for f in analyze(trace).findings]
    t = trace.steps.t_ns.copy()
    t[30:] += 40 * MS  # steps 30 and 35 take 45 ms
    t[35:] += 40 * MS
    slowed = replace(trace, steps=Table({**trace.steps.columns, "t_ns": t}))
    a = analyze(slowed)
    (f,) = [f for f in a.findings if f.kind is FindingKind.SLOW_STEPS]
    warmup = analyze(slowed, phase=Phase.WARMUP)  # the analyses shown apart do not repeat the run's finding
    assert warmup.phase is Phase.WARMUP and FindingKind.SLOW_STEPS not in [g.kind for g in warmup.findings]
    assert "steps 30, 35." in message(f) and f is a.findings[0]  # 80 ms over 19 steady steps: the largest
    assert "slow_steps" in [g["kind"] for g in to_json(a)["findings"]]
    assert "[slow_steps]" in render_text(a)
    log = to_sarif(a, "test")["runs"][0]
    assert ("slow_steps", "SlowSteps") in [(r["id"], r["name"]) for r in log["tool"]["driver"]["rules"]]
    assert any(r["ruleId"] == "slow_steps" for r in log["results"])
