"""The window scheduler's decisions, on made-up clocks (no torch, no profiler)."""

from brrrtui.capture.windows import NEVER, Action, Scheduler
from brrrtui.contract.config import WindowConfig

MS = 1_000_000
S = 1_000_000_000


def run_steps(sched: Scheduler, start_ns: int, n: int, step_ns: int) -> list[Action]:
    actions = []
    t = start_ns
    for _ in range(n):
        t += step_ns
        action = sched.on_step(t)
        actions.append(action)
        if action == Action.OPEN:
            sched.opened(t)
        elif action == Action.CLOSE:
            sched.closing()
            sched.settled(
                sched.step_times_ns[-1 - sched.steps_in_window],
                t,
                t,
                stall_ns=0,
                convert_ns=0,
                events=100,
                steps=sched.steps_in_window,
            )
    return actions


def test_the_first_window_waits_for_settled_steps_and_closes_after_window_steps():
    sched = Scheduler(WindowConfig(window_steps=2), now_ns=0)
    actions = run_steps(sched, 0, 7, 50 * MS)
    # step 0 has no duration; steps 2-4 are the first three settled durations after step 1
    assert actions[:5] == [Action.NONE] * 4 + [Action.OPEN] and actions[6] == Action.CLOSE
    assert sched.steady_from_step == 5


def test_warm_up_steps_keep_the_first_window_closed():
    """Hugging Face GPT-2 on the H200, plain: 1528, 27.6, 39.7, then 58 ms steps."""
    sched = Scheduler(WindowConfig(), now_ns=0)
    t, actions = 0, []
    for ms in (1528, 27.6, 39.7, 58.1, 58.3, 57.9, 58.2):
        t += int(ms * MS)
        actions.append(sched.on_step(t))
    assert actions[:6] == [Action.NONE] * 5 + [Action.OPEN]  # steady once 58.1, 58.3, 57.9 are in


def test_a_run_that_never_settles_still_gets_a_window():
    sched = Scheduler(WindowConfig(warmup_max_steps=10, warmup_max_s=100), now_ns=0)
    t, actions = 0, []
    for i in range(10):
        t += (20 if i % 2 else 90) * MS
        actions.append(sched.on_step(t))
    assert actions == [Action.NONE] * 9 + [Action.OPEN]


def test_a_set_up_window_is_not_charged_to_the_training_loop():
    cfg = WindowConfig(duty=0.02, min_gap_s=1.0)
    sched = Scheduler(cfg, now_ns=0)
    sched.torch_seen_ns = 0
    assert sched.on_timer(1 * S) == Action.OPEN  # model construction, before any step
    sched.opened(1 * S)
    assert sched.on_step(3 * S) == Action.CLOSE  # the first optimizer step ends the time window
    sched.closing()
    sched.settled(1 * S, 3 * S, 4 * S, stall_ns=800 * MS, convert_ns=500 * MS, events=50_000, steps=1)
    assert sched.next_open_ns == 5 * S  # settled + min gap, not 1.3 s / 2 % = 65 s later
    assert not sched.tail_open


def test_cost_over_duty_spaces_the_windows():
    cfg = WindowConfig(duty=0.05, window_steps=1, min_gap_s=0)
    sched = Scheduler(cfg, now_ns=0)
    for i in range(1, 11):  # ten unprofiled 50 ms steps give the baseline
        sched.step_times_ns.append(i * 50 * MS)
    assert sched.on_step(11 * 50 * MS) == Action.OPEN
    sched.opened(11 * 50 * MS)
    assert sched.on_step(12 * 50 * MS + 30 * MS) == Action.CLOSE  # the step took 80 ms instead of 50
    sched.closing()
    assert sched.next_open_ns == NEVER  # nothing opens while the window is being converted
    cost = sched.settled(
        550 * MS, 630 * MS, 700 * MS, stall_ns=100 * MS, convert_ns=70 * MS, events=1000, steps=1
    )
    assert cost == 100 * MS + 70 * MS + 30 * MS  # stall + conversion + the step's extra 30 ms
    # cost / duty after it opened would be 4.55 s; but the loop began at 0, so that the run's cost stays
    # within 5 % once the next window (estimated: the same 200 ms) has cost it: 2 x 200 ms / 5 % - 200 ms
    assert sched.next_open_ns == int(2 * cost / 0.05 - cost) == 7_800 * MS
    t = 700 * MS
    actions = []
    while t < 7_900 * MS:  # steady 50 ms steps after the window
        t += 50 * MS
        actions.append((t, sched.on_step(t)))
    opened = [t for t, a in actions if a == Action.OPEN]
    assert opened[0] == 7_800 * MS


def test_the_runs_capture_cost_stays_within_the_duty_at_every_window():
    """GPT-2 small on the H200: 45 ms steps, a window of 2 steps costs ~0.8 s. At a 2 % duty, spacing the
    windows by cost / duty alone gave a 1000-step run (45 s) two windows: 3.5 % of its time."""
    cfg = WindowConfig(duty=0.02, window_steps=2, min_gap_s=1.0)
    sched = Scheduler(cfg, now_ns=0)
    step_ns, stall_ns = 45 * MS, 700 * MS
    t, opened = 0, []
    for _ in range(5000):  # 225 s
        t += step_ns
        action = sched.on_step(t)
        if action == Action.OPEN:
            opened.append(t)
            sched.opened(t)
        elif action == Action.CLOSE:
            sched.closing()
            first = sched.step_times_ns[-1 - sched.steps_in_window]
            t += stall_ns
            sched.settled(first, t - stall_ns, t, stall_ns, convert_ns=0, events=10_000, steps=2)
            loop_s = (t - sched.step_times_ns[0]) / S
            assert len(opened) == 1 or sched.charged_ns / 1e9 <= 0.02 * loop_s + 1e-9
    cost_s = sched.charged_ns / 1e9  # 0.7 s a window plus the 45 ms its second step took too long
    assert opened[0] == 5 * step_ns  # the first as soon as the steps settle: a short run is never empty
    assert [o for o in opened if o < 45 * S] == opened[:1]  # a 1000-step run: one window, ~1.7 %
    assert len(opened) == int(0.02 * (t / S) / (cost_s / len(opened)))  # then as many as 2 % affords


def test_unprofiled_step_time_ignores_steps_touched_by_a_window_or_its_conversion():
    sched = Scheduler(WindowConfig(), now_ns=0)
    sched.step_times_ns = [0, 50, 100, 300, 500, 550, 600]  # two 200-unit steps inside a window
    sched.perturbed = [(120, 480)]
    assert sched.unprofiled_step_ns() == 50


def test_windows_shrink_to_the_event_budget():
    sched = Scheduler(WindowConfig(window_steps=3, target_events=25_000), now_ns=0)
    sched.settled(0, 10, 10, 0, 0, events=60_000, steps=3)  # 20 k events per step
    assert sched.steps_per_window == 1
    sched.settled(0, 200 * MS, 200 * MS, 0, 0, events=100_000, steps=0)  # time window: 500 k events/s
    assert abs(sched.time_window_s - 0.05) < 1e-9


def test_time_windows_only_without_recent_steps():
    cfg = WindowConfig(first_time_window_after_s=1.0, step_stale_s=5.0)
    sched = Scheduler(cfg, now_ns=0)
    assert sched.timer_decision(2 * S) == Action.NONE  # torch not imported yet
    sched.torch_seen_ns = 0
    assert sched.timer_decision(S // 2) == Action.NONE  # too soon after the import
    assert sched.on_timer(2 * S) == Action.OPEN
    sched.opened(2 * S)
    assert sched.timer_decision(2 * S + 100 * MS) == Action.NONE
    assert sched.timer_decision(2 * S + 200 * MS) == Action.CLOSE  # the first time window lasts 0.2 s
    sched.closing()
    sched.settled(2 * S, 2_200 * MS, 2_200 * MS, 0, 0, events=10, steps=0)
    sched.step_times_ns.append(3 * S)
    assert sched.timer_decision(4 * S) == Action.NONE  # a step 1 s ago: steps drive the windows


def test_a_time_window_closes_once_its_torch_calls_add_up_to_the_event_budget():
    """The H200 case: a first window in the set-up saw 1 k events in 0.47 s, so the next was sized to the 2 s
    cap and caught 212 k events; counting torch calls closes it near the budget instead."""
    sched = Scheduler(WindowConfig(target_events=25_000, window_max_s=2.0, duty=1.0, min_gap_s=0.0), now_ns=0)
    sched.torch_seen_ns = 0
    assert sched.on_timer(2 * S) == Action.OPEN
    sched.opened(2 * S)
    sched.closing()
    sched.settled(2 * S, 2_470 * MS, 2_470 * MS, 0, 0, events=1_064, steps=0, calls=133)  # 8 events a call
    assert sched.time_window_s == 2.0  # by the event rate alone: the cap
    assert sched.on_timer(3 * S) == Action.OPEN
    sched.opened(3 * S)
    assert sched.timer_decision(3 * S + 100 * MS, calls=3_000) == Action.NONE
    # 25 k events' worth, long before 2 s
    assert sched.on_timer(3 * S + 200 * MS, calls=3_125) == Action.CLOSE
    assert sched.timer_decision(3 * S + 200 * MS, calls=0) == Action.NONE  # no calls counted: time decides


def test_step_windows_are_not_closed_by_torch_calls():
    sched = Scheduler(WindowConfig(target_events=100), now_ns=0)
    sched.steady_from_step = 0
    sched.step_times_ns = [0]
    sched.settled(0, 10, 10, 0, 0, events=1_000, steps=1, calls=10)
    assert sched.on_step(2 * S) == Action.OPEN
    sched.opened(2 * S)
    assert sched.timer_decision(2 * S + 1, calls=1_000_000) == Action.NONE


def test_max_windows_and_disabled():
    sched = Scheduler(WindowConfig(max_windows=1), now_ns=0)
    sched.steady_from_step = 0
    assert sched.on_step(1) == Action.OPEN
    sched.opened(1)
    sched.closing()
    sched.settled(1, 2, 2, 0, 0, 10, 1)
    assert sched.on_step(10 * S) == Action.NONE
    off = Scheduler(WindowConfig(), now_ns=0)
    off.disabled = True
    assert off.on_step(1) == Action.NONE


def test_slow_steps_after_a_window_are_charged_to_it():
    cfg = WindowConfig(duty=0.05, window_steps=1, min_gap_s=0)
    sched = Scheduler(cfg, now_ns=0)
    sched.step_times_ns = [i * 50 * MS for i in range(11)]  # 50 ms steps
    sched.steady_from_step = 11  # past the warm-up
    sched.settled(400 * MS, 450 * MS, 500 * MS, stall_ns=10 * MS, convert_ns=0, events=10, steps=1)
    assert sched.next_open_ns == 400 * MS + int(10 * MS / 0.05)  # = 2 x 10 ms / 5 % from the loop's start
    assert sched.on_step(650 * MS) == Action.NONE  # 150 ms: 100 ms over the median, charged
    assert sched.last_cost_ns == 110 * MS
    assert sched.next_open_ns == int((110 + 110) * MS / 0.05 - 110 * MS)  # its cost and the next one's
    sched.on_step(700 * MS)  # back to 50 ms: the tail is over
    assert not sched.tail_open
    sched.on_step(900 * MS)  # a later slow step is not the window's doing
    assert sched.last_cost_ns == 110 * MS


def test_a_window_costs_the_time_the_loop_lost_until_its_steps_are_back_to_full_speed():
    """The conversion holds the GIL most of its time: the steps beside it can lose more than its own time."""
    cfg = WindowConfig(duty=0.05, window_steps=1, min_gap_s=0)
    sched = Scheduler(cfg, now_ns=0)
    sched.step_times_ns = [i * 50 * MS for i in range(1, 11)]  # 50 ms steps
    assert sched.on_step(550 * MS) == Action.OPEN
    sched.opened(550 * MS)
    assert sched.on_step(650 * MS) == Action.CLOSE  # the window's step: 100 ms
    sched.closing()
    for t in (850, 1000, 1150):  # the close stall (100 ms), then steps at 150 ms beside the conversion
        assert sched.on_step(t * MS) == Action.NONE
    cost = sched.settled(
        550 * MS, 650 * MS, 1160 * MS, stall_ns=150 * MS, convert_ns=100 * MS, events=10, steps=1
    )
    # stall + conversion + the window step's extra 50 ms = 300 ms; the loop lost 600 - 4 x 50 = 400 ms
    assert cost == 400 * MS
    sched.on_step(1250 * MS)  # 100 ms: still slow, the step the conversion ended in
    assert sched.last_cost_ns == 450 * MS
    sched.on_step(1300 * MS)  # back to 50 ms: the tail is over
    assert not sched.tail_open and sched.last_cost_ns == 450 * MS == sched.charged_ns
    assert sched.next_open_ns == int(2 * 450 * MS / 0.05 - 450 * MS)  # the run's budget, the next one's too


def test_a_time_window_is_not_charged_the_pause_before_the_steps_resume():
    """A time window opens while the steps have paused (an evaluation loop): the time until they resume is
    not the window's cost; only a slow step after its conversion is."""
    cfg = WindowConfig(duty=0.05, window_steps=1, min_gap_s=0, step_stale_s=1.0)
    sched = Scheduler(cfg, now_ns=0)
    sched.step_times_ns = [i * 50 * MS for i in range(11)]  # 50 ms steps, then a pause
    sched.steady_from_step, sched.torch_seen_ns = 11, 0
    assert sched.on_timer(3 * S) == Action.OPEN
    sched.opened(3 * S)
    assert sched.open_index is None
    sched.closing()
    sched.settled(
        3 * S, 3 * S + 200 * MS, 3 * S + 300 * MS, stall_ns=50 * MS, convert_ns=50 * MS, events=10, steps=0
    )
    sched.on_step(20 * S)  # the steps resume 17 s later
    assert sched.last_cost_ns == 150 * MS  # stall + conversion + a quarter of its 200 ms (no steps in it)
