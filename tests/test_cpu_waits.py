"""The main thread's waits off the CPU (analyzers/cpu_waits.py): hand-built samples with exact arithmetic, and
the H200 recording of a 20 ms `time.sleep` a step."""

from __future__ import annotations

import os

import numpy as np
from fixtures.synthetic import TraceBuilder

from analyzers.cpu_waits import is_wait, main_thread_waits
from brrrtui.recording.load import load_trace

MS = 1_000_000
ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


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


def test_a_sleep_between_samples_is_a_wait_and_spread_over_its_stretches():
    waits = main_thread_waits(sleepy().build())
    assert waits.off.tolist() == [0, 2 * MS, 2 * MS, 2 * MS, 2 * MS, 0]
    t0 = TraceBuilder().t0
    g0 = np.array([t0 + 3 * MS, t0 + 9 * MS, t0])
    g1 = np.array([t0 + 5 * MS, t0 + 13 * MS, t0 + 2 * MS])
    assert waits.waited(g0, g1).tolist() == [2 * MS, 1 * MS, 0]
    t, waited = waits.of_window(0)
    assert (t - t0).tolist() == [2 * k * MS for k in range(7)]
    assert waited.tolist() == [0, 0, 2 * MS, 4 * MS, 6 * MS, 8 * MS, 8 * MS]


def test_a_wait_inside_a_torch_call_is_no_wait():
    assert not main_thread_waits(sleepy(with_torch_call=True).build()).off.any()


def test_a_recording_without_the_cpu_clock_has_no_waits():
    b = sleepy()
    b.samples = [(w, line, t, -1) for w, line, t, _ in b.samples]
    waits = main_thread_waits(b.build())
    assert len(waits) == 0 and waits.of_window(0)[0].size == 0


def test_the_h200_sleep_is_the_waits_of_its_line():
    # examples/known_regimes.py --sleep-ms 20 on the H200: per step, ~20 ms of waits, all on the sleep's line
    trace = load_trace(os.path.join(ROOT, "tests", "fixtures", "h200_known_regimes_sleep20.brrr.gz"))
    waits = main_thread_waits(trace)
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
