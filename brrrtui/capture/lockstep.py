"""Windows on the same steps on every rank of a distributed run, with nothing added to the user's step.

Each rank's Scheduler would pick its own steps (its own steady state, its own measured cost), so the lanes of
one window would cover different steps on different ranks. Instead rank 0 (the leader) keeps the
single-process rules and, when they say a window is due, announces it as a step number `lead_s` ahead
(`steps now + lead_s / median step`); every rank, rank 0 too, opens a window after exactly that many steps
and closes it after the announced number of steps. The announcements are a small file beside the recorder's
socket, rewritten whole by rank 0 and re-read by the other ranks' timer threads (a `stat` every 0.1 s, off the
training thread). So the schedule is a pure function of the step number once read, and a rank that reads it
late misses that window rather than opening a misaligned one. When the ranks span several hosts, rank 0's
timer thread also puts the plan in the job's TCPStore (the one torchrun's agents already share), and every
other rank's timer thread reads it from there (brrrtui.capture.plan_store).

    rank 0   steps ... 40 ─ steady, due ─▶ plan += (40 + margin, K) ... opens at 40 + margin
    rank 1   timer: stat(plan) changed ─▶ read ─────────────────────▶ opens at 40 + margin
"""

from __future__ import annotations

import math
from typing import Any

from brrrtui.contract.ranks import Window, dump_plan, parse_plan, plan_version, read_plan, write_plan

MIN_MARGIN_STEPS = 2


class Lockstep:
    def __init__(self, folder: str, leader: bool, lead_s: float = 1.0):
        self.folder = folder
        self.leader = leader
        self.lead_ns = int(lead_s * 1e9)
        self.announced: list[Window] = []  # rank 0: what it announced, in order
        self.windows: dict[int, int] = {}  # opens after this many steps -> steps it spans
        self.missed: list[int] = []  # followers: announced windows read too late
        self._version: tuple[int, int, int] | None = None
        self.write_error: str | None = None
        self.remote: Any = (
            None  # ranks on several hosts: the plan through the job's store (capture.plan_store)
        )
        self._pushed = 0
        self._remote_text: str | None = None

    def window_at(self, steps_done: int) -> int:
        """Steps of the window that opens once `steps_done` steps have ended; 0 when none does."""
        return self.windows.get(steps_done, 0)

    def pending(self, steps_done: int) -> bool:
        """A window is announced and has not opened yet."""
        return any(start >= steps_done for start in self.windows)

    def margin(self, step_ns: float | None) -> int:
        """Steps ahead an announcement must be so that every rank reads it first."""
        if not step_ns or step_ns <= 0:
            return max(MIN_MARGIN_STEPS, 10)
        return max(MIN_MARGIN_STEPS, math.ceil(self.lead_ns / step_ns))

    def announce(self, steps_done: int, step_ns: float | None, steps: int) -> int:
        """Rank 0: a window of `steps` steps, opening `margin` steps from now. Returns its first step."""
        start = steps_done + self.margin(step_ns)
        self.announced.append((start, max(1, steps)))
        self.windows[start] = max(1, steps)
        try:
            write_plan(self.folder, self.announced)
        except OSError as e:  # the recorder's folder is gone: rank 0 still opens its own windows
            self.write_error = str(e)
        return start

    def sync(self, steps_done: int) -> None:
        """The timer thread, every 0.1 s: rank 0 pushes its plan to the other hosts (when there are any); the
        other ranks take a newer plan from the file, or from the job's store when rank 0 is on another host."""
        if self.remote is None:
            if not self.leader:
                self.poll(steps_done)
            return
        if self.leader:
            n = len(self.announced)
            if n != self._pushed:
                self.remote.publish(dump_plan(self.announced[:n]))
                self._pushed = n
            return
        text = self.remote.fetch()
        if text is not None and text != self._remote_text:
            plan = parse_plan(text)
            if plan is not None:
                self._remote_text = text
                self._take(plan, steps_done)

    def poll(self, steps_done: int) -> None:
        """Other ranks: take a new plan when rank 0 has replaced the file."""
        version = plan_version(self.folder)
        if version is None or version == self._version:
            return
        plan = read_plan(self.folder)
        if plan is None:
            return
        self._version = version
        self._take(plan, steps_done)

    def _take(self, plan: list[Window], steps_done: int) -> None:
        new = {start: steps for start, steps in plan if start not in self.windows}
        self.missed.extend(start for start in new if start < steps_done)
        self.windows = dict(plan)  # one assignment: the training thread sees the old plan or the new one
