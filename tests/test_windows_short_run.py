"""The window scheduler on runs too short for a steady state (pure: made-up clocks, no torch).

A driver plays the agent's part: the training loop's steps, the timer's ticks between them, and each window's
conversion settling at once with a fixed stall and conversion time."""

from __future__ import annotations

from dataclasses import dataclass, field

from brrrtui.capture.windows import EARLY_STEPS, EARLY_TIME_WINDOWS, Action, Scheduler
from brrrtui.contract.config import WindowConfig
from brrrtui.contract.schema import WindowMode

MS = 1_000_000
S = 1_000_000_000
TICK = 50 * MS


@dataclass
class Window:
    opened_ns: int
    first_step: int  # steps ended when it opened: it covers the steps after that
    mode: WindowMode
    closed_ns: int = 0
    steps: int = 0


@dataclass
class Run:
    """Drives a Scheduler through a run: torch imported at 0, `setup_ns` before the loop, then one step per
    entry of `step_ns` (its duration; steps inside a window take `slowdown` times as long)."""

    sched: Scheduler
    windows: list[Window] = field(default_factory=list)
    now: int = 0
    stall_ns: int = 5 * MS
    convert_ns: int = 10 * MS
    events: int = 1_000  # per window

    def act(self, action: Action) -> None:
        s = self.sched
        if action == Action.OPEN:
            s.opened(self.now)
            self.windows.append(Window(self.now, len(s.step_times_ns), s.open_mode))
        elif action == Action.CLOSE:
            w = self.windows[-1]
            w.closed_ns, w.steps = self.now, s.steps_in_window if s.open_mode == WindowMode.STEPS else 0
            s.closing()
            self.now += self.stall_ns + self.convert_ns
            s.settled(
                w.opened_ns, w.closed_ns, self.now, self.stall_ns, self.convert_ns, self.events, w.steps
            )

    def wait(self, until_ns: int) -> None:
        """Time passes to `until_ns`, the timer ticking every TICK."""
        while self.now + TICK <= until_ns:
            self.now += TICK
            self.act(self.sched.on_timer(self.now))
        self.now = max(self.now, until_ns)

    def steps(self, durations_ns: list[int]) -> None:
        for d in durations_ns:
            self.wait(self.now + d)
            self.act(self.sched.on_step(self.now))


def test_a_20_step_run_after_a_long_first_step_gets_a_step_window_past_the_first_step():
    """validation/workloads/short_run.py's shape: the first step (CUDA and cuBLAS set-up) ends 1.1 s after
    torch came in, so a set-up time window opens at 1 s and the first step closes it; then 19 steps of 25 ms.
    The loop lasts under half a second, shorter than the minimum gap between windows: the window after the
    set-up one waits only as long as the set-up window cost, and the settled steps get one."""
    sched = Scheduler(WindowConfig(), now_ns=0)
    sched.torch_seen_ns = 0
    run = Run(sched)
    run.steps([1_100 * MS] + [25 * MS] * 19)
    assert [w.mode for w in run.windows][0] == WindowMode.TIME and run.windows[0].first_step == 0
    step_windows = [w for w in run.windows if w.mode == WindowMode.STEPS]
    assert step_windows, "only the set-up window: the loop's steps were never captured"
    # opened once the durations settled (steps 2-4 after step 1: 5 steps ended), closed on its steps
    assert step_windows[0].first_step == 5 and step_windows[0].steps >= 1


def test_a_run_that_never_settles_gets_one_step_warm_up_windows_spread_over_its_steps():
    """Step times that never settle (alternating 20 and 60 ms) in a 22-step run ends before `warmup_max_steps`
    (30), when a steady window would be forced: early windows of one step open at EARLY_STEPS."""
    sched = Scheduler(WindowConfig(), now_ns=0)
    run = Run(sched)
    run.steps([(20 if i % 2 else 60) * MS for i in range(22)])
    assert [(w.first_step, w.steps) for w in run.windows] == [(s, 1) for s in EARLY_STEPS]
    assert sched.steady_from_step is None  # still warming up: every window was an early one


def test_an_early_window_is_not_charged_to_the_loop_so_the_steady_state_still_gets_its_window():
    """Warm-up windows at steps 10 and 15, then the steps settle: the first steady window opens at once, not
    their cost / duty later."""
    sched = Scheduler(WindowConfig(duty=0.02, min_gap_s=1.0), now_ns=0)
    run = Run(sched, stall_ns=20 * MS, convert_ns=30 * MS)
    run.steps([(20 if i % 2 else 60) * MS for i in range(17)] + [40 * MS] * 6)
    firsts = [w.first_step for w in run.windows]
    assert firsts[:2] == [10, 15]
    assert sched.steady_from_step is not None and firsts[2:] == [sched.steady_from_step]
    # the steady window is charged to a budget that starts after the early ones, not before them
    assert sched.budget_from_ns >= run.windows[1].closed_ns


def test_a_script_without_optimizer_steps_gets_its_first_time_windows_one_after_another():
    """`--no-optimizer`: no steps, time windows only. In a 1.5 s run, spacing by cost / duty would leave one;
    the first EARLY_TIME_WINDOWS follow one another, each after its own cost, then the duty spaces them."""
    cfg = WindowConfig(first_time_window_after_s=0.5, time_window_s=0.2, duty=0.02, min_gap_s=1.0)
    sched = Scheduler(cfg, now_ns=0)
    sched.torch_seen_ns = 0
    run = Run(sched, events=25_000)  # a window's worth: the next ones stay 0.2 s long
    run.wait(2 * S)
    opened = [w.opened_ns for w in run.windows]
    assert len(opened) == EARLY_TIME_WINDOWS
    assert opened[-1] - opened[0] < 1 * S
    run.wait(10 * S)
    # then the duty's spacing: stall 5 + conversion 10 + a quarter of the 200 ms window = 65 ms, over 2 %
    assert len(run.windows) > EARLY_TIME_WINDOWS
    assert run.windows[EARLY_TIME_WINDOWS].opened_ns - opened[-1] >= int(65 * MS / 0.02)


def test_a_run_that_settles_gets_no_warm_up_window():
    """The steady state comes before the first early step: the first window is a steady one, as before."""
    sched = Scheduler(WindowConfig(), now_ns=0)
    run = Run(sched)
    run.steps([1_528 * MS, 28 * MS, 40 * MS] + [58 * MS] * 20)
    assert run.windows[0].first_step == 6 and sched.early_windows == 0
