"""Windows on the same steps on every rank (brrrtui.capture.lockstep): rank 0's scheduler announces, the
others follow the plan file, on made-up clocks (no torch, no processes)."""

from brrrtui.capture.lockstep import Lockstep
from brrrtui.capture.windows import Action, Scheduler
from brrrtui.contract.config import WindowConfig
from brrrtui.contract.ranks import read_plan

MS = 1_000_000


def rank(folder, leader: bool, **cfg) -> Scheduler:
    sched = Scheduler(WindowConfig(**cfg), now_ns=0)
    sched.lockstep = Lockstep(str(folder), leader=leader, lead_s=0.1)
    return sched


def step(sched: Scheduler, t: int, cost_ns: int = 5 * MS) -> Action:
    """One step ending at t, the window actions applied as the agent applies them."""
    action = sched.on_step(t)
    if action == Action.OPEN:
        sched.opened(t)
    elif action == Action.CLOSE:
        opened = sched.open_since_ns
        steps = sched.steps_in_window
        sched.closing()
        sched.settled(opened, t, t, stall_ns=cost_ns, convert_ns=0, events=100, steps=steps)
    return action


def windows_of(actions: list[Action]) -> list[tuple[int, int]]:
    """(first step, last step) of each window, from the action after each step (OPEN after step i: the
    window's first step is i + 1)."""
    out, first = [], None
    for i, a in enumerate(actions):
        if a == Action.OPEN:
            first = i + 1
        elif a == Action.CLOSE and first is not None:
            out.append((first, i))
            first = None
    return out


def test_every_rank_opens_and_closes_on_the_steps_rank_0_announced(tmp_path):
    leader = rank(tmp_path, True, duty=0.1, min_gap_s=0, window_steps=2)
    # rank 1's own steps never settle (alternating 10 / 40 ms) and its windows cost 10x more: alone, its
    # scheduler would open elsewhere; following the plan, it opens exactly where rank 0 does
    follower = rank(tmp_path, False, duty=0.1, min_gap_s=0, window_steps=5)
    acts0, acts1 = [], []
    t0 = t1 = 0
    for i in range(300):
        t0 += 10 * MS
        t1 += (10 if i % 2 else 40) * MS
        acts0.append(step(leader, t0))
        follower.lockstep.sync(len(follower.step_times_ns))  # the timer thread, between two steps
        acts1.append(step(follower, t1, cost_ns=50 * MS))
    w0, w1 = windows_of(acts0), windows_of(acts1)
    assert len(w0) >= 3
    assert w1 == w0
    assert all(last - first + 1 == 2 for first, last in w0)  # rank 0's window size, on rank 1 too
    assert read_plan(str(tmp_path)) == leader.lockstep.announced
    # announced lead_s (0.1 s = 10 steps of 10 ms) ahead: the first window opens 10 steps after steady
    assert w0[0][0] == leader.steady_from_step + 10


def test_a_plan_read_late_costs_a_window_never_an_unaligned_one(tmp_path):
    leader = rank(tmp_path, True, duty=0.2, min_gap_s=0)
    follower = rank(tmp_path, False, duty=0.2, min_gap_s=0)
    acts0, acts1, t = [], [], 0
    for i in range(400):
        t += 10 * MS
        acts0.append(step(leader, t))
        if i > 0 and i % 97 == 0:  # a starved timer thread: reads the plan rarely
            follower.lockstep.sync(len(follower.step_times_ns))
        acts1.append(step(follower, t))
    w0, w1 = windows_of(acts0), windows_of(acts1)
    assert set(w1) < set(w0)  # fewer windows, each on rank 0's steps
    assert follower.lockstep.missed  # and it knows which it missed
    missed = set(follower.lockstep.missed)
    assert missed <= {first for first, _ in w0} and not missed & {first for first, _ in w1}


def test_rank_0_announces_only_once_its_steps_settle_and_within_max_windows(tmp_path):
    leader = rank(tmp_path, True, duty=1.0, min_gap_s=0, max_windows=2)
    t, acts = 0, []
    for ms in [900, 300, 100, 50] + [20] * 200:
        t += ms * MS
        acts.append(step(leader, t))
    assert leader.lockstep.announced[0][0] > leader.steady_from_step
    assert len(leader.lockstep.announced) == 2 and len(windows_of(acts)) == 2


def test_without_a_plan_a_follower_opens_no_step_window(tmp_path):
    follower = rank(tmp_path, False, duty=1.0, min_gap_s=0)
    t = 0
    for _ in range(100):
        t += 10 * MS
        follower.lockstep.sync(len(follower.step_times_ns))
        assert step(follower, t) == Action.NONE
