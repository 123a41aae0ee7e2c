"""Time-based windows open and close on the main thread, between two statements of the user's own code.

The profiler must start and stop on the thread that runs the model, so the timer thread cannot act itself: it
asks the main thread to tick by simulating TICK_SIGNAL (_thread.interrupt_main): no OS signal is sent, the
handler just runs on the main thread between bytecodes. SIGURG is ignored by default, so a real one arriving
changes nothing.
"""

from __future__ import annotations

import _thread
import signal
import sys
from collections.abc import Callable
from typing import Any

TICK_SIGNAL = signal.SIGURG


class MainThreadTicks:
    """`request()` from any thread; `tick()` then runs on the main thread at the next line of user code.

    The handler runs between any two bytecodes of the main thread: inside an import, inside torch's or
    brrrtui's own Python code, inside a callback that C++ made under a thread-local-state guard (a window
    opened or closed there crashed the process at exit on the H200). When it lands in the user's code it acts
    at once. Otherwise it arms a line trace on the nearest user frame up the stack, so it acts at that frame's
    next line: a tick rarely lands in user code while a window runs (measured: a 0.2 s time window on a tight
    op loop ran 1.4 s waiting for one)."""

    def __init__(self, tick: Callable[[], None]):
        self.tick = tick
        self.user_frames: Any = None  # brrrtui.capture.lines.UserFrames, once torch is there
        self._armed: list[Any] = []  # user frames whose next line will tick

    def install(self) -> None:
        signal.signal(TICK_SIGNAL, self._on_signal)

    def installed(self) -> bool:
        """False once the script has replaced the handler (bound methods compare equal, not identical)."""
        return bool(signal.getsignal(TICK_SIGNAL) == self._on_signal)

    def request(self) -> None:
        _thread.interrupt_main(TICK_SIGNAL)

    def _on_signal(self, signum: int, frame: Any) -> None:
        if self.user_frames is None:
            return
        user = self.user_frames.innermost(frame)
        if user is None or _inside_import(user) or _inside_compiler(frame):
            return  # the timer asks again at its next tick
        if user is frame:
            self.tick()
        elif sys.gettrace() is None and not self._armed:  # never displace a debugger's or coverage's tracer
            # Arm every user frame on the stack (the innermost may return before its next line) and every
            # user frame entered from now on; the first user line disarms them all and acts.
            while user is not None:
                if self.user_frames.is_user(user.f_code.co_filename):
                    user.f_trace, user.f_trace_lines = self._on_user_line, True
                    self._armed.append(user)
                user = user.f_back
            sys.settrace(self._on_call)

    def _on_call(self, frame: Any, event: str, arg: Any) -> Any:
        """The global tracer while armed: trace the lines of newly entered user frames, nothing else."""
        return self._on_user_line if self.user_frames.is_user(frame.f_code.co_filename) else None

    def _on_user_line(self, frame: Any, event: str, arg: Any) -> Any:
        if event != "line" or _inside_compiler(frame):
            return self._on_user_line
        sys.settrace(None)
        for armed in self._armed:
            armed.f_trace = None
        self._armed.clear()
        frame.f_trace = None
        self.tick()
        return None


# torch.compile's machinery: while it runs, the user's own frames run too (AOTAutograd traces `forward` with
# fake tensors under thread-local dispatch state), and a window opened or closed there left the profiler
# enabled for the next window to find (seen with Inductor on a CPU: the capture stepped aside for good).
_COMPILER_PARTS = ("torch/_dynamo/", "torch/_inductor/", "torch/_functorch/", "torch/fx/", "torch/_subclasses/")


def _inside_compiler(frame: Any) -> bool:
    while frame is not None:
        filename = frame.f_code.co_filename.replace("\\", "/")
        if any(part in filename for part in _COMPILER_PARTS):
            return True
        frame = frame.f_back
    return False


def _inside_import(frame: Any) -> bool:
    while frame is not None:
        if frame.f_code.co_filename.startswith("<frozen importlib"):
            return True
        frame = frame.f_back
    return False
