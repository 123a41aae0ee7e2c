"""The window replayed at unprofiled speed (analyzers/idle/unprofiled_replay.py): which idle an unprofiled step keeps,
gap by gap. Hand-built runs, exact arithmetic."""

from __future__ import annotations

import os

import numpy as np
import pytest
from fixtures.synthetic import TraceBuilder

from analyzers.analyze import analyze
from analyzers.idle.cpu_waits import main_thread_waits
from analyzers.idle.gap_evidence import GapEvidence, Intervals
from analyzers.idle.unprofiled_replay import (
    LAUNCH_LATENCY_NS as LAT,
    _gpu_spacing,
    _idle_before,
    _prepare,
    _replay,
)
from analyzers.link.links import link
from brrrtui.contract.model import NONE
from brrrtui.recording.load import load_trace

US, MS = 1_000, 1_000_000
API = 2 * US  # TraceBuilder's launch call: the kernel is launched when it returns
STEPS = 12
WINDOW_STEP = 6


def two_phase_run(unprofiled_step_ns: int) -> TraceBuilder:
    """Steps of `unprofiled_step_ns`; step 6 profiled in a window, the CPU twice as slow:
    - line 10, launch-bound: ten 10 us kernels, one launched every 100 us (profiled);
    - line 20: a 5 ms kernel launched at 1.0 ms;
    - line 30: 8 ms of Python (an optimizer's step) while that kernel runs, then a 1 ms kernel launched at 9 ms:
      3 ms of GPU idle before it in the window, none at unprofiled speed (the GPU is still busy)."""
    b = TraceBuilder()
    small, big, py = b.line("train.py", 10), b.line("train.py", 20), b.line("train.py", 30)
    t = 0
    b.step(0, t)
    for step in range(1, STEPS):
        start = t
        if step == WINDOW_STEP:
            b.span(small, start, 1 * MS)
            for i in range(10):
                b.launch(
                    "vectorized_elementwise_kernel<mul>",
                    start + i * 100 * US,
                    start + i * 100 * US + API + LAT,
                    10 * US,
                )
            b.span(big, start + 1 * MS, 10 * US)
            b.launch("sm90_xmma_gemm_bf16bf16", start + 1 * MS, start + 1 * MS + API + LAT, 5 * MS)
            b.span(py, start + 1 * MS + 10 * US, 8 * MS)
            b.launch("vectorized_elementwise_kernel<add>", start + 9 * MS, start + 9 * MS + API + LAT, 1 * MS)
            t = start + 9 * MS + API + LAT + 1 * MS
            b.window(start, t, first_step=step, last_step=step)
        else:
            t = start + unprofiled_step_ns
        b.step(step, t)
    return b


def prepared(trace):
    """The replay's windows of a hand-built trace, every GPU row busy."""
    links = link(trace)
    evidence = GapEvidence(trace, links, np.zeros(len(trace.gpu), dtype=bool))
    pending = _prepare(
        trace, links, np.ones(len(trace.gpu), dtype=bool), main_thread_waits(trace, evidence.sync_union)
    )
    return [p.build() for p in pending]


def test_work_time_leaves_out_time_blocked_in_syncs():
    # the replay's CPU work time: t less the union of synchronising calls before it
    blocked = Intervals(np.array([2, 10]), np.array([5, 11]))
    t = np.array([1, 3, 7, 12])
    assert (t - blocked.covered_until(t)).tolist() == [1, 2, 4, 8]


def test_replay_at_full_speed_reproduces_the_window_and_at_half_speed_closes_the_cpu_gaps():
    b = two_phase_run(6_504 * US)
    trace = b.build()
    (win,) = prepared(trace)
    start, length, gpu_end = _replay(win, 1.0)
    np.testing.assert_array_equal(start, trace.gpu.start_ns[win.rows] - trace.windows.start_ns[0])
    assert length == gpu_end == 9 * MS + API + LAT + 1 * MS
    start, length, gpu_end = _replay(win, 0.5)
    idle = _idle_before(start, win.dur)
    # launch-bound kernels every 50 us: 40 us idle before each but the first; the 1 ms kernel waits for the 5 ms one
    assert idle[1:10].tolist() == [40 * US] * 9
    assert idle[11] == 0 and start[11] == 500 * US + API / 2 + LAT + 5 * MS
    assert length == gpu_end == 500 * US + API / 2 + LAT + 6 * MS


def test_the_python_heavy_line_keeps_no_idle_the_launch_bound_line_keeps_its_own():
    # unprofiled step: the replay at f = 0.5 (6.504 ms). A uniform scale (0.4 ms of 3.9 ms) would leave the
    # optimizer-like line 30 ~0.3 ms a step and line 10 ~0.09 ms
    a = analyze(two_phase_run(6_504 * US).build())
    by_line = {s.line.line: s for s in a.lines}
    assert (
        by_line[30].idle_profiled_ns == 3 * MS
    )  # the GEMM ends at 6.004 ms, the next kernel starts at 9.004
    assert by_line[30].idle_ns == 0
    assert by_line[10].idle_ns == pytest.approx(9 * 40 * US + API / 2 + LAT, abs=2 * US)


def test_a_run_without_unprofiled_steps_keeps_the_window_idle():
    b = two_phase_run(6_504 * US)
    b.steps = [s for s in b.steps if s[0] >= WINDOW_STEP - 1 and s[0] <= WINDOW_STEP]  # no step outside it
    a = analyze(b.build())
    by_line = {s.line.line: s for s in a.lines}
    assert by_line[30].idle_ns == by_line[30].idle_profiled_ns == 3 * MS


def _unprofiled_lines(root):
    """validation/unprofiled_lines.py, which measures each line's idle in the stream's unprofiled steps."""
    import importlib.util

    spec = importlib.util.spec_from_file_location(
        "unprofiled_lines", os.path.join(root, "validation", "unprofiled_lines.py")
    )
    assert spec is not None and spec.loader is not None
    ul = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(ul)
    return ul


def test_per_line_overhead_against_the_kernel_streams_unprofiled_steps_on_the_h200():
    # GPT-2 eager recorded with --stream on the H200: the kernels of the unprofiled steps measure each line's
    # idle (validation/unprofiled_lines.py). Scaled uniformly, opt.step() and clip_grad_norm_ were charged
    # 52 and 70 points more overhead than they have; replayed, no top line is off by 15 points
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    ul = _unprofiled_lines(root)
    a = analyze(load_trace(os.path.join(root, "tests", "fixtures", "h200_gpt_stream.brrr.gz")))
    rows = ul.compare(a, 10)["lines"]
    diffs = [abs(r["diff_points"]) for r in rows]
    # 7 of 10 within 5 points (the worst, the attention's output projection, 15.1 under); without the GPU's
    # ~1.3 us between queued kernels in the replay, 5 of 10
    assert len(diffs) == 10 and max(diffs) < 16
    assert sum(d <= 5 for d in diffs) >= 7


def sleeping_run(with_cpu_clock: bool) -> TraceBuilder:
    """Steps of 25.005 ms unprofiled; step 6 profiled in a window, on-CPU work twice as slow:
    - line 10, launch-bound: ten 10 us kernels, one launched every 400 us (200 us unprofiled);
    - line 40, from 4 ms: 2 ms of Python, a 20 ms sleep (the thread's CPU clock stands still), 4 ms more, then
      a 1 ms kernel launched at 30 ms.
    The main thread is sampled every 2 ms."""
    b = TraceBuilder()
    small, sleeper = b.line("train.py", 10), b.line("train.py", 40)
    t = 0
    b.step(0, t)
    for step in range(1, STEPS):
        start = t
        if step == WINDOW_STEP:
            b.span(small, start, 4 * MS)
            for i in range(10):
                at = start + i * 400 * US
                b.launch("vectorized_elementwise_kernel<mul>", at, at + API + LAT, 10 * US)
            for k in range(16):
                at = k * 2 * MS
                cpu = min(at, 6 * MS) + max(0, at - 26 * MS)
                b.sample(small if at < 4 * MS else sleeper, start + at, cpu if with_cpu_clock else NONE)
            b.span(sleeper, start + 30 * MS, API)
            b.launch(
                "vectorized_elementwise_kernel<add>", start + 30 * MS, start + 30 * MS + API + LAT, 1 * MS
            )
            t = start + 30 * MS + API + LAT + 1 * MS
            b.window(start, t, first_step=step, last_step=step)
        else:
            t = start + 25 * MS + API // 2 + LAT + 1 * MS
        b.step(step, t)
    return b


def test_time_off_the_cpu_is_replayed_as_it_was_and_only_on_cpu_work_is_sped_up():
    trace = sleeping_run(with_cpu_clock=True).build()
    (win,) = prepared(trace)
    assert win.work_fixed.tolist() == [0.0] * 10 + [
        20 * MS
    ]  # the last launch returns 2 us after the last sample
    start, length, gpu_end = _replay(win, 0.5)
    assert (
        start[10] == 0.5 * (10 * MS + API) + 20 * MS + LAT
    )  # 10.002 ms on the CPU at half speed, the sleep as it was
    assert length == gpu_end == start[10] + 1 * MS


def test_a_sleep_is_charged_what_it_lasts_and_the_rest_is_sped_up_as_the_profiler_slowed_it():
    # with the thread's CPU clock the replay fits f = 0.5: line 10 keeps 190 us before each of its last nine
    # kernels, the sleeping line ~23.2 ms (the sleep, 3 ms of Python, the wait after the last small kernel).
    # Without it every CPU nanosecond is sped up alike (f ~ 0.83): the sleep is charged 1.2 ms less and the
    # launch-bound line 1.2 ms more
    by_line = {s.line.line: s for s in analyze(sleeping_run(with_cpu_clock=True).build()).lines}
    assert by_line[10].idle_ns == pytest.approx(9 * 190 * US, abs=10 * US)
    assert by_line[40].idle_ns == pytest.approx(
        25 * MS + LAT - (0.5 * (3600 * US + API) + LAT + 10 * US), abs=10 * US
    )
    blind = {s.line.line: s for s in analyze(sleeping_run(with_cpu_clock=False).build()).lines}
    assert blind[10].idle_ns > by_line[10].idle_ns + 1 * MS
    assert blind[40].idle_ns < by_line[40].idle_ns - 1 * MS


def test_a_wait_inside_a_torch_call_is_not_kept():
    # the main thread waits off the CPU inside loss.backward() while the autograd thread launches: that wait is
    # profiled work (sped up at f), not a sleep
    b = sleeping_run(with_cpu_clock=True)
    window_start = b.windows[0][2] - b.t0
    b.span(1, window_start + 4 * MS, 26 * MS)  # a torch call over the whole "sleep"
    trace = b.build()
    (win,) = prepared(trace)
    assert win.work_fixed.tolist() == [0.0] * 11


def test_queued_kernels_keep_their_gap_and_the_launch_latency_is_the_windows():
    # three kernels launched onto a busy GPU start 1.3 us after the previous ends; one launched onto an idle
    # GPU starts 1.5 us after its launch returns
    # (eight rows of each kind: a window's own medians need MIN_MEDIAN_ROWS)
    queued = [(k * 11_300, 10_000, k * 100) for k in range(9)]  # 1.3 us after the previous one's end
    idle = [(k * 100_000 + 200_000, 5_000, k * 100_000 + 198_500) for k in range(8)]  # 1.5 us after launch
    start, dur, launch = (np.array(col, dtype=np.int64) for col in zip(*(queued + idle), strict=True))
    gap, latency = _gpu_spacing(start, dur, launch)
    assert latency == 1_500
    assert gap.tolist() == [1_300] * 17  # the first and the idle ones: the queued ones' median
    few = _gpu_spacing(start[:3], dur[:3], launch[:3])
    assert few[0].tolist() == [0, 1_300, 1_300] and few[1] == LAT


def test_the_replay_keeps_the_gpus_own_gap_between_queued_kernels():
    b = TraceBuilder()
    line = b.line("train.py", 5)
    b.step(0, 0)
    b.span(line, 0, 50 * US)
    for i in range(5):  # all launched in the first 50 us; each starts 1.3 us after the one before it ends
        b.launch("vectorized_elementwise_kernel<mul>", i * 10 * US, 60 * US + i * 101_300, 100 * US)
    b.window(0, 600 * US, first_step=1, last_step=1)
    b.step(1, 600 * US)
    trace = b.build()
    (win,) = prepared(trace)
    start, _, _ = _replay(win, 0.5)
    assert np.diff(start).tolist() == [101_300.0] * 4
    assert _idle_before(start, win.dur)[1:].tolist() == [1_300.0] * 4


def _without_cpu_clock(trace):
    import dataclasses

    from brrrtui.contract.model import Table

    cols = dict(trace.line_samples.columns)
    cols["cpu_ns"] = np.full(len(trace.line_samples), NONE, np.int64)
    return dataclasses.replace(trace, line_samples=Table(cols))


SLEEP_LINE = 87  # examples/known_regimes.py: time.sleep(args.sleep_ms / 1e3)


@pytest.mark.parametrize(
    ("fixture", "sleep_ms", "charged_ms", "blind_ms"),
    [
        ("h200_known_regimes_sleep20.brrr.gz", 20, (19.0, 20.5), 16.5),
        ("h200_known_regimes_sleep2.brrr.gz", 2, (1.9, 2.4), 0.9),
    ],
)
def test_a_time_sleep_on_the_h200_is_charged_what_it_lasts(fixture, sleep_ms, charged_ms, blind_ms):
    # examples/known_regimes.py --steps 300 --sleep-ms 20 / 2 recorded with default options on the H200
    # (`python -m validation.run lines`): with the thread's CPU clock the replay charges the sleep's line 20.3 ms
    # (2.23 ms) of idle a step, what the sleep lasted (2.1 ms, a 2 ms sleep overshoots) and the Python around
    # it; sped up like the profiled work, 16.0 ms (0.8 ms)
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    with open(os.path.join(root, "examples", "known_regimes.py")) as f:
        assert "time.sleep(" in f.read().splitlines()[SLEEP_LINE - 1]
    trace = load_trace(os.path.join(root, "tests", "fixtures", fixture))
    for t, (lo, hi) in ((trace, charged_ms), (_without_cpu_clock(trace), (0.0, blind_ms))):
        a = analyze(t)
        (sleep,) = [s for s in a.lines if s.line.line == SLEEP_LINE]
        assert lo <= sleep.idle_ns / a.steps_analysed / 1e6 <= hi, sleep_ms


def optimizer_run(unprofiled_optimizer_ns: int) -> TraceBuilder:
    """two_phase_run with line 30's Python inside `Optimizer.step#AdamW.step` (7.99 ms, up to the last launch),
    and every step's optimizer.step() timed at `unprofiled_optimizer_ns`."""
    b = two_phase_run(6_504 * US)
    start = b.windows[0][2] - b.t0
    b.op("Optimizer.step#AdamW.step", start + 1 * MS + 10 * US, 7_990 * US)
    b.steps = [(step, t, unprofiled_optimizer_ns, NONE) for step, t, _, _ in b.steps]
    return b


def test_the_optimizers_step_is_replayed_at_its_measured_ratio():
    # step() lasts 0.799 ms unprofiled, 7.99 ms profiled: its CPU time replays at 0.1, the rest at f
    from analyzers.idle.measured_regions import measured_regions

    trace = optimizer_run(799 * US).build()
    (region,) = measured_regions(trace)
    assert (region.name, region.factor, region.profiled_ns, region.unprofiled_ns) == (
        "Optimizer.step",
        0.1,
        7_990 * US,
        799 * US,
    )
    (win,) = prepared(trace)
    # the last kernel's launch returns at 9.002 ms, after the scope's 7.99 ms: they replay in 0.799 ms, the
    # rest of the CPU's 9.002 ms at f. At f = 0.5 the launch comes at ~1.31 ms, before the GEMM's end
    # (5.505 ms): the idle the window had before that kernel (3 ms) is gone
    assert (win.work_fixed[11], win.work_kept[11]) == (7_990 * US, pytest.approx(799 * US))
    start, _, _ = _replay(win, 0.5)
    assert _idle_before(start, win.dur)[11] == 0 and start[11] == start[10] + 5 * MS


def test_a_run_without_optimizer_timings_replays_every_cpu_nanosecond_at_f():
    from analyzers.idle.measured_regions import measured_regions

    assert measured_regions(optimizer_run(NONE).build()) == []


def test_the_run_level_corrected_share_is_at_least_the_replays_on_a_gpu_bound_h200_run():
    # HF GPT-2 (vocab 50257) on the H200: unprofiled step 57.86 ms, 56.39 ms of GPU a step in the windows; the
    # subtraction leaves 2.55 %, the replay keeps the launch latency and queued kernels' spacing: ~3.0 %
    from analyzers.totals import breakdown as bd

    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    a = analyze(load_trace(os.path.join(root, "tests", "fixtures", "h200_hf_gpt2_vocab50257.brrr.gz")))
    o, busy = a.overhead, a.breakdown.busy_ns
    subtraction = (o.unprofiled_step_ns - busy / a.steps_analysed) / o.unprofiled_step_ns
    replayed_idle = sum(s.idle_ns for s in a.lines)  # the replayed idle of every gap, charged to its line
    assert 0.024 < subtraction < 0.027 and 0.028 < o.corrected_overhead_fraction < 0.032
    assert o.corrected_overhead_fraction == pytest.approx(replayed_idle / (busy + replayed_idle))
    without_replay = bd.overhead_correction(a.breakdown, None, o.unprofiled_step_ns, a.steps_analysed)
    assert without_replay.corrected_overhead_fraction == pytest.approx(subtraction)


def test_a_2ms_sleep_is_charged_what_the_streams_unprofiled_steps_measure():
    # examples/known_regimes.py --sleep-ms 2 recorded with --stream on the H200: in the unprofiled steps the
    # GPU gap that ends with line 88's first kernel (the sleep's, line 87, and the Python around it) lasts
    # 2.39 ms in the median step; brrrtui charges lines 87 and 88 2.19 ms a step (1.94 ms with each wait
    # spread evenly over its 2 ms sample stretch, where part of the sleep went to the tanh loop's gaps)
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    ul = _unprofiled_lines(root)
    a = analyze(
        load_trace(os.path.join(root, "tests", "fixtures", "h200_known_regimes_sleep2_stream.brrr.gz"))
    )
    by_number = {s.line.line: s for s in a.lines}
    charged = (by_number[87].idle_ns + by_number[88].idle_ns) / a.steps_analysed
    by_line, _, _ = ul.measured(a)
    measured = float(np.median(by_line[by_number[88].line_id][:, 1]))
    assert 2.3 * MS < measured < 2.5 * MS
    assert abs(charged / measured - 1) < 0.1
