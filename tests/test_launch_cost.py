"""What one more kernel launch costs in unprofiled steps (analyzers/idle/launch_timing.py): the fusion estimator's
per-launch saving. Hand-built gaps, exact arithmetic."""

from __future__ import annotations

import numpy as np
from fixtures.synthetic import TraceBuilder

from analyzers.idle.launch_timing import per_launch_ns, same_stream_gaps, unprofiled_launch_ns

US = 1_000


def starved_window() -> tuple[object, np.ndarray]:
    """One stream: 20 kernels of 10 us; 8 back-to-back gaps of 2 us, 11 gaps of 30 us (the profiler's slowed
    CPU starves the GPU between them)."""
    b = TraceBuilder()
    t = 0
    gaps = [2 * US] * 8 + [30 * US] * 11
    for i in range(20):
        b.launch(f"k{i}", cpu_ns=t, gpu_ns=t, dur_ns=10 * US)
        t += 10 * US + (gaps[i] if i < len(gaps) else 0)
    b.window(0, t + 10 * US)
    trace = b.build()
    return trace, np.ones(len(trace.gpu), dtype=bool)


def test_the_window_median_is_the_profiled_gap():
    trace, busy = starved_window()
    assert per_launch_ns(same_stream_gaps(trace, busy)) == 30 * US


def test_unprofiled_launch_cost_scales_the_gap_like_the_idle_but_not_below_back_to_back():
    trace, busy = starved_window()
    gaps = same_stream_gaps(trace, busy)
    assert unprofiled_launch_ns(gaps, None) == 30 * US  # no unprofiled step time: the window's gap
    assert unprofiled_launch_ns(gaps, 0.5) == 15 * US
    # unprofiled steps keep 5 % of the window's idle: 1.5 us, under the 2 us of back-to-back kernels
    assert unprofiled_launch_ns(gaps, 0.05) == 2 * US
    assert unprofiled_launch_ns(gaps, 1.0) == 30 * US
    assert unprofiled_launch_ns(same_stream_gaps(trace, np.zeros(len(busy), dtype=bool)), 0.5) is None
