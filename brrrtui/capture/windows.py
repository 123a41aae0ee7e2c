"""Profiler windows: when to open and close them (turning one into rows: brrrtui.capture.convert).

A window is a short Kineto session. Inside it steps run slower, closing it stalls the training thread
(~10 us per event on the H200 host), and converting its events costs ~5-14 us per event on a background
thread that competes for the GIL. So windows are small and spaced out by a duty-cycle budget:

    steps     |s|s|s|s|s|s|s|s|s|s|s|s|s|s|s|s|s|s|s|s|s|s|s|s|s|s|
    window      [=W1=]xx~~~~                           [=W2=]xx~~~~
                      ^ stall (stop)  ~ conversion
                <------------- cost(W1) / duty ------------->   next window may open

cost(W) = the time the training loop lost from the step a step window opened in until the first step back
at full speed after its conversion: those steps' time minus as many median unprofiled steps, all measured;
and at least stall + conversion time + the extra time the steps took inside the window (a conversion that
ran beside the steps still took a core). The conversion holds the GIL most of its time, so the steps it runs
beside can lose more than its own time.
The spacing alone would let a run pay for one window more than its duty allows (a 45 s run gets W1 at once
and W2 cost/duty later: two windows' cost in 45 s), so a window also waits until the cost of every window so
far, the next one's included (estimated as the last one's), is at most `duty` of the time since the training
loop began by the time it has cost it: a run of any length past 2 cost(W) / duty spends at most `duty` of it
on capture, and a shorter run still gets W1.
Windows are sized to about `target_events` events: fewer steps per window when a step makes many events,
shorter time windows when ops come fast.
Training scripts open and close windows on optimizer steps; scripts with no optimizer get time-based windows
from ticks the timer thread delivers to the main thread (the profiler must start and stop on the thread that
runs the model).

The first step window waits for the steady state. A run's first steps are warm-up (allocator growth, cuBLAS
and cuDNN heuristics; on an H200 GPT-2 small's first profiled steps took 460-475 ms against 44 ms steady), and a
window there both misleads the verdicts and, through its cost, keeps the duty cycle from opening another for
tens of seconds. A time window opened before the first step (set-up: model construction, data loading) is
not charged to the training loop's budget either:

    steps      s0--------|s1|s2-|s3|s4|s5|s6|s7|s8|s9| ...
    windows  [setup]                    [==W1==]               [==W2==]
                                   ^ last 3 durations within ±25 % of their median: steady

Steps that a window or its conversion touched are slower by design: the settling test skips their durations.

A run may end before its steady state comes (the script's step count is unknown here), so the warm-up also
gets a few short windows of its own, spread over it (`EARLY_STEPS`: one step each at steps 10, 15 and 20 while
the durations have not settled), and the first `EARLY_TIME_WINDOWS` time windows before any optimizer step (a
script without one, or a long set-up) follow one another. An early window, and the first window after a
set-up window that the first step closed, wait only for the last window's conversion and then as long as it
cost (at most `min_gap_s`), not for the duty budget: a 20-step run of 25 ms steps lasts half a second, less
than one minimum gap. Neither is charged to the loop's budget, which starts afresh after them: they are few,
and the windows of a long run keep their duty. With no steady window, the analysis merges the run's warm-up
windows (analyzers.analyze.choose_windows)::

    steps      s0|s1|s2|s3|s4|s5|s6|s7|s8|s9|s10|s11|s12|s13|s14|s15|s16| ...   (never settles)
    windows                                  [W1]                [W2]
"""

from __future__ import annotations

import statistics
from enum import IntEnum
from typing import Any

from brrrtui.contract.config import WindowConfig
from brrrtui.contract.schema import WindowMode

NEVER = 1 << 62
# Warm-up windows for a run that may end before its steady state: one step each, at these step counts (steps
# ended when it opens) while the durations have not settled. The first is past the steps in which a run that
# settles at all settles (2 x (settle_steps + 2) by default): those get their first window in the steady state.
EARLY_STEPS = (10, 15, 20)
EARLY_TIME_WINDOWS = 3  # time windows before any optimizer step: the first ones follow one another


class Action(IntEnum):
    NONE = 0
    OPEN = 1
    CLOSE = 2


class Scheduler:
    """Pure decision logic (tested without torch): feed it steps and ticks, it says open / close / nothing,
    and learns each window's cost from `settled()`."""

    def __init__(self, config: WindowConfig, now_ns: int):
        self.cfg = config
        self.started_ns = now_ns
        self.torch_seen_ns: int | None = None
        self.open_since_ns: int | None = None
        self.open_mode = WindowMode.STEPS
        self.steps_in_window = 0
        self.next_open_ns = now_ns
        self.windows = 0
        self.step_times_ns: list[int] = []  # end time of every optimizer step
        self.perturbed: list[tuple[int, int]] = []  # [start, end] spans of windows and their conversion
        self.step_windows = 0
        self.steps_per_window = max(1, config.window_steps)
        self.time_window_s = config.time_window_s
        self.events_per_call: float | None = None  # Kineto events per tagged torch call, from the last window
        self.last_cost_ns: float | None = None
        self.charged_ns = 0.0  # cost of the windows charged to the duty budget since `budget_from_ns`
        self.budget_from_ns = now_ns  # the training loop's first step, once there is one
        self.last_opened_ns = 0
        self.open_index: int | None = None  # steps taken when the last step window opened
        self.floor_cost_ns = 0.0  # the last window's stall + conversion + in-window slowdown
        self.tail_open = False  # steps after a window are still slow (CUPTI teardown, caches): add them
        self.disabled = False
        self.steady_from_step: int | None = None  # step count at which the durations settled (or forced)
        self.setup_window = False  # the open window opened before the first optimizer step
        self.lockstep: Any = None  # a distributed run's window plan (brrrtui.capture.lockstep.Lockstep)
        self.lockstep_steps = 0  # steps of the open planned window
        self.early_window = False  # the open (or last) window is an early one (EARLY_STEPS, EARLY_TIME_WINDOWS)
        self.early_windows = 0  # early windows opened so far

    # -- inputs
    def on_step(self, now_ns: int) -> Action:
        self.step_times_ns.append(now_ns)
        if len(self.step_times_ns) == 1:
            self.budget_from_ns, self.charged_ns = now_ns, 0.0  # set-up windows are not charged to the loop
            if self.next_open_ns != NEVER:
                self.next_open_ns = now_ns
        if self.tail_open and self.open_since_ns is None and self.next_open_ns != NEVER:
            self._charge_tail(now_ns)
        if self.lockstep is not None:
            return self._lockstep_step(now_ns)
        if self.open_since_ns is not None:
            self.steps_in_window += 1
            steps = 1 if self.early_window else self.steps_per_window
            if self.open_mode == WindowMode.TIME or self.steps_in_window >= steps:
                return Action.CLOSE
            if now_ns - self.open_since_ns >= self.cfg.window_max_s * 1e9:
                return Action.CLOSE
            return Action.NONE
        if self.disabled or self._limit_reached():
            return Action.NONE
        early = self.warming_up(now_ns)
        if early and not self.early_step_due():
            return Action.NONE
        if now_ns >= self.next_open_ns:
            self.open_mode = WindowMode.STEPS
            self.early_window = early
            return Action.OPEN
        return Action.NONE

    def early_step_due(self) -> bool:
        """A warm-up window is due at this step: the step count is one of EARLY_STEPS (or past one whose window
        could not open, its predecessor still converting) and fewer early windows than those have opened."""
        n = len(self.step_times_ns)
        due = [s for s in EARLY_STEPS if s <= n]
        return len(due) > self.early_windows and n < self.cfg.warmup_max_steps

    def _lockstep_step(self, now_ns: int) -> Action:
        """A distributed run: windows open and close on the steps rank 0 announced (capture.lockstep); rank 0
        announces one when the single-process rules (steady state, duty) say it is due within `lead_s`."""
        plan, n = self.lockstep, len(self.step_times_ns)
        if self.open_since_ns is not None:
            self.steps_in_window += 1
            done = self.open_mode == WindowMode.TIME or self.steps_in_window >= self.lockstep_steps
            return Action.CLOSE if done else Action.NONE
        if self.disabled:
            return Action.NONE
        full = bool(self.cfg.max_windows) and len(plan.announced) >= self.cfg.max_windows
        if plan.leader and not full and not plan.pending(n) and not self.warming_up(now_ns):
            if now_ns + plan.lead_ns >= self.next_open_ns:
                step_ns = self.unprofiled_step_ns() or (now_ns - self.step_times_ns[-2] if n > 1 else None)
                plan.announce(n, step_ns, self.steps_per_window)
        self.lockstep_steps = plan.window_at(n)
        if self.lockstep_steps:
            self.open_mode, self.early_window = WindowMode.STEPS, False
            return Action.OPEN
        return Action.NONE

    def warming_up(self, now_ns: int) -> bool:
        """True until the step durations settle: the last `settle_steps` (step 0 aside, which has no start)
        within `settle_tolerance` of their median, or the warm-up limits are reached."""
        if self.steady_from_step is not None:
            return False
        t, cfg = self.step_times_ns, self.cfg
        if len(t) >= cfg.warmup_max_steps or now_ns - t[0] >= cfg.warmup_max_s * 1e9:
            self.steady_from_step = len(t)
            return False
        if len(t) < cfg.settle_steps + 2:
            return True
        durations = self._clean_durations(cfg.settle_steps)
        if len(durations) < cfg.settle_steps:
            return True
        median = statistics.median(durations)
        if all(abs(d - median) <= cfg.settle_tolerance * median for d in durations):
            self.steady_from_step = len(t)
            return False
        return True

    def _clean_durations(self, count: int) -> list[int]:
        """The last `count` step durations that no window or conversion touched (fewer if there are not so
        many): a window's steps and the one its closing stall lands in are slower by design, and an early
        window's slow step next to a fast one could pass for settled ones."""
        t, spans = self.step_times_ns, self.perturbed[-20:]
        out: list[int] = []
        for i in range(len(t) - 1, 0, -1):
            if len(out) == count:
                break
            a, b = t[i - 1], t[i]
            if not any(s <= b and a <= e for s, e in spans):
                out.append(b - a)
        return out[::-1]

    def on_timer(self, now_ns: int, calls: int = 0) -> Action:
        action = self.timer_decision(now_ns, calls)
        if action == Action.OPEN:
            self.open_mode = WindowMode.TIME
            self.early_window = not self.step_times_ns and self.early_windows < EARLY_TIME_WINDOWS
        return action

    def timer_decision(self, now_ns: int, calls: int = 0) -> Action:
        """No side effects: the timer thread asks this before interrupting the main thread. `calls`: torch calls
        tagged in the open window so far. A time window also closes once they add up to the event budget: its
        length comes from the last window's event rate, which a first window in the script's set-up can
        underestimate 45-fold (measured on the H200: a 2 s window of 212 k events, stalled 1.8 s)."""
        if self.disabled:
            return Action.NONE
        if self.open_since_ns is not None:
            if self.open_mode == WindowMode.TIME:
                if self.events_per_call and calls * self.events_per_call >= self.cfg.target_events:
                    return Action.CLOSE
                limit = self.time_window_s
            else:
                limit = self.cfg.window_max_s
            return Action.CLOSE if now_ns - self.open_since_ns >= limit * 1e9 else Action.NONE
        if self.torch_seen_ns is None or self._limit_reached():
            return Action.NONE
        last_step = self.step_times_ns[-1] if self.step_times_ns else None
        if last_step is not None and now_ns - last_step < self.cfg.step_stale_s * 1e9:
            return Action.NONE  # steps drive the windows
        if (
            now_ns - self.torch_seen_ns < self.cfg.first_time_window_after_s * 1e9
            or now_ns < self.next_open_ns
        ):
            return Action.NONE
        return Action.OPEN

    # -- outcomes
    def opened(self, now_ns: int) -> None:
        self.open_since_ns = now_ns
        self.steps_in_window = 0
        self.windows += 1
        self.early_windows += self.early_window
        self.step_windows += self.open_mode == WindowMode.STEPS
        self.setup_window = not self.step_times_ns
        steps_mode = self.open_mode == WindowMode.STEPS  # a time window's steps may be far apart (stale)
        self.open_index = len(self.step_times_ns) if steps_mode and self.step_times_ns else None

    def closing(self) -> None:
        """The window is stopped; no new one opens until its conversion has `settled`."""
        self.open_since_ns = None
        self.next_open_ns = NEVER

    def settled(
        self,
        opened_ns: int,
        closed_ns: int,
        settled_ns: int,
        stall_ns: int,
        convert_ns: int,
        events: int,
        steps: int,
        calls: int = 0,
    ) -> float:
        """The window's events are converted and sent: measure its cost, size the next window, and schedule
        it so capture cost stays within the duty budget. Returns the cost in ns. `calls`: torch calls tagged
        in the window."""
        base = self.unprofiled_step_ns()
        wall = closed_ns - opened_ns
        slowdown = 0.25 * wall if base is None or not steps else max(0.0, wall - base * steps)
        self.floor_cost_ns = stall_ns + convert_ns + slowdown  # conversion counted whole: it takes a core
        lost = self._lost_since_open(base) if steps and base is not None else None
        cost = max(self.floor_cost_ns, lost or 0)
        self.perturbed.append((opened_ns, settled_ns))
        self.last_cost_ns = cost
        if events > 0 and calls > 0:
            self.events_per_call = events / calls
        if events > 0:
            if steps > 0:
                per_step = events / steps
                self.steps_per_window = int(
                    max(1, min(self.cfg.window_steps, self.cfg.target_events // per_step))
                )
            elif wall > 0:
                rate = events / (wall / 1e9)
                self.time_window_s = min(self.cfg.window_max_s, max(0.02, self.cfg.target_events / rate))
        self.last_opened_ns, self.last_settled_ns = opened_ns, settled_ns
        if self.early_window or (self.setup_window and self.step_times_ns):
            # an early window, or the training loop began during a set-up window: neither is charged to the
            # loop's budget, which starts afresh; the next window waits as long as this one cost (at most the
            # minimum gap), so a short run still gets its early and first steady windows
            self.budget_from_ns, self.charged_ns = settled_ns, 0.0
            self.next_open_ns = int(settled_ns + min(cost, self.cfg.min_gap_s * 1e9))
            if self.open_mode == WindowMode.TIME and self.early_windows >= EARLY_TIME_WINDOWS:
                self._schedule()  # the last early time window: the next one is the duty's
            return cost
        if self.setup_window:  # a time window before any step: charged to the time before the loop
            self.charged_ns += cost
            self._schedule()
            return cost
        self.charged_ns += cost
        self.tail_open = True
        self._schedule()
        return cost

    def _schedule(self) -> None:
        last = self.last_cost_ns or 0
        gap_ns = max(last / self.cfg.duty, self.cfg.min_gap_s * 1e9)
        # once the next window (estimated to cost as much as the last) has cost it, the run is within the duty
        budget_ns = self.budget_from_ns + (self.charged_ns + last) / self.cfg.duty - last
        self.next_open_ns = int(
            max(self.last_opened_ns + gap_ns, self.last_settled_ns + self.cfg.min_gap_s * 1e9, budget_ns)
        )

    def _charge_tail(self, now_ns: int) -> None:
        """Steps right after a window can stay slow (measured on the H200: CUPTI's teardown lands on the next
        CUDA calls). Until one step is back to normal (within 1.2x the unprofiled median), the window's cost
        is the loop's time lost since it opened; push the next window out accordingly. A window whose opening
        step is not known (a time window): every slow step after its conversion is charged."""
        base = self.unprofiled_step_ns()
        t = self.step_times_ns
        if base is None or len(t) < 2:
            return
        interval, last = t[-1] - t[-2], self.last_cost_ns or 0
        lost = self._lost_since_open(base)
        if lost is not None:
            cost = max(self.floor_cost_ns, lost)
        elif t[-2] < self.last_settled_ns:
            return  # the step the conversion ended in: its part before then is the conversion's
        else:
            cost = last + (interval - base if interval > 1.2 * base else 0.0)
        self.last_cost_ns = cost
        self.charged_ns += cost - last
        if interval > 1.2 * base:
            self.perturbed.append((t[-2], t[-1]))
        else:
            self.tail_open = False
        self._schedule()

    def _lost_since_open(self, base: float) -> float | None:
        """The time the steps since the last window opened took, less as many unprofiled steps."""
        t, i = self.step_times_ns, self.open_index
        if i is None or i > len(t) - 1:
            return None
        return float((t[-1] - t[i - 1]) - base * (len(t) - i))

    def unprofiled_step_ns(self) -> float | None:
        """Median interval of recent steps that no window or conversion touched."""
        t = self.step_times_ns
        spans = self.perturbed[-20:]
        d = []
        for i in range(max(1, len(t) - 200), len(t)):
            a, b = t[i - 1], t[i]
            if not any(s <= b and a <= e for s, e in spans):
                d.append(b - a)
        return statistics.median(d) if d else None

    def _limit_reached(self) -> bool:
        return bool(self.cfg.max_windows) and self.windows >= self.cfg.max_windows
