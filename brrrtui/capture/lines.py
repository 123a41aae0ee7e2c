"""Exact source lines for every torch call, operators included (`x @ w`, `0.5 * y`).

A Chrome trace's Python frames stop at the function's `def` line, and the profiler's PyCCall events miss
operators. A TorchFunctionMode sees every torch call; walking the Python stack past library files
finds the user's line. Each call is then wrapped in a cheap profiler scope named `brrr:<line id>`, so the
ops (and through them the kernels) it issues nest inside a span that names the line:

    brrr:17  |=====================================|      <- train.py:41  `h = self.fc(x)`
    aten::linear |==========================|
                   aten::addmm |=========|  -> kernels

The same walk up the stack reads the nn.Module chain the call runs in (module_names.py) and the innermost
line of a model library that is not torch itself (transformers, torchvision): the scope is then named
`brrr:<line id>:<library line id>:<module chain>` (convert.parse_span_name reads it back).

The mode is active only inside profiler windows; inside its handler torch disables it, so a call made by
torch's own Python code is not tagged again (nn.Module calls resolve to the line that called the module).

Under torch.compile the mode is off inside compiled code only. Dynamo guards every compiled graph on the
torch-function mode stack and traces an active mode's handler: on a CPU test, a 60-step compiled loop went
from 1 frame compiled and 0 graph breaks to 53 frames, 2 graphs and 8 graph breaks (`sys._getframe`,
RecordFunctionFast) when windows pushed the tagger around it. So the agent's hook on torch.compile wraps what
it returns (`untagged`): each call of the compiled function or module takes the tagger off the stack and puts
it back after, and the script's eager code around it (the loss, `backward()`, the optimizer step, gradient
clipping) keeps its exact lines. Compiled kernels get theirs from Inductor (analyzers.link.compiled); inside a
window, the wrapper also opens a profiler scope around the call named by the line that made it
(`compiled_call_name`), whose line goes to the kernels Inductor cannot place (a library model's). Code that
Dynamo traces without going through that wrapper still meets a plain pass-through handler
(`torch.compiler.is_compiling()` is a constant to Dynamo).
"""

from __future__ import annotations

import functools
import sys
import threading
import time
from collections.abc import Callable
from typing import Any

from torch.compiler import is_compiling
from torch.overrides import TorchFunctionMode

from brrrtui.capture.ids import IdTable
from brrrtui.capture.module_names import CALL_IMPL, ModuleNames, module_of
from brrrtui.contract.schema import COMPILED_CALL_PREFIX, NONE
from brrrtui.contract.userfiles import is_model_library_file

SPAN_PREFIX = "brrr:"

try:  # a C++ scope with no Python bookkeeping; ~1 us. Older torch: the public record_function.
    from torch._C._profiler import _RecordFunctionFast as _Scope
except ImportError:  # pragma: no cover - torch < 2.2
    from torch.profiler import record_function as _Scope  # type: ignore[assignment]


class FileVerdicts:
    """A per-file verdict, computed once: a dict lookup on the hot path of every torch call inside a window."""

    def __init__(self, test: Callable[[str], bool]):
        self.test = test
        self.known: dict[str, bool] = {}

    def __call__(self, filename: str) -> bool:
        known = self.known.get(filename)
        if known is None:
            known = self.known[filename] = self.test(filename)
        return known


class UserFrames:
    """Finds the innermost frame of the user's own code. Shared by the tagger, the sampler and the agent's
    ticks."""

    def __init__(self, is_user_file: Callable[[str], bool]):
        self.is_user = FileVerdicts(is_user_file)

    def innermost(self, frame: Any) -> Any:
        """`frame` or its nearest caller in a user file, or None."""
        while frame is not None and not self.is_user(frame.f_code.co_filename):
            frame = frame.f_back
        return frame


class LineTable(IdTable[tuple[str, int, str]]):
    """Interns (file, line, function) -> id; the tagger (main thread) and the sampler thread both intern."""

    def intern(self, file: str, line: int, function: str) -> int:
        return self.id_of((file, line, function))

    def take_new_rows(self) -> list[tuple[int, str, int, str]]:
        """The new lines as rows of the recording's `lines` table."""
        return [(i, *key) for i, key in self.take_new()]


def thread_cpu_clock(ident: int) -> int | None:
    """The clock id of a thread's on-CPU time (Linux, the BSDs), None where the platform has none."""
    try:
        return time.pthread_getcpuclockid(ident)
    except (AttributeError, OSError, OverflowError, TypeError):
        return None


class LineSampler:
    """While a window is open, samples the user line the main thread is executing every `period_s`, and the
    main thread's on-CPU time.

    Spans say which line issued each torch call; they cannot say what the CPU did between calls
    (`time.sleep`, a Python loop, a data transform), yet that is what leaves the GPU idle. Samples can. The
    on-CPU time tells a sleep or a wait (which the profiler does not slow) from Python work (which it does):
    the unprofiled replay speeds up only the latter (analyzers/idle/unprofiled_replay.py).
    Reading another thread's frame needs the GIL, so this runs at most a few hundred times a second and only
    inside windows."""

    def __init__(self, lines: LineTable, user_frames: UserFrames, period_s: float = 0.002):
        self.lines = lines
        self.user_frames = user_frames
        self.period_s = period_s
        self.main_ident = threading.main_thread().ident or 0
        self.cpu_clock = thread_cpu_clock(self.main_ident)
        self.samples: list[tuple[int, int, int]] = []  # (line id, t_ns, main thread's cpu_ns or NONE)
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def start(self) -> None:
        self.samples = []
        self._stop.clear()
        self._thread = threading.Thread(target=self._run, name="brrrtui-lines", daemon=True)
        self._thread.start()

    def stop(self) -> list[tuple[int, int, int]]:
        self._stop.set()
        if self._thread is not None:
            self._thread.join()
        return self.samples

    def _cpu_ns(self) -> int:
        if self.cpu_clock is None:
            return NONE
        try:
            return time.clock_gettime_ns(self.cpu_clock)
        except OSError:  # the thread is gone
            self.cpu_clock = None
            return NONE

    def _run(self) -> None:
        while not self._stop.wait(self.period_s):
            frame = self.user_frames.innermost(sys._current_frames().get(self.main_ident))
            if frame is not None:
                code = frame.f_code
                line = self.lines.intern(code.co_filename, frame.f_lineno, code.co_name)
                self.samples.append((line, time.time_ns(), self._cpu_ns()))


_current: LineTagger | None = None  # the open window's tagger
_compiled_calls = 0  # calls of compiled code running on the main thread: no tagger goes on the stack then


def untagged(fn: Callable[..., Any]) -> Callable[..., Any]:
    """`fn` (a torch.compile'd function or module's forward), called on the main thread (where windows open)
    with the tagger off torch's mode stack (module doc): Dynamo then sees the same empty stack in and out of
    windows. A window that opens or closes during the call (an optimizer hook inside compiled code) leaves
    the stack as the call found it once the outermost compiled call returns."""

    @functools.wraps(fn)
    def call(*args: Any, **kwargs: Any) -> Any:
        global _compiled_calls
        if is_compiling() or threading.current_thread() is not threading.main_thread():
            return fn(*args, **kwargs)
        _compiled_calls += 1
        tagger = _current
        if tagger is not None:
            tagger.suspend()
        try:
            if tagger is None or _compiled_calls > 1:
                return fn(*args, **kwargs)
            with _Scope(compiled_call_name(tagger, sys._getframe(1))):
                return fn(*args, **kwargs)
        finally:
            _compiled_calls -= 1
            if not _compiled_calls and _current is not None:
                _current.resume()

    return call


def compiled_call_name(tagger: LineTagger, frame: Any) -> str:
    """The scope around a compiled call (schema.COMPILED_CALL_PREFIX), named by the user's line that made it:
    an op, not a span (its prefix is not SPAN_PREFIX), so Inductor's provenance still places what it can."""
    frame = tagger.user_frames.innermost(frame)
    if frame is None:
        return f"{COMPILED_CALL_PREFIX}{NONE}"
    code = frame.f_code
    return f"{COMPILED_CALL_PREFIX}{tagger.lines.intern(code.co_filename, frame.f_lineno, code.co_name)}"


class LineTagger(TorchFunctionMode):
    def __init__(
        self,
        lines: LineTable,
        user_frames: UserFrames,
        is_library_file: Callable[[str], bool] = is_model_library_file,
    ):
        super().__init__()
        self.lines = lines
        self.user_frames = user_frames
        self.is_library_file = FileVerdicts(is_library_file)
        self.modules = ModuleNames()
        # (user code, line, library code, line, innermost module) -> the scope's name
        self._names: dict[tuple[Any, int, Any, int, int], str] = {}
        self.calls = 0  # torch calls seen: the scheduler closes a time window by them (windows.Scheduler)
        self.pushed = False  # on torch's mode stack

    def __enter__(self) -> LineTagger:
        global _current
        # a window's names start afresh: a module built anew every step (a loss inside forward) would
        # otherwise add a key per call for the whole run
        self._names.clear()
        self.modules.new_window()
        if not _compiled_calls:
            self.resume()
        _current = self
        return self

    def __exit__(self, *exc: Any) -> None:
        global _current
        self.suspend()
        if _current is self:
            _current = None

    def suspend(self) -> None:
        """Take the mode off the stack (a compiled function is being called)."""
        if self.pushed:
            self.pushed = False
            super().__exit__(None, None, None)

    def resume(self) -> None:
        if not self.pushed:
            super().__enter__()
            self.pushed = True

    def _scope_name(self) -> str | None:
        """`brrr:<user line>:<library line>:<module chain>` for the call being made (ids; -1 / "" if none).

        One walk up the stack finds the innermost user frame, the innermost model-library frame below it
        (transformers, torchvision … not torch itself) and the innermost module call; the module chain above
        it is read only the first time that combination is seen."""
        user = lib = module_frame = None
        frame: Any = sys._getframe(2)  # skip this method and __torch_function__
        while frame is not None:
            code = frame.f_code
            if code is CALL_IMPL:
                if module_frame is None:
                    module_frame = frame
                if user is not None:
                    break
            elif user is None:
                if self.user_frames.is_user(code.co_filename):
                    user = frame
                    if module_frame is not None:
                        break
                elif lib is None and self.is_library_file(code.co_filename):
                    lib = frame
            frame = frame.f_back
        if user is None:
            return None
        module = module_of(module_frame) if module_frame is not None else None
        key = (user.f_code, user.f_lineno, lib and lib.f_code, lib.f_lineno if lib else 0, id(module))
        name = self._names.get(key)
        if name is None:
            name = self._names[key] = self._new_name(user, lib, module_frame)
        return name

    def _new_name(self, user: Any, lib: Any, module_frame: Any) -> str:
        lid = self.lines.intern(user.f_code.co_filename, user.f_lineno, user.f_code.co_name)
        if lib is None and module_frame is None:
            return f"{SPAN_PREFIX}{lid}"
        lib_id = self.lines.intern(lib.f_code.co_filename, lib.f_lineno, lib.f_code.co_name) if lib else -1
        stack = []
        frame = module_frame
        while frame is not None:
            if frame.f_code is CALL_IMPL and (m := module_of(frame)) is not None:
                stack.append(m)
            frame = frame.f_back
        return f"{SPAN_PREFIX}{lid}:{lib_id}:{self.modules.chain(stack) if stack else ''}"

    def __torch_function__(self, func, types, args=(), kwargs=None):  # noqa: ANN001 - torch's protocol
        kwargs = kwargs or {}
        if is_compiling():  # a constant to Dynamo: a trace that meets the mode sees a pass-through
            return func(*args, **kwargs)
        self.calls += 1
        name = self._scope_name()
        if name is None:
            return func(*args, **kwargs)
        with _Scope(name):
            return func(*args, **kwargs)
