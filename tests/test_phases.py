"""Phase detection on step times: hand-built series where the answer is exact, and the step times of real H200
runs (GPT-2 small eager and Hugging Face GPT-2, plain and recorded, validation/workloads)."""

import numpy as np

from analyzers.phases.run_phases import Phase, detect_phases, perturbed_steps, window_phases
from brrrtui.contract.schema import NONE

MS = 1_000_000


def ends_from(durations_ms, start_ms=0.0):
    return (start_ms + np.cumsum(durations_ms) * 1.0) * MS


def test_a_settled_run_is_steady_from_its_second_step():
    ends = ends_from([1600] + [44] * 50)
    p = detect_phases(ends)
    assert p.reached and p.steady_from_step == 1 and p.steady_step_ns == 44 * MS
    assert p.first_step_end_ns == 1600 * MS and p.steady_from_ns == 1600 * MS


def test_steps_that_still_settle_are_warm_up():
    # Hugging Face GPT-2 on the H200, plain: the CPU runs ahead of the GPU for two steps, then 58 ms a step
    ends = ends_from([1527.8, 27.6, 39.7, 58.1, 58.3, 57.9, 58.2, 59.0, 57.3, 58.1, 58.2, 74.5] + [58.0] * 40)
    p = detect_phases(ends)
    assert p.steady_from_step == 3
    assert [p.phase_of_step(s) for s in (0, 2, 3, 40)] == [
        Phase.WARMUP,
        Phase.WARMUP,
        Phase.STEADY,
        Phase.STEADY,
    ]


def test_steps_inside_a_window_do_not_hold_back_the_steady_state():
    # GPT-2 small under brrrtui on the H200: steps 1-2 profiled (475 ms), step 3 pays the window's close
    durations = [460.3, 59.6, 475.2, 69.7, 44.0, 43.9, 43.9, 44.3] + [44.0] * 40
    ends = ends_from(durations)
    window = (ends[0] + 1, ends[2] + 1)  # opened after step 0, closed after step 2
    hit = perturbed_steps(ends, np.array([window[0]]), np.array([window[1]]))
    assert hit[1:4].all() and not hit[0] and not hit[4:].any()
    p = detect_phases(ends, hit)
    assert p.steady_from_step == 4 and abs(p.steady_step_ns - 44 * MS) < 0.2 * MS
    assert window_phases(p, np.array([1, 20, NONE]), np.array([window[0], ends[19], ends[0] - 5])) == [
        Phase.WARMUP,
        Phase.STEADY,
        Phase.SETUP,
    ]


def test_a_run_that_never_settles_says_so():
    p = detect_phases(ends_from([100, 10, 200, 15, 300, 12, 250, 20, 220, 9]))
    assert not p.reached and p.steady_from_step is None and p.phase_of_step(9) is Phase.WARMUP


def test_short_runs_and_runs_without_steps():
    assert detect_phases(np.array([], dtype=np.int64)).phase_of_step(0) is Phase.UNKNOWN
    short = detect_phases(ends_from([500, 40]))
    assert not short.reached and short.steps == 2
    assert window_phases(detect_phases(np.array([])), np.array([NONE]), np.array([5])) == [Phase.UNKNOWN]
