"""Breakdown: compute + memory + overhead == span exactly; the profiler correction's arithmetic."""

from __future__ import annotations

import numpy as np
import pytest
from fixtures.synthetic import BF16, TraceBuilder

from analyzers.analyze import analyze
from analyzers.results import REGIME_CODES, Breakdown, Regime
from analyzers.totals import breakdown as bd

C, M, OV = (REGIME_CODES[r] for r in (Regime.COMPUTE, Regime.MEMORY, Regime.OVERHEAD))
MS = 1_000_000


def test_overlap_priority_compute_over_memory_over_overhead():
    # stream 7: compute [0,100); stream 8: memory [50,150); overhead kernel [160,162); window [0,200)
    b = bd.span_breakdown(
        0,
        200,
        np.array([0, 50, 160, 170]),
        np.array([100, 150, 162, 171]),
        np.array([C, M, OV, M], dtype=np.int8),
    )
    assert b == Breakdown(span_ns=200, compute_ns=100, memory_ns=51, overhead_ns=49, idle_ns=47)


def test_kernels_outside_the_window_are_clipped():
    b = bd.span_breakdown(
        100, 200, np.array([50, 190]), np.array([150, 250]), np.array([C, M], dtype=np.int8)
    )
    assert (b.span_ns, b.compute_ns, b.memory_ns, b.overhead_ns) == (100, 50, 10, 40)


def test_random_timelines_always_sum_to_the_span():
    rng = np.random.default_rng(7)
    for _ in range(50):
        n = int(rng.integers(0, 40))
        s = rng.integers(0, 10_000, n)
        e = s + rng.integers(0, 2_000, n)
        reg = rng.integers(0, 3, n).astype(np.int8)
        b = bd.span_breakdown(1_000, 9_000, s, e, reg)
        assert b.compute_ns + b.memory_ns + b.overhead_ns == b.span_ns == 8_000
        assert 0 <= b.idle_ns <= b.overhead_ns


def test_windows_sum_to_the_run():
    tb = TraceBuilder()
    for w in range(3):
        base = w * 1_000_000
        tb.op("aten::mm", base, 10_000, shapes=[[2048, 2048], [2048, 2048]], dtypes=[BF16, BF16], window=w)
        tb.launch("nvjet_gemm_bf16", base + 1_000, base + 20_000, 100_000 + w, window=w)
        tb.window(base, base + 500_003, window=w)
    a = analyze(tb.build())
    assert set(a.window_breakdowns) == {0, 1, 2}
    assert a.breakdown.span_ns == 3 * 500_003
    assert a.breakdown.compute_ns == 300_003
    assert a.breakdown.compute_ns + a.breakdown.memory_ns + a.breakdown.overhead_ns == a.breakdown.span_ns
    one = analyze(tb.build(), windows=[1])
    assert one.breakdown.compute_ns == 100_001 and one.windows == (1,)


def steps_trace(annotations: bool = False) -> TraceBuilder:
    """10 ms steps outside the window, 15 ms steps inside it (steps 5..7)."""
    b = TraceBuilder()
    ends = [10, 20, 30, 40, 50, 65, 80, 95, 105, 115]
    for i, t in enumerate(ends):
        b.step(i, t * MS)
    b.window(50 * MS, 95 * MS, first_step=5, last_step=7)
    if annotations:
        for start in (52, 66, 82, 95):  # periods 14, 16, 13 ms
            b.op("Optimizer.step#SGD.step", start * MS, MS // 2)
    return b


def test_profiled_and_unprofiled_step_times():
    t = steps_trace().build()
    assert bd.profiled_step_ns(t) == 15 * MS
    assert bd.unprofiled_step_ns(t) == 10 * MS  # steps 1-4, 8, 9 (step 0 has no start)
    assert bd.steps_analysed(t) == 3
    t = steps_trace(annotations=True).build()
    assert bd.profiled_step_ns(t) == pytest.approx((14 + 16 + 13) / 3 * MS)


def test_overhead_correction_formula():
    b = Breakdown(span_ns=45 * MS, compute_ns=20 * MS, memory_ns=7 * MS, overhead_ns=18 * MS)
    c = bd.overhead_correction(b, profiled=15 * MS, unprofiled=10 * MS)
    assert c.raw_overhead_fraction == pytest.approx(0.4)
    # busy per step = 27/45 x 15 ms = 9 ms; unprofiled 10 ms -> 1 ms of overhead
    assert c.corrected_overhead_fraction == pytest.approx(0.1)
    same = bd.overhead_correction(b, profiled=15 * MS, unprofiled=15 * MS)
    assert same.corrected_overhead_fraction == pytest.approx(same.raw_overhead_fraction)
    assert bd.overhead_correction(b, profiled=15 * MS, unprofiled=None).corrected_overhead_fraction is None
    assert bd.overhead_correction(b, 15 * MS, 5 * MS).corrected_overhead_fraction == 0.0  # clipped


def test_analyze_reports_the_correction():
    a = analyze(steps_trace().build())
    assert a.overhead.profiled_step_ns == 15 * MS and a.overhead.unprofiled_step_ns == 10 * MS
    assert a.breakdown.overhead_ns == a.breakdown.span_ns == 45 * MS  # no kernels: all idle
    assert a.overhead.corrected_overhead_fraction == 1.0


def test_busy_per_step_comes_from_the_steps_not_the_inflated_profiled_step():
    b = Breakdown(span_ns=45 * MS, compute_ns=20 * MS, memory_ns=7 * MS, overhead_ns=18 * MS)
    # a profiled step inflated by a window's stall does not change the busy time per step: 27 ms / 3 steps
    c = bd.overhead_correction(b, profiled=40 * MS, unprofiled=10 * MS, steps=3)
    assert c.corrected_overhead_fraction == pytest.approx(0.1)


def test_the_replayed_idle_is_a_floor_of_the_corrected_share():
    b = Breakdown(span_ns=45 * MS, compute_ns=20 * MS, memory_ns=7 * MS, overhead_ns=18 * MS)
    # 9 ms busy a step, unprofiled 9.05 ms: the subtraction leaves 0.56 %; the replay kept 3 ms of idle in the
    # 3 steps' 27 ms of busy time: 3 / 30 = 10 %
    c = bd.overhead_correction(b, profiled=15 * MS, unprofiled=9.05 * MS, steps=3, replayed_idle_ns=3 * MS)
    assert c.corrected_overhead_fraction == pytest.approx(0.1)
    # a replay with less idle than the subtraction changes nothing: 1 ms of 10 ms unprofiled
    c = bd.overhead_correction(b, profiled=15 * MS, unprofiled=10 * MS, steps=3, replayed_idle_ns=0.3 * MS)
    assert c.corrected_overhead_fraction == pytest.approx(0.1)
    # no unprofiled step time, no correction, whatever the replay
    assert bd.overhead_correction(b, 15 * MS, None, 3, 3 * MS).corrected_overhead_fraction is None


def test_the_closing_stalls_of_many_windows_make_one_note():
    from analyzers.analyze import trim_close_stalls
    from analyzers.phases.window_edges import window_ids_text

    tb = TraceBuilder()
    for w, tail in ((0, 50_000), (1, 50_000), (2, 80_000), (4, 50_000)):  # window 3 was not recorded
        t0 = w * 1_000_000
        tb.launch("nvjet_gemm_bf16", t0 + 1_000, t0 + 20_000, 100_000, window=w)  # busy until t0 + 120 us
        tb.window(t0, t0 + 120_000 + tail, first_step=w, last_step=w, window=w)
    t = tb.build()
    t.windows.columns["stall_ns"][:] = 10**9
    trimmed, notes = trim_close_stalls(t)
    assert (trimmed.windows.end_ns - trimmed.windows.start_ns).tolist() == [120_000] * 4
    assert notes == [
        "4 windows (0–2, 4): left out the last 50 µs–80 µs of each, the profiler stopping (nothing ran)"
    ]
    assert window_ids_text([7]) == "7" and window_ids_text([0, 2, 4, 5, 6, 7]) == "0, 2, 4–7"


def test_the_empty_tails_of_many_windows_make_one_note(tmp_path):
    from tui_fakes import write_recording

    from brrrtui.recording.load import load_trace

    notes = analyze(load_trace(write_recording(str(tmp_path / "run.brrr"), windows=3))).notes
    assert [n for n in notes if "no GPU work" in n] == [
        "3 windows (0–2): the last 73 µs (13%) of each hold no GPU work and no CPU operator (the profiler"
        " stopping?); they count as overhead"
    ]


def test_the_profiler_stop_at_a_windows_end_is_left_out():
    from analyzers.analyze import trim_close_stalls
    from brrrtui.contract.model import WindowMode

    def build(stall: int, mode=WindowMode.STEPS):
        tb = TraceBuilder()
        tb.op("aten::mm", 0, 10_000, shapes=[[2048, 2048], [2048, 2048]], dtypes=[BF16, BF16])
        tb.launch("nvjet_gemm_bf16", 1_000, 20_000, 100_000)  # GPU busy until 120 us
        tb.op("Optimizer.step#SGD.step", 150_000, 350_000)  # a scope spanning the stop is not work
        tb.window(0, 500_000, first_step=0, last_step=0, mode=mode)
        t = tb.build()
        t.windows.columns["stall_ns"][:] = stall
        return t

    trimmed, notes = trim_close_stalls(build(stall=300_000))
    assert int(trimmed.windows.end_ns[0] - build(0).windows.start_ns[0]) == 200_000  # cut = min(380, 300) us
    assert notes == ["window 0: left out its last 300 µs, the profiler stopping (nothing ran)"]
    trimmed, _ = trim_close_stalls(build(stall=10**9))
    # a stall longer than the tail: back to the last activity
    assert int(trimmed.windows.end_ns[0] - trimmed.windows.start_ns[0]) == 120_000
    a = analyze(build(stall=10**9))
    assert a.breakdown.span_ns == 120_000 and a.breakdown.compute_ns == 100_000
    foreign, notes = trim_close_stalls(build(stall=10**9, mode=WindowMode.FOREIGN))
    assert notes == [] and int(foreign.windows.end_ns[0] - foreign.windows.start_ns[0]) == 500_000
