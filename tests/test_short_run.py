"""A short run's answer: every kernel of an analysed window on a line or counted with why, and notes that say
what the run was too short to show.

Hand-built traces where the arithmetic must be exact; and validation/workloads/short_run.py recorded on an
H200 (20 steps, one line of every regime) without the early windows for short runs (the analysis is what these
files test): `h200_short_run20` (its one window opened on a timer tick partway through step 0 and closed at that
step's end) and `h200_short_run20_noopt` (`--no-optimizer`: one 259 ms time window over about nine
iterations)."""

from __future__ import annotations

import os

import numpy as np
import pytest

from analyzers.analyze import analyze
from analyzers.link.links import link
from analyzers.link.unplaced import (
    BACKWARD_BEFORE_WINDOW,
    BEFORE_WINDOW,
    OUTSIDE_OPS,
    OUTSIDE_USER_CODE,
    unplaced_kernels,
)
from analyzers.results import GAP_CAUSE_CODES, GapCause, Regime
from brrrtui.contract.model import WindowMode
from brrrtui.recording.load import load_trace
from tests.fixtures.synthetic import BF16, TraceBuilder

FIXTURES = os.path.join(os.path.dirname(__file__), "fixtures")
US, MS = 1_000, 1_000_000


def time_window_mid_matmul():
    """A time window opens 0.1 ms after `c = a @ b` launched its 1.4 ms GEMM (correlation 1, before the
    window: only the kernel is recorded), then line 41's pointwise kernel (correlation 2) is launched in it;
    a cuBLAS workspace memset launched with no op around it (correlation 3, 2 us); an op that no user line
    made (a 5 us kernel under `Optimizer.step`, correlation 4); and a backward node (sequence number 5, on the
    autograd thread) whose forward op ran before the window (a 7 us kernel, correlation 5). Step 0 ends at
    10 ms, inside the window."""
    b = TraceBuilder()
    b._corr = 1  # correlation 1 went to the GEMM's launch, before the window
    b.line("train.py", 40, "main")  # the matmul, whose launch the window missed
    pw = b.line("train.py", 41, "main")
    b.gpu_row("nvjet_sm90_tst_320x128_64x3_1x2_h_bz_coopB_NNT", 0, 1_400 * US, correlation=1)
    b.span(pw, 200 * US, 100 * US)
    b.op("aten::mul", 210 * US, 50 * US, shapes=[[1024]], dtypes=[BF16])
    b.launch("vectorized_elementwise_kernel<mul>", 220 * US, 1_400 * US, 20 * US)
    b.launch("Memset (Device)", 400 * US, 1_500 * US, 2 * US, api="cudaMemsetAsync")
    b.op("Optimizer.step#SGD.step", 500 * US, 100 * US)
    b.op("aten::_foreach_add_", 510 * US, 50 * US)
    b.launch("multi_tensor_apply_kernel", 520 * US, 1_600 * US, 5 * US)
    b.op("autograd::engine::evaluate_function: MmBackward0", 700 * US, 100 * US, tid=2, seq=5, fwd_tid=1)
    b.launch("sm90_gemm_backward", 710 * US, 1_700 * US, 7 * US, tid=2)
    b.window(100 * US, 11 * MS, first_step=0, last_step=0, mode=WindowMode.TIME)
    b.step(0, 10 * MS)
    return b.build()


def test_every_kernel_off_a_line_is_counted_with_its_gpu_time_and_why():
    trace = time_window_mid_matmul()
    links = link(trace)
    groups = {g.reason: g for g in unplaced_kernels(trace, links)}
    assert set(groups) == {BEFORE_WINDOW, BACKWARD_BEFORE_WINDOW, OUTSIDE_OPS, OUTSIDE_USER_CODE}
    assert (
        groups[BACKWARD_BEFORE_WINDOW].rows.tolist() == [4]
        and groups[BACKWARD_BEFORE_WINDOW].gpu_ns == 7 * US
    )
    assert groups[BEFORE_WINDOW].rows.tolist() == [0] and groups[BEFORE_WINDOW].gpu_ns == 1_400 * US
    assert groups[OUTSIDE_OPS].rows.tolist() == [2] and groups[OUTSIDE_OPS].gpu_ns == 2 * US
    assert groups[OUTSIDE_USER_CODE].names == ("Optimizer.step#SGD.step",)  # the outermost op, not the inner
    # every row is on a line or in exactly one group
    counted = np.concatenate([g.rows for g in groups.values()])
    on_line = np.flatnonzero(links.kernel_line >= 0)
    assert sorted(counted.tolist() + on_line.tolist()) == list(range(len(trace.gpu)))
    (note,) = [n for n in analyze(trace).notes if "on no line" in n]
    assert note.startswith(
        "4 of 5 GPU rows (1.41 ms of GPU time) are on no line: 1 (1.4 ms) " + BEFORE_WINDOW
    )
    assert "nvjet_sm90_tst_320x128" in note and "1 (2 µs) " + OUTSIDE_OPS in note


def test_a_short_run_says_which_steps_its_figures_come_from():
    """No steady state in 6 steps (durations 30, 10, 30, 10, 30 ms never settle); windows on steps 2 and 4:
    merged, and the note names the steps."""
    b = TraceBuilder()
    ln = b.line("train.py", 40, "main")
    t = 0
    for step in range(6):
        start, t = t, t + (30 if step % 2 == 0 else 10) * MS
        if step in (2, 4):
            b.span(ln, start + MS, MS, window=step)
            b.op("aten::mm", start + MS, MS // 2, window=step)
            b.launch("sm90_gemm", start + MS + 1_000, start + 2 * MS, MS, window=step)
            b.window(start, t, first_step=step, last_step=step, window=step)
        b.step(step, t)
    a = analyze(b.build())
    assert a.windows == (2, 4)
    (note,) = [n for n in a.notes if n.startswith("no steady-state window")]
    assert "no steady state in 6 steps" in note
    assert "from steps 2 and 4 of the warm-up phase, 2 windows merged" in note


def recording(name: str):
    return load_trace(os.path.join(FIXTURES, f"{name}.brrr.gz"))


def line_of(trace, a, number: int):
    found = [s for s in a.lines if s.line.line == number]
    return found[0] if found else None


def test_the_recorded_20_step_run_says_its_window_caught_only_the_end_of_step_0():
    """The one window opened on a timer tick 113 ms before step 0 ended: the matmul and pointwise lines (40-43)
    ran before it. The note says so, and which step the figures come from; every kernel it has is on a line."""
    trace = recording("h200_short_run20")
    a = analyze(trace)
    assert a.windows == (0,) and (a.links.kernel_line >= 0).all()
    assert not any("on no line" in n for n in a.notes)
    assert any("these figures come from step 0 of the warm-up phase" in n for n in a.notes)
    assert any(n.startswith("window 0 opened partway through step 0") for n in a.notes)
    tiny = line_of(trace, a, 45)
    assert tiny is not None and tiny.kernels == 300 and tiny.regime is Regime.OVERHEAD


def test_a_sleep_beside_first_call_module_loading_is_the_sleep_line_s_wait():
    """In step 0 of the recorded 20-step run, the gap that holds `time.sleep(0.02)` (line 47) also holds CUDA
    loading a kernel module for a first call. The sleep is a per-step cost: the gap is the sleep line's WAIT,
    not warm-up charged to no line, so the line is in the result."""
    trace = recording("h200_short_run20")
    a = analyze(trace)
    sleep = line_of(trace, a, 47)
    assert sleep is not None
    wait = (a.gaps.cause == GAP_CAUSE_CODES[GapCause.WAIT]) & (a.gaps.line == sleep.line_id)
    assert int(a.gaps.dur_ns[wait].sum()) >= 20 * MS  # the sleep's 20 ms at least


@pytest.mark.parametrize("name", ["h200_short_run20_noopt"])
def test_a_recorded_window_over_whole_iterations_shows_every_regime_on_its_line(name):
    """Guard: a window over whole iterations shows each line of the script with its regime or cause, and every
    kernel on a line."""
    trace = recording(name)
    a = analyze(trace)
    assert (a.links.kernel_line >= 0).all() and not any("on no line" in n for n in a.notes)
    matmul, tiny, sync, sleep = (line_of(trace, a, n) for n in (40, 45, 46, 47))
    assert matmul is not None and matmul.regime is Regime.COMPUTE
    assert all(line_of(trace, a, n).regime is Regime.MEMORY for n in (41, 42, 43))
    assert tiny is not None and tiny.regime is Regime.OVERHEAD and tiny.kernels % 300 == 0
    assert sync is not None and sync.kernels > 0  # the .item() copies
    gaps = a.gaps
    wait = (gaps.cause == GAP_CAUSE_CODES[GapCause.WAIT]) & (gaps.line == sleep.line_id)
    assert sleep is not None and wait.any()


def test_a_recorded_window_opened_after_the_forward_pass_explains_its_backward_kernels():
    """GPT-2 small on the H200: window 0 opened on a timer tick during step 0, after its forward pass. The
    backward kernels whose forward op is not in the window are on no line; the note says why, and nothing else
    is off a line."""
    trace = recording("h200_gpt_small")
    links = link(trace)
    assert trace.windows.mode.tolist()[0] == WindowMode.TIME and trace.windows.first_step.tolist()[0] == 0
    groups = unplaced_kernels(trace, links)
    assert [g.reason for g in groups] == [BACKWARD_BEFORE_WINDOW]
    assert sorted(groups[0].rows.tolist()) == np.flatnonzero(links.kernel_line < 0).tolist()
    assert all(name.startswith("autograd::engine::evaluate_function") for name in groups[0].names)
    assert any(BACKWARD_BEFORE_WINDOW in n for n in analyze(trace).notes)
