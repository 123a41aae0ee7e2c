"""One profiler window through torch.autograd's low-level Kineto calls.

`torch.profiler.profile` does the same plus work a window does not need: its first start imports
torch._inductor (seconds; measured 6.1 s on the H200 in the first window of a GPT-2 run), it warns about
`acc_events` on every start (into the user's stderr), and it post-processes events we never read.
A stopped window waits for its conversion as a `ClosedWindow`.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Any


class ProfilerSession:
    def __init__(self, torch: Any, cuda: bool):
        self.torch = torch
        self.cuda = cuda
        self.stopped_ns: int | None = None
        ag = torch.autograd
        self._prepare, self._enable, self._disable = (
            ag._prepare_profiler,
            ag._enable_profiler,
            ag._disable_profiler,
        )
        activities = {ag.ProfilerActivity.CPU}
        if cuda:
            activities.add(ag.ProfilerActivity.CUDA)
        self.activities = activities
        args = (
            ag.ProfilerState.KINETO,
            True,
            False,
            False,
            False,
            False,
            torch._C._profiler._ExperimentalConfig(),
        )
        try:  # record shapes; no memory, stack, flops or modules
            self.config = ag.ProfilerConfig(*args, "")  # torch >= 2.4 takes a trace id
        except TypeError:
            self.config = ag.ProfilerConfig(*args)

    @staticmethod
    def any_enabled(torch: Any) -> bool:
        return bool(torch._C._autograd._profiler_enabled())

    def start(self) -> None:
        self._prepare(self.config, self.activities)
        self._enable(self.config, self.activities)
        # what torch.profiler sets too: Inductor's generated code then wraps each kernel launch in a scope of
        # the kernel's name with its buffers as inputs (their shapes give its bytes), and Dynamo marks the
        # compiled graph it calls; without it a window sees neither
        self._set_python_flag(True)

    def abandon(self) -> None:
        """Undo a start() that did not finish (interrupted): the profiler off if it got that far, quietly."""
        try:
            self._set_python_flag(False)
            self._disable()
        except Exception:  # noqa: BLE001 - never enabled: nothing to turn off
            pass

    def stop(self) -> Any:
        """Stop and return the kineto result. Synchronizes first, so kernels still queued are recorded."""
        if self.cuda:
            self.torch.cuda.synchronize()
        self.stopped_ns = time.time_ns()  # the window's end: the rest of stop() is Kineto's own work
        self._set_python_flag(False)
        return self._disable()

    def _set_python_flag(self, on: bool) -> None:
        set_flag = getattr(self.torch.autograd.profiler, "_set_is_profiler_enabled", None)
        if set_flag is not None:
            set_flag(on)


@dataclass(frozen=True)
class ClosedWindow:
    """A window the profiler has stopped, waiting to be converted into rows."""

    window_id: int
    mode: int  # WindowMode's value
    opened_ns: int
    closed_ns: int
    first_step: int  # NONE when no optimizer step completed inside it
    last_step: int
    stall_ns: int  # time the training thread stood still to open and close it
    steps: int
    calls: int  # torch calls the line tagger saw
    line_samples: list[tuple[int, int, int]]  # (line id, t_ns, cpu_ns)

    def row(self, events: int) -> tuple[int, ...]:
        """Its WINDOW_SCHEMA row."""
        return (
            self.window_id,
            self.mode,
            self.opened_ns,
            self.closed_ns,
            self.first_step,
            self.last_step,
            self.stall_ns,
            events,
        )
