"""The capture agent inside the user's process: step clock, profiler windows, line tags, device facts.

Everything here runs on the user's threads, so every entry point is guarded: a failure in brrrtui turns
capture off with one note and never disturbs the script.
"""

from __future__ import annotations

import functools
import importlib
import os
import sys
import threading
import time
import traceback
from collections.abc import Callable
from typing import Any

from brrrtui.capture.agent_stream import StreamControl
from brrrtui.capture.compile_events import Frames, user_place
from brrrtui.capture.convert import Interner, convert_events
from brrrtui.capture.optimizer_timing import OptimizerTiming
from brrrtui.capture.session import ClosedWindow, ProfilerSession
from brrrtui.capture.ticks import MainThreadTicks
from brrrtui.capture.torch_hooks import TorchImportWatcher, device_facts, on_compile, on_user_profiler_start
from brrrtui.capture.windows import Action, Scheduler
from brrrtui.contract.config import WindowConfig
from brrrtui.contract.messages import (
    CaptureError,
    CompiledKernels,
    CompileEvent,
    Note,
    StepBatch,
    WindowBatch,
)
from brrrtui.contract.protocol import Channel
from brrrtui.contract.userfiles import is_model_library_file

TIMER_PERIOD_S = 0.1
STEP_FLUSH_S = 0.5


class Agent(StreamControl):
    def __init__(
        self,
        channel: Channel,
        config: WindowConfig,
        is_user_file: Callable[[str], bool],
        calibrate: bool = True,
    ):
        self.channel = channel
        self.is_user_file = is_user_file
        self.calibrate_at_exit = calibrate
        self.sched = Scheduler(config, time.time_ns())
        self.strings = Interner()
        self.torch: Any = None
        self.lines: Any = None  # LineTable, once torch is there
        self.prof: Any = None
        self.tagger: Any = None
        self.window_id, self.window_opened_ns, self.window_first_step, self.stall_ns = -1, 0, -1, 0
        self.clock_optimizer: Any = None  # the first optimizer that steps defines "a step"
        self.optimizer_timing = OptimizerTiming()
        self.pending_steps: list[tuple[int, int, int, int]] = []  # STEP_SCHEMA rows
        self.last_step_flush_ns = 0
        self.converting: threading.Thread | None = None
        self.main_thread = threading.main_thread()
        self.noted: set[str] = set()
        self.stepped_aside = False
        self.cuda = False
        self.device_sent = False
        self.dead = False
        self._timer: threading.Thread | None = None
        self.user_frames: Any = None  # UserFrames, once torch is there
        self.ticks = MainThreadTicks(self._guard(self._tick))
        self.want_stream = config.stream
        self.stream: Any = None  # KernelStream, once CUDA is up (brrrtui.capture.stream)
        self.stream_lock = threading.Lock()  # the timer thread starts the stream; windows pause/resume it
        self.window_open = False
        self.watching_compile = False  # graph breaks are heard from the first torch.compile on

    # ---------------------------------------------------------------- setup
    def install(self) -> None:
        sys.meta_path.insert(0, TorchImportWatcher(self._guard(self.on_torch_imported)))
        if threading.current_thread() is self.main_thread:
            self.ticks.install()
            self._timer = threading.Thread(target=self._timer_loop, name="brrrtui-timer", daemon=True)
            self._timer.start()

    def note(self, key: str, text: str) -> None:
        if key not in self.noted:
            self.noted.add(key)
            self.channel.send(Note(text))

    def _guard(self, fn: Callable[..., Any]) -> Callable[..., Any]:
        def guarded(*args: Any, **kwargs: Any) -> Any:
            if self.dead:
                return None
            try:
                return fn(*args, **kwargs)
            except Exception as e:  # noqa: BLE001 - capture must never break the user's script
                self.dead = True
                self.note("internal", f"capture stopped after an internal error: {e.__class__.__name__}: {e}")
                self.channel.send(CaptureError(traceback.format_exc()))
                return None

        return guarded

    def on_torch_imported(self, torch: Any) -> None:
        self.torch = torch
        from brrrtui.capture.lines import LineSampler, LineTable, UserFrames, untagged

        self.lines = LineTable()
        self.user_frames = self.ticks.user_frames = UserFrames(self.is_user_file)
        self.sampler = LineSampler(self.lines, self.user_frames)
        optimizer = importlib.import_module("torch.optim.optimizer")
        optimizer.register_optimizer_step_pre_hook(self._guard(self.on_optimizer_step_start))
        optimizer.register_optimizer_step_post_hook(self._guard(self.on_optimizer_step))
        on_user_profiler_start(self._guard(self._step_aside))
        on_compile(torch, self._guard(self._on_compile), untagged)
        self.sched.torch_seen_ns = time.time_ns()

    def _on_compile(self) -> None:  # before Dynamo traces anything
        from brrrtui.capture.compile_events import watch_graph_breaks, watch_recompiles
        from brrrtui.capture.inductor_sources import watch_compiled_graphs  # imports torch: not at start-up

        if not self.watching_compile:
            self.watching_compile = True
            event = self._guard(self._on_compile_event)
            watch_graph_breaks(functools.partial(event, "graph_break"))
            watch_recompiles(functools.partial(event, "recompile"))
        if not watch_compiled_graphs(self._guard(self._on_compiled_graph)):
            self.note(
                "compile",
                "torch.compile in use: this torch has no kernel provenance, so the lines of "
                "compiled kernels come from the line sampler only",
            )

    def _on_compile_event(self, kind: str, file: str, line: int, reason: str, frames: Frames = ()) -> None:
        if (place := user_place(file, line, reason, frames, self.user_frames.is_user)) is not None:
            lid = self.lines.intern(place[0], place[1], "")
            with self.strings.lock:  # the window thread takes new lines under it too
                self.channel.send(CompileEvent(self.lines.take_new_rows(), kind, lid, place[2]))

    def _on_compiled_graph(self, provenance: str) -> None:
        from brrrtui.capture.inductor_sources import source_rows

        rows = source_rows(provenance, self.lines, self.user_frames, is_model_library_file)
        with self.strings.lock:  # the window thread takes new lines under it too
            self.channel.send(CompiledKernels(lines=self.lines.take_new_rows(), rows=rows))

    # ---------------------------------------------------------------- ticks
    def on_optimizer_step_start(self, optimizer: Any, args: Any, kwargs: Any) -> None:
        self.optimizer_timing.on_step_start(optimizer)

    def on_optimizer_step(self, optimizer: Any, args: Any, kwargs: Any) -> None:
        timing = self.optimizer_timing
        first = self.clock_optimizer is None
        if first:
            self.clock_optimizer = timing.clock = optimizer
        if optimizer is not self.clock_optimizer:
            return
        now = time.time_ns()
        step = len(self.sched.step_times_ns)
        self.pending_steps.append((step, now, *timing.step_ended()))
        if first:  # from now on, its zero_grad() calls are timed too
            timing.time_zero_grad(self.torch, optimizer)
        action = self.sched.on_step(now) if not self.stepped_aside else Action.NONE
        if threading.current_thread() is self.main_thread:
            self._act(action, now)
        if now - self.last_step_flush_ns > STEP_FLUSH_S * 1e9:
            self.flush_steps(now)

    def flush_on_signal(self) -> None:
        """SIGTERM: send the steps not sent yet before the process dies (never blocks on a busy pipe)."""
        steps, self.pending_steps = self.pending_steps, []
        if steps and not self.channel.send(StepBatch(steps), wait_s=1.0):
            self.pending_steps = steps + self.pending_steps

    def flush_steps(self, now: int | None = None) -> None:
        if self.pending_steps:
            steps, self.pending_steps = self.pending_steps, []
            self.channel.send(StepBatch(steps))
        self.last_step_flush_ns = now or time.time_ns()

    def _timer_loop(self) -> None:
        while not self.dead:
            time.sleep(TIMER_PERIOD_S)
            if self.stepped_aside or self.torch is None:
                continue
            if self.sched.lockstep is not None:
                self._guard(self._poll_plan)()
            if self.want_stream and self.stream is None:
                self._guard(self._start_stream)()
            if self.sched.timer_decision(time.time_ns(), self._window_calls()) != Action.NONE:
                if not self.ticks.installed():
                    self.note("tick", "time-based windows off: the script replaced brrrtui's SIGURG handler")
                    return
                self.ticks.request()

    def _poll_plan(self) -> None:
        """A distributed rank: read rank 0's newest window plan (brrrtui.capture.lockstep)."""
        plan = self.sched.lockstep
        missed = len(plan.missed)
        plan.sync(len(self.sched.step_times_ns))
        if len(plan.missed) > missed:
            self.note("missed", f"a window announced for step {plan.missed[-1]} was read too late")

    def _tick(self) -> None:
        if self.stepped_aside:
            return
        now = time.time_ns()
        self._act(self.sched.on_timer(now, self._window_calls()), now)

    def _window_calls(self) -> int:
        tagger = self.tagger
        return tagger.calls if tagger is not None else 0

    def _act(self, action: Action, now: int) -> None:
        if action == Action.OPEN:
            if self.converting is not None and self.converting.is_alive():
                if self.sched.lockstep is None:
                    return  # the previous window is still being converted; try at the next tick
                self.converting.join()  # a planned window opens on its step on every rank
            self.open_window(now)
        elif action == Action.CLOSE:
            self.close_window(background=True)

    # ---------------------------------------------------------------- windows
    def open_window(self, now: int) -> None:
        torch = self.torch
        if ProfilerSession.any_enabled(torch):  # the script profiles itself right now
            self._step_aside()
            return
        from brrrtui.capture.lines import LineTagger

        t0 = time.perf_counter_ns()
        self.cuda = bool(torch.cuda.is_available())
        if not self.cuda:
            self.note("nogpu", "no CUDA GPU: recording CPU ops and source lines only")
        self._pause_stream()
        prof = ProfilerSession(torch, self.cuda)
        try:
            prof.start()
        except BaseException:  # Ctrl-C can land inside Kineto's start: no window opened, no profiler left on
            prof.abandon()
            self._resume_stream()
            raise
        self.prof = prof
        self.tagger = LineTagger(self.lines, self.user_frames)
        self.tagger.__enter__()
        self.sampler.start()
        self.window_id += 1
        self.window_opened_ns = time.time_ns()
        self.window_first_step = len(self.sched.step_times_ns)
        self.sched.opened(self.window_opened_ns)
        self.stall_ns = time.perf_counter_ns() - t0

    def close_window(self, background: bool) -> None:
        if self.prof is None:
            return
        t0 = time.perf_counter_ns()
        try:
            self.tagger.__exit__(None, None, None)
        except Exception:  # noqa: BLE001 - the mode stack may have been left unbalanced by the script
            pass
        samples = self.sampler.stop()
        calls = self.tagger.calls if self.tagger is not None else 0  # None: interrupted while it opened
        session, self.prof, self.tagger = self.prof, None, None
        result = session.stop()
        closed_ns = session.stopped_ns or time.time_ns()
        if self.stream is not None and self.cuda:
            # Kineto finalizes CUPTI at the exit of the next CUDA call; make it happen before resuming
            self.torch.cuda.synchronize()
        self._resume_stream()
        last_step = len(self.sched.step_times_ns) - 1
        steps = last_step - self.window_first_step + 1
        window = ClosedWindow(
            window_id=self.window_id,
            mode=int(self.sched.open_mode),
            opened_ns=self.window_opened_ns,
            closed_ns=closed_ns,
            first_step=self.window_first_step if steps > 0 else -1,
            last_step=last_step if steps > 0 else -1,
            stall_ns=self.stall_ns + time.perf_counter_ns() - t0,
            steps=max(0, steps),
            calls=calls,
            line_samples=samples,
        )
        self.sched.closing()
        if background:
            convert = self._guard(self._convert_and_send)
            self.converting = threading.Thread(
                target=convert, args=(result, window), name="brrrtui-convert", daemon=True
            )
            self.converting.start()
        else:
            self._convert_and_send(result, window)

    def _convert_and_send(self, result: Any, window: ClosedWindow) -> None:
        from brrrtui.capture.lines import SPAN_PREFIX

        t0 = time.perf_counter_ns()
        events = result.events()
        rows = convert_events(events, window.window_id, self.strings, SPAN_PREFIX)
        del result, events  # free Kineto's copy before the next window
        convert_ns = time.perf_counter_ns() - t0
        n_events = sum(len(r) for r in rows.values())
        cost = self.sched.settled(
            opened_ns=window.opened_ns,
            closed_ns=window.closed_ns,
            settled_ns=time.time_ns(),
            stall_ns=window.stall_ns,
            convert_ns=convert_ns,
            events=n_events,
            steps=window.steps,
            calls=window.calls,
        )
        # The stream's thread sends too: `lock` from take_new() to the send keeps every string id in or
        # before the first batch that uses it (convert.Interner).
        with self.strings.lock:
            if not self.device_sent and self.cuda:
                self.channel.send(device_facts(self.torch))
                self.device_sent = True
            self.channel.send(
                WindowBatch(
                    window=window.row(n_events),
                    capture_cost=(window.window_id, convert_ns, int(cost)),
                    strings=self.strings.take_new(),
                    lines=self.lines.take_new_rows(),
                    line_samples=[(window.window_id, *sample) for sample in window.line_samples],
                    **rows,
                )
            )

    # ---------------------------------------------------------------- the script's own profiler
    def _step_aside(self) -> None:
        if self.stepped_aside:
            return
        self.stepped_aside = True
        self.sched.disabled = True
        if self.prof is not None:
            self.close_window(background=False)
        with self.stream_lock:
            if self.stream is not None:
                self.stream.stop()
        self.note(
            "aside",
            "the script runs torch.profiler itself: brrrtui stepped aside (no more windows; "
            "step times are still recorded)",
        )

    # ---------------------------------------------------------------- end of run
    def finish(self) -> None:
        """The script ended (normally or not): close the open window, send the last steps and calibration."""
        if self.dead:
            return
        try:  # each part on its own: a window that cannot close still leaves the last steps to send
            for part in (self._close_last_window, self._stop_stream, self.flush_steps, self._calibrate):
                try:
                    part()
                except Exception as e:  # noqa: BLE001
                    self.note("finish", f"capture could not finish cleanly: {e.__class__.__name__}: {e}")
        finally:
            self.dead = True

    def _close_last_window(self) -> None:
        if self.prof is not None:
            self.close_window(background=False)
        if self.converting is not None:
            self.converting.join()

    def _stop_stream(self) -> None:
        with self.stream_lock:
            self.want_stream = False
            if self.stream is not None:
                self.stream.stop()  # before calibration: its kernels are not the script's
                self.channel.send(self.stream.stats(self.channel.blocked_ns_max))

    def _calibrate(self) -> None:
        if self.cuda and self.calibrate_at_exit and os.environ.get("BRRRTUI_NO_CALIBRATE") != "1":
            from brrrtui.capture.calibrate import measure_peaks

            self.channel.send(measure_peaks(self.torch))
