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
from analyzers.phases.slow_steps import MIN_LOSS, slow_steps, slow_steps_finding
from analyzers.results import FindingKind
from brrrtui.contract.model import Table
from brrrtui.contract.schema import CAPTURE_COST_SCHEMA
from brrrtui.contract.units import fmt_ns
from brrrtui.present.finding_words import action, message
from brrrtui.recording.load import load_trace

MS = 1_000_000
HERE = os.path.dirname(os.path.abspath(__file__))


def run_of(durations_ms, windows=(), convert_ms=(), kernels_ms=()):
    """Steps ending at the running sum of `durations_ms` (step 0 ends at 100 ms); `windows`: (first, last) step
    of each step window, which opens as its first step starts and closes as its last one ends; `convert_ms`:
    each window's conversion after it closed; `kernels_ms`: GPU rows (step, start after the step's start,
    duration, stream), in the window that holds the step."""
    b = TraceBuilder()
    ends = (100 + np.concatenate([[0], np.cumsum(durations_ms)])) * MS
    for step, t in enumerate(ends.astype(np.int64).tolist()):
        b.step(step, t)
    for w, (first, last) in enumerate(windows):
        b.window(int(ends[first - 1]) + 1, int(ends[last]) + 1, first_step=first, last_step=last, window=w)
    for step, at, dur, stream in kernels_ms:
        (w,) = [w for w, (first, last) in enumerate(windows) if first <= step <= last]
        b.gpu_row("k", int(ends[step - 1] + at * MS), int(dur * MS), stream=stream, window=w)
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


def gpu_bound_run(pause_ms=()):
    """A loop whose GPU works 12 ms a step (two overlapping rows on two streams: 0-8 ms and 5-12 ms) and whose
    host runs ahead: in every 10 steps, 6 queue their work in 6 ms (36 ms ahead), 3 wait on a full queue
    (12 ms, the GPU's pace) and the 10th waits at a sync for the 36 ms queued: 48 ms. Every 10 steps take 120
    ms, 12 ms a step, the median step 6 ms. Steps 1-100 are steady, window 0 holds steps 101-102 (the GPU's
    work in it), step 103 ends after it; `pause_ms`: {step: ms} the host pauses with the GPU idle (a garbage
    collection), added to those steps."""
    durations = [48 if k % 10 == 0 else 12 if k % 10 >= 7 else 6 for k in range(1, 101)] + [12, 12, 12]
    for k, ms in dict(pause_ms).items():
        durations[k - 1] += ms
    kernels = [(k, 0, 8, 7) for k in (101, 102)] + [(k, 5, 7, 8) for k in (101, 102)]
    return run_of(durations, windows=[(101, 102)], kernels_ms=kernels)


def test_a_gpu_bound_loop_whose_host_runs_ahead_loses_nothing_and_its_real_step_is_the_mean():
    trace = gpu_bound_run()
    s = slow_steps(trace, phases_of(trace).run)
    f = slow_steps_finding(s, streamed=False)
    assert f.kind is FindingKind.SLOW_STEPS and f.saving_ns is None
    assert message(f).startswith(
        "The loop is GPU-bound and the host runs ahead of the GPU: the GPU works 12 ms a step (in the steady "
        "windows), more than the median step on the CPU's clock (6 ms)"
    )
    assert "The real step is the mean over 100 steady steps, 12 ms" in message(f)
    assert "understate it by 6 ms (100%)" in message(f) and "gc.freeze() or more" in action(f)
    assert s.steps == 100 and s.median_ns == 6 * MS and s.mean_ns == pytest.approx(12 * MS)
    assert s.gpu_step_ns == 12 * MS  # the union of the two streams' rows, not their 15 ms sum
    assert s.host_ahead and s.typical_ns == 12 * MS and s.lost_ns == pytest.approx(0, abs=1)
    assert s.real_step_ns == s.mean_ns  # not the median
    # slow against the GPU's 12 ms a step: only the steps that wait at the sync
    assert s.slow == tuple(range(10, 101, 10)) and s.period == 10 and s.gpu_bound


def test_a_gpu_bound_loop_that_also_pauses_loses_the_pauses_against_the_gpus_step():
    # two 30 ms pauses with the GPU idle: 60 ms over 100 steps, 0.6 ms a step (5 % of the GPU's 12 ms step)
    trace = gpu_bound_run({45: 30, 83: 30})
    s = slow_steps(trace, phases_of(trace).run)
    f = slow_steps_finding(s, streamed=False)
    assert f.saving_ns == pytest.approx(0.6 * MS)
    assert message(f).startswith("12 of 100 steady steps took over 1.25× the GPU's work a step (12 ms, more")
    assert "The mean step is 600 µs (5.0%) longer than the GPU's work a step" in message(f)
    assert s.host_ahead and s.median_ns == 6 * MS and s.mean_ns == pytest.approx(12.6 * MS) and not s.gpu_bound
    assert s.slow == (10, 20, 30, 40, 45, 50, 60, 70, 80, 83, 90, 100) and s.period is None


def test_garbage_collections_with_the_gpu_idle_are_slow_steps_against_the_median():
    # 10 ms steps whose GPU works 4 ms; steps 23, 58 and 71 pause 40 ms (the GPU idle): 120 ms over 100 steps
    durations = [10] * 100 + [10, 10, 10]
    for k in (23, 58, 71):
        durations[k - 1] = 50
    trace = run_of(durations, windows=[(101, 102)], kernels_ms=[(101, 1, 4, 7), (102, 1, 4, 7)])
    s = slow_steps(trace, phases_of(trace).run)
    assert s.gpu_step_ns == 4 * MS and not s.host_ahead and s.typical_ns == s.median_ns == 10 * MS
    assert s.slow == (23, 58, 71) and s.lost_ns == pytest.approx(1.2 * MS) and not s.gpu_bound
    assert s.real_step_ns == s.median_ns
    f = slow_steps_finding(s, streamed=False)
    assert f.saving_ns == pytest.approx(1.2 * MS)
    assert message(f).startswith("3 of 100 steady steps took over 1.25× the median step (10 ms), up to 50 ms")
    assert "gc.freeze()" in action(f)


def test_a_gpu_at_the_median_step_is_not_ahead_of_it():
    # the GPU works 10.4 ms a step against a 10 ms median: within AHEAD (the profiler's slower kernels), so
    # the slow steps are measured against the median as before
    durations = [30 if s % 10 == 0 else 10 for s in range(1, 101)] + [11, 11, 10]  # profiled: 11 ms
    trace = run_of(durations, windows=[(101, 102)], kernels_ms=[(101, 0, 10.4, 7), (102, 0, 10.4, 7)])
    s = slow_steps(trace, phases_of(trace).run)
    assert s.gpu_step_ns == pytest.approx(10.4 * MS) and not s.host_ahead
    assert s.lost_ns == pytest.approx(2 * MS) and slow_steps_finding(s, False).saving_ns == pytest.approx(2 * MS)


CNN = os.path.join(os.path.dirname(HERE), "validation", "holdout", "data", "cnn_channels_last.brrr.gz")


def test_h100_resnet18_whose_host_runs_ahead_has_no_slow_steps():
    """The hold-out ResNet-18 in channels_last on an H100: a GPU-bound loop with `loss.item()` every 10 steps,
    whose steps on the CPU's clock alternate between queueing (~7 ms) and waiting for the GPU; synchronised,
    every step took the same and gc.freeze() saved nothing (validation/holdout/SAVINGS.md)."""
    trace = load_trace(CNN)
    a = analyze(trace)
    (f,) = [f for f in a.findings if f.kind is FindingKind.SLOW_STEPS]
    assert f.saving_ns is None and f is a.findings[-1]
    assert message(f).startswith("The loop is GPU-bound and the host runs ahead of the GPU")
    assert action(f).startswith("No time is lost in the long steps")
    s = slow_steps(trace, phases_of(trace).run)
    assert s.gpu_step_ns > 1.25 * s.median_ns and s.mean_ns > 1.25 * s.median_ns  # the median: a queueing step
    assert s.host_ahead and s.lost_ns < MIN_LOSS * s.gpu_step_ns and s.gpu_bound  # the GPU's work is the mean
    assert s.period == 10  # the steps that wait at the logged loss's sync


def test_a_host_running_ahead_leaves_no_idle_to_save():
    """The same ResNet-18: the GPU's work a step fills the real (mean) step, so the unprofiled steps have no
    idle for CUDA graphs to remove (timed on the H100, `torch.compile(backend="cudagraphs")` made the
    synchronised step 0.72 ms slower); the profiled window's 9.7 ms of waits in front of small kernels are the
    profiler's, and the idle correction takes the mean step, not the median one that only queued work."""
    trace = load_trace(CNN)
    a = analyze(trace)
    s = slow_steps(trace, phases_of(trace).run)
    assert a.overhead.unprofiled_step_ns == pytest.approx(s.mean_ns)
    assert s.mean_ns < a.breakdown.busy_ns / a.steps_analysed  # the GPU's work fills the real step
    assert a.overhead.corrected_overhead_fraction == 0
    (small,) = [f for f in a.findings if f.kind is FindingKind.SMALL_KERNELS]
    assert not small.saving_ns and small.facts.waited_ns > 0.5 * MS


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


def test_the_phase_line_and_status_give_the_mean_step_when_the_host_runs_ahead():
    """The step the header states is the loop's real step: on the ResNet-18 whose host runs ahead, the mean (the
    median step only queued work); on HF GPT-2, whose host keeps pace, the median."""
    from brrrtui.present.phase_report import phase_json, phase_line
    from brrrtui.present.status import phase_text, phase_view

    a = analyze(load_trace(CNN))
    s = a.slow_steps
    assert s is not None and s.host_ahead and s.real_step_ns == s.mean_ns > 1.25 * s.median_ns
    line = phase_line(a)
    assert f"({fmt_ns(s.mean_ns)} a step: the mean; the host runs ahead of the GPU" in line
    assert f"the {fmt_ns(s.median_ns)} median step only queues work)" in line
    assert f"· {fmt_ns(s.mean_ns)}/step (mean: the host runs ahead)" in phase_text(phase_view(a))
    doc = phase_json(a, {})["phases"]
    assert doc["host_ahead"] and doc["real_step_ns"] == s.mean_ns != doc["steady_step_ns"]


def test_the_phase_line_keeps_the_median_step_when_the_host_keeps_pace(tmp_path):
    from brrrtui.present.phase_report import phase_line

    a = analyze(recording("h200_hf_gpt2_steady", tmp_path))
    assert a.slow_steps is not None and not a.slow_steps.host_ahead
    assert f"({fmt_ns(a.phases.run.steady_step_ns)} a step)" in phase_line(a)
