"""The main thread's waits off the CPU (analyzers/idle/cpu_waits.py): hand-built samples with exact arithmetic, and
the H200 recording of a 20 ms `time.sleep` a step."""

from __future__ import annotations

import os

import numpy as np
from fixtures.synthetic import TraceBuilder

from analyzers.idle.cpu_waits import is_wait, main_thread_waits
from analyzers.idle.gap_evidence import GapEvidence
from analyzers.link.links import link
from brrrtui.recording.load import load_trace

MS = 1_000_000
US = 1_000
ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def waits_of(trace):
    return main_thread_waits(
        trace, GapEvidence(trace, link(trace), np.zeros(len(trace.gpu), bool)).sync_union
    )


def test_short_waits_of_running_code_are_not_waits():
    # a stretch 30 % off the CPU (the GIL handed to the sampler, an allocator's lock) is work; one 60 % off, or
    # two neighbours 40 % + 60 % off (a sleep across a sample), are waits
    free = np.full(5, 2.0 * MS)
    off = np.array([0.6, 0.0, 0.8, 1.2, 0.0]) * MS
    assert is_wait(off, free).tolist() == [False, False, True, True, False]
    # the same stretches, the 40 % one the last of its window: no neighbour across the window's edge
    assert is_wait(off, free, np.array([0, 0, 0, 1, 1])).tolist() == [False, False, False, True, False]


def sleepy(with_torch_call: bool = False) -> TraceBuilder:
    """Samples every 2 ms from 0 to 12 ms on line 7; the thread's CPU clock stands still from 2 to 10 ms."""
    b = TraceBuilder()
    line = b.line("train.py", 7)
    for k in range(7):
        at = 2 * k * MS
        b.sample(line, at, min(at, 2 * MS) + max(0, at - 10 * MS))
    if with_torch_call:  # loss.backward(): the main thread waits on the autograd thread
        b.span(line, 2 * MS, 8 * MS)
    b.window(0, 12 * MS)
    return b


def test_a_sleep_between_samples_is_a_wait_that_fills_its_stretches():
    waits = waits_of(sleepy().build())
    assert waits.off.tolist() == [0, 2 * MS, 2 * MS, 2 * MS, 2 * MS, 0]
    t0 = TraceBuilder().t0
    g0 = np.array([t0 + 3 * MS, t0 + 9 * MS, t0])
    g1 = np.array([t0 + 5 * MS, t0 + 13 * MS, t0 + 2 * MS])
    assert waits.waited(g0, g1).tolist() == [2 * MS, 1 * MS, 0]
    t, waited = waits.of_window(0)  # no torch call: each stretch's wait fills it
    assert (t - t0).tolist() == [2 * MS, 4 * MS, 4 * MS, 6 * MS, 6 * MS, 8 * MS, 8 * MS, 10 * MS]
    assert waited.tolist() == [0, 2 * MS, 2 * MS, 4 * MS, 4 * MS, 6 * MS, 6 * MS, 8 * MS]


def test_a_wait_lies_in_its_stretchs_longest_time_outside_torch_not_between_a_loops_calls():
    # samples at 0, 2 and 4 ms; ten 80 us torch calls 20 us apart up to 0.98 ms, a 2 ms sleep from 1 to 3 ms,
    # torch calls again from 3 to 4 ms. Each stretch is 1 ms off the CPU: the first stretch's wait lies in
    # 0.98-2 ms, not partly among the loop's calls (spread over the stretch, 0.49 ms of it went there)
    b = TraceBuilder()
    line = b.line("train.py", 7)
    for at, cpu in ((0, 0), (2 * MS, 1 * MS), (4 * MS, 2 * MS)):
        b.sample(line, at, cpu)
    for k in range(10):
        b.op("aten::tanh", k * 100 * US, 80 * US)
        b.op("aten::tanh", 3 * MS + k * 100 * US, 80 * US)
    b.window(0, 4 * MS)
    waits = waits_of(b.build())
    assert waits.off.tolist() == [1 * MS, 1 * MS]
    t0 = TraceBuilder().t0
    g0, g1 = t0 + np.array([0, 980 * US, 2 * MS]), t0 + np.array([980 * US, 3 * MS, 3 * MS])
    assert np.allclose(waits.waited(g0, g1), [0, 2 * MS, 1 * MS])


def test_a_wait_inside_a_torch_call_is_no_wait():
    assert not waits_of(sleepy(with_torch_call=True).build()).off.any()


def test_a_recording_without_the_cpu_clock_has_no_waits():
    b = sleepy()
    b.samples = [(w, line, t, -1) for w, line, t, _ in b.samples]
    waits = waits_of(b.build())
    assert len(waits) == 0 and waits.of_window(0)[0].size == 0


def test_the_h200_sleep_is_the_waits_of_its_line():
    # examples/known_regimes.py --sleep-ms 20 on the H200: per step, ~20 ms of waits, all on the sleep's line
    trace = load_trace(os.path.join(ROOT, "tests", "fixtures", "h200_known_regimes_sleep20.brrr.gz"))
    waits = waits_of(trace)
    w = trace.windows
    steady = (w.first_step >= 2) & (w.last_step >= w.first_step)
    steps = int((w.last_step[steady] - w.first_step[steady] + 1).sum())
    in_steady = np.isin(waits.window, w.window[steady])
    per_line = {
        int(ln): float(waits.off[in_steady & (waits.line == ln)].sum()) for ln in np.unique(waits.line)
    }
    sleep_line = next(i for i, sl in enumerate(trace.lines) if sl.line == 87)
    total = sum(per_line.values())
    assert 18 * MS < total / steps < 21 * MS and per_line[sleep_line] > 0.9 * total


def test_a_gpu_gap_the_thread_spent_waiting_is_a_wait_gap_on_the_waiting_line():
    # a kernel until 1 ms, the sleep from 2 to 10 ms, the next kernel launched at 11 ms: 8 of the gap's 10 ms
    # are waits, so the gap is WAIT, on line 7, and the finding's saving is the idle as it was
    from analyzers.analyze import analyze
    from analyzers.results import GAP_CAUSE_CODES, FindingKind, GapCause

    b = sleepy()
    b.launch("vectorized_elementwise_kernel<mul>", 0, 10_000, 990_000)
    b.launch("vectorized_elementwise_kernel<add>", 11 * MS, 11 * MS + 6_000, 990_000)
    a = analyze(b.build())
    g = a.gaps
    (gap,) = np.nonzero(g.dur_ns > 5 * MS)[0]
    assert g.cause[gap] == GAP_CAUSE_CODES[GapCause.WAIT] and a.trace.lines[g.line[gap]].line == 7
    (wait,) = [f for f in a.findings if f.kind == FindingKind.CPU_WAIT]
    assert wait.saving_ns == g.dur_ns[gap] and [sl.line for sl in wait.lines] == [7]


def test_the_h200_sleep_gets_the_wait_finding_and_not_the_overhead_advice():
    from analyzers.analyze import analyze
    from analyzers.results import FindingKind

    a = analyze(load_trace(os.path.join(ROOT, "tests", "fixtures", "h200_known_regimes_sleep20.brrr.gz")))
    by_kind = {f.kind: f for f in a.findings}
    wait = by_kind[FindingKind.CPU_WAIT]
    assert [sl.line for sl in wait.lines] == [87] and 19.5 * MS < wait.saving_ns < 21.5 * MS
    assert 87 not in [sl.line for sl in by_kind[FindingKind.OVERHEAD].lines]
    assert by_kind[FindingKind.OVERHEAD].saving_ns < 8 * MS  # Python, dispatch, launches only


def test_a_wait_costs_unprofiled_steps_no_more_than_their_overhead(monkeypatch):
    # the gap of the test above (10 ms, 8 ms of it the sleep); unprofiled steps whose whole overhead is 3 ms a
    # step (the host ahead of the GPU, its queued kernels covering the rest of the wait): the saving is 3 ms
    from analyzers.analyze import analyze
    from analyzers.findings.context import Context
    from analyzers.results import FindingKind
    from brrrtui.present.finding_words import message

    b = sleepy()
    b.launch("vectorized_elementwise_kernel<mul>", 0, 10_000, 990_000)
    b.launch("vectorized_elementwise_kernel<add>", 11 * MS, 11 * MS + 6_000, 990_000)
    monkeypatch.setattr(Context, "unprofiled_overhead_ns", property(lambda self: 3.0 * MS))
    (wait,) = [f for f in analyze(b.build()).findings if f.kind == FindingKind.CPU_WAIT]
    assert wait.saving_ns == 3 * MS and wait.facts.idle_ns == 10_006_000
    assert message(wait).endswith(
        "; the profiler does not slow a wait, but unprofiled steps leave the GPU only 3 ms of overhead per"
        " window in all (the host runs ahead, its queued kernels cover the wait), so the wait costs at most that"
    )


def test_h100_resnet18_waits_cost_nothing_where_the_host_runs_ahead():
    """The hold-out ResNet-18 on an H100: the training thread is off the CPU ~0.24 ms a step at the start of
    `loss.backward()` while the profiled GPU idles, but the loop is GPU-bound and its unprofiled steps have no
    overhead (tests/test_slow_steps.py), so the wait saves nothing and makes no finding."""
    from analyzers.analyze import analyze
    from analyzers.results import GAP_CAUSE_CODES, FindingKind, GapCause

    a = analyze(load_trace(os.path.join(ROOT, "validation", "holdout", "data", "cnn_channels_last.brrr.gz")))
    waits = a.gaps.cause == GAP_CAUSE_CODES[GapCause.WAIT]
    assert float(a.gaps.dur_ns[waits].sum()) / a.steps_analysed > 0.2 * MS
    assert a.overhead.corrected_overhead_fraction == 0
    assert not [f for f in a.findings if f.kind == FindingKind.CPU_WAIT]
