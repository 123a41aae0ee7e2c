"""How long the optimizer's step() and zero_grad() take in every step, profiled or not.

Inside a profiler window both take far longer than the work they do (foreach ops over every parameter, a
record_function scope, the profiler's own bookkeeping): on GPT-2 eager on an H200, AdamW.step() 14 ms and
zero_grad() 6 ms of a 45 ms step, while the GPU waits. The unprofiled replay (analyzers/idle/unprofiled_replay.py)
replays the CPU time inside each at the ratio of its unprofiled to its profiled duration, measured here,
instead of the one factor it fits for the rest of the step.

step() is timed by torch's optimizer step hooks; zero_grad() by a wrapper on the instance of the optimizer
that counts steps (the first to step), kept out of Dynamo like torch's own zero_grad.
"""

from __future__ import annotations

import time
from typing import Any

from brrrtui.contract.schema import NONE


class OptimizerTiming:
    """Per step: the step() call's duration and the zero_grad() time since the previous step (ns)."""

    def __init__(self) -> None:
        self.clock: Any = None  # the optimizer whose steps count (set by the agent)
        self.step_started_ns: int | None = None
        self.zero_grad_ns = 0
        self.wrapped = False

    def on_step_start(self, optimizer: Any) -> None:
        if self.clock is None or optimizer is self.clock:
            self.step_started_ns = time.perf_counter_ns()

    def step_ended(self) -> tuple[int, int]:
        """(the step() call's duration, zero_grad() time since the last step; NONE when not timed)."""
        now = time.perf_counter_ns()
        step_ns = now - self.step_started_ns if self.step_started_ns is not None else NONE
        zero_grad_ns = self.zero_grad_ns if self.wrapped else NONE
        self.step_started_ns, self.zero_grad_ns = None, 0
        return step_ns, zero_grad_ns

    def time_zero_grad(self, torch: Any, optimizer: Any) -> None:
        """Wrap `optimizer.zero_grad` (this instance only) to add its duration to zero_grad_ns."""
        if self.wrapped:
            return
        original = optimizer.zero_grad

        def zero_grad(*args: Any, **kwargs: Any) -> Any:
            t0 = time.perf_counter_ns()
            try:
                return original(*args, **kwargs)
            finally:
                self.zero_grad_ns += time.perf_counter_ns() - t0

        disable = getattr(torch, "_disable_dynamo", None)
        optimizer.zero_grad = disable(zero_grad) if disable is not None else zero_grad
        self.wrapped = True
