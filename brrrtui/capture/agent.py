"""The capture agent inside the user's process: step clock, profiler windows, line tags, device facts.

Everything here runs on the user's threads, so every entry point is guarded: a failure in brrrtui turns
capture off with one note and never disturbs the script.
"""

from __future__ import annotations

import _thread
import importlib
import importlib.abc
import importlib.util
import os
import signal
import sys
import threading
import time
import traceback
from collections.abc import Callable
from typing import Any

from brrrtui.capture.session import ProfilerSession
from brrrtui.capture.windows import Action, Interner, Scheduler, convert_events
from brrrtui.contract.config import WindowConfig
from brrrtui.contract.protocol import Channel

# The timer thread asks the main thread to tick by simulating this signal (_thread.interrupt_main): no OS
# signal is sent, our handler just runs on the main thread between bytecodes. SIGURG is ignored by default,
# so a real one arriving changes nothing.
TICK_SIGNAL = signal.SIGURG
TIMER_PERIOD_S = 0.1
STEP_FLUSH_S = 0.5


class TorchImportWatcher(importlib.abc.MetaPathFinder):
    """Calls `callback(torch)` right after the script's own `import torch` finishes (brrrtui never imports
    torch first: CUDA_VISIBLE_DEVICES set inside the script must still work)."""

    def __init__(self, callback: Callable[[Any], None]):
        self.callback = callback

    def find_spec(self, fullname, path, target=None):  # noqa: ANN001 - importlib's protocol
        if fullname != "torch":
            return None
        sys.meta_path.remove(self)
        spec = importlib.util.find_spec("torch")
        if spec is None or spec.loader is None:
            return spec
        loader_exec = spec.loader.exec_module
        callback = self.callback

        def exec_module(module: Any) -> None:
            loader_exec(module)
            callback(module)

        spec.loader.exec_module = exec_module  # type: ignore[method-assign]
        return spec


class Agent:
    def __init__(self, channel: Channel, config: WindowConfig, is_user_file: Callable[[str], bool],
                 calibrate: bool = True):  # fmt: skip
        self.channel = channel
        self.is_user_file = is_user_file
        self.calibrate_at_exit = calibrate
        self.sched = Scheduler(config, time.time_ns())
        self.strings = Interner()
        self.torch: Any = None
        self.lines: Any = None  # LineTable, once torch is there
        self.prof: Any = None
        self.tagger: Any = None
        self.window_id = -1
        self.window_opened_ns = 0
        self.window_first_step = -1
        self.stall_ns = 0
        self.clock_optimizer: Any = None  # the first optimizer that steps defines "a step"
        self.pending_steps: list[tuple[int, int]] = []
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
        self._armed: list[Any] = []  # user frames whose next line will tick
        self.want_stream = config.stream
        self.stream: Any = None  # KernelStream, once CUDA is up (brrrtui.capture.stream)
        self.stream_lock = threading.Lock()  # the timer thread starts the stream; windows pause/resume it
        self.window_open = False

    # ---------------------------------------------------------------- setup
    def install(self) -> None:
        sys.meta_path.insert(0, TorchImportWatcher(self._guard(self.on_torch_imported)))
        if threading.current_thread() is self.main_thread:
            signal.signal(TICK_SIGNAL, self._on_tick_signal)
            self._timer = threading.Thread(target=self._timer_loop, name="brrrtui-timer", daemon=True)
            self._timer.start()

    def note(self, key: str, text: str) -> None:
        if key not in self.noted:
            self.noted.add(key)
            self.channel.send({"type": "note", "text": text})

    def _guard(self, fn: Callable[..., Any]) -> Callable[..., Any]:
        def guarded(*args: Any, **kwargs: Any) -> Any:
            if self.dead:
                return None
            try:
                return fn(*args, **kwargs)
            except Exception as e:  # noqa: BLE001 - capture must never break the user's script
                self.dead = True
                self.note("internal", f"capture stopped after an internal error: {e.__class__.__name__}: {e}")
                self.channel.send({"type": "error", "traceback": traceback.format_exc()})
                return None

        return guarded

    def on_torch_imported(self, torch: Any) -> None:
        self.torch = torch
        from brrrtui.capture.lines import LineSampler, LineTable, UserFrames

        self.lines = LineTable()
        self.user_frames = UserFrames(self.is_user_file)
        self.sampler = LineSampler(self.lines, self.user_frames)
        optimizer = importlib.import_module("torch.optim.optimizer")
        optimizer.register_optimizer_step_post_hook(self._guard(self.on_optimizer_step))
        self._patch_user_profiler_entry_points()
        self.sched.torch_seen_ns = time.time_ns()

    # ---------------------------------------------------------------- ticks
    def on_optimizer_step(self, optimizer: Any, args: Any, kwargs: Any) -> None:
        if self.clock_optimizer is None:
            self.clock_optimizer = optimizer
        if optimizer is not self.clock_optimizer:
            return
        now = time.time_ns()
        step = len(self.sched.step_times_ns)
        self.pending_steps.append((step, now))
        action = self.sched.on_step(now) if not self.stepped_aside else Action.NONE
        if threading.current_thread() is self.main_thread:
            self._act(action, now)
        if now - self.last_step_flush_ns > STEP_FLUSH_S * 1e9:
            self.flush_steps(now)

    def flush_steps(self, now: int | None = None) -> None:
        if self.pending_steps:
            steps, self.pending_steps = self.pending_steps, []
            self.channel.send({"type": "batch", "steps": steps})
        self.last_step_flush_ns = now or time.time_ns()

    def _timer_loop(self) -> None:
        while not self.dead:
            time.sleep(TIMER_PERIOD_S)
            if self.stepped_aside or self.torch is None:
                continue
            if self.want_stream and self.stream is None:
                self._guard(self._start_stream)()
            if self.sched.timer_decision(time.time_ns(), self._window_calls()) != Action.NONE:
                if (
                    signal.getsignal(TICK_SIGNAL) != self._on_tick_signal
                ):  # bound methods compare equal, not identical
                    self.note("tick", "time-based windows off: the script replaced brrrtui's SIGURG handler")
                    return
                _thread.interrupt_main(TICK_SIGNAL)

    def _on_tick_signal(self, signum: int, frame: Any) -> None:
        """Open or close a time-based window, but only between two statements of the user's own code.

        The handler runs between any two bytecodes of the main thread: inside an import, inside torch's or
        brrrtui's own Python code, inside a callback that C++ made under a thread-local-state guard (a window
        opened or closed there crashed the process at exit on the H200). When it lands in the user's code it
        acts at once. Otherwise it arms a line trace on the nearest user frame up the stack, so it acts at that
        frame's next line: a tick rarely lands in user code while a window runs (measured: a 0.2 s time window
        on a tight op loop ran 1.4 s waiting for one).
        """
        user = self.user_frames.innermost(frame)
        if user is None or self._inside_import(user):
            return  # the timer asks again at its next tick
        if user is frame:
            self._guard(self._tick)()
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
        if event != "line":
            return self._on_user_line
        sys.settrace(None)
        for armed in self._armed:
            armed.f_trace = None
        self._armed.clear()
        frame.f_trace = None
        self._guard(self._tick)()
        return None

    @staticmethod
    def _inside_import(frame: Any) -> bool:
        while frame is not None:
            if frame.f_code.co_filename.startswith("<frozen importlib"):
                return True
            frame = frame.f_back
        return False

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
                return  # the previous window is still being converted; try at the next tick
            self.open_window(now)
        elif action == Action.CLOSE:
            self.close_window(background=True)

    # ---------------------------------------------------------------- the kernel stream
    def _start_stream(self) -> None:
        """Start streaming kernels once the script has initialised CUDA (never initialise it for the script)."""
        if not self.torch.cuda.is_initialized():
            return
        with self.stream_lock:
            if self.stream is not None or not self.want_stream or self.stepped_aside:
                return
            from brrrtui.capture import cupti_ffi
            from brrrtui.capture.stream import KernelStream

            cupti, why = cupti_ffi.load()
            if cupti is None:
                self.want_stream = False
                self.note("stream", f"profiler windows only: {why}")
                return
            stream = KernelStream(cupti, self._send_stream, self.strings, self.strings.lock)
            stream.after_window = self.window_id
            if not self.window_open:
                try:
                    stream.start()
                except Exception as e:  # noqa: BLE001 - an unsupported driver or CUDA: windows only
                    self.want_stream = False
                    self.note(
                        "stream", f"profiler windows only: the CUPTI kernel stream failed to start ({e})"
                    )
                    return
            self.stream = stream

    def _send_stream(self, data: bytes, parts: list[tuple[int, int, int]], found: Any) -> None:
        """Raw CUPTI buffers and what the stream's scan found in them (brrrtui.contract.cupti_records.rows_from_scan
        makes the rows in the recorder); sent_ns splits the recorder's delivery latency."""
        self.channel.send({"type": "batch", "strings": self.strings.take_new(), "sent_ns": time.time_ns(),
                           "stream_raw": {"data": data, "parts": parts, "offsets": found.offsets,
                                          "names": found.names, "shapes": found.shapes}})  # fmt: skip

    def _pause_stream(self) -> None:
        with self.stream_lock:
            self.window_open = True
            if self.stream is not None:
                self.stream.pause()

    def _resume_stream(self) -> None:
        with self.stream_lock:
            self.window_open = False
            if self.stream is not None and not self.stepped_aside:
                try:
                    self.stream.resume(self.window_id)
                except Exception as e:  # noqa: BLE001
                    self.stream.stop()
                    self.note(
                        "stream", f"kernel stream stopped: CUPTI refused to resume it after a window ({e})"
                    )

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
        self.prof = ProfilerSession(torch, self.cuda)
        self.prof.start()
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
        calls = self.tagger.calls
        session, self.prof, self.tagger = self.prof, None, None
        result = session.stop()
        closed_ns = session.stopped_ns or time.time_ns()
        if self.stream is not None and self.cuda:
            # Kineto finalizes CUPTI at the exit of the next CUDA call; make it happen before resuming
            self.torch.cuda.synchronize()
        self._resume_stream()
        stall = self.stall_ns + time.perf_counter_ns() - t0
        last_step = len(self.sched.step_times_ns) - 1
        steps = last_step - self.window_first_step + 1
        window = (
            self.window_id, int(self.sched.open_mode), self.window_opened_ns, closed_ns,
            self.window_first_step if steps > 0 else -1, last_step if steps > 0 else -1, stall,
        )  # fmt: skip
        self.sched.closing()
        if background:
            self.converting = threading.Thread(target=self._guard(self._convert_and_send),
                                               args=(result, window, max(0, steps), samples, calls),
                                               name="brrrtui-convert",
                                               daemon=True)  # fmt: skip
            self.converting.start()
        else:
            self._convert_and_send(result, window, max(0, steps), samples, calls)

    def _convert_and_send(
        self, result: Any, window: tuple, steps: int, samples: list[tuple[int, int]], calls: int
    ) -> None:
        from brrrtui.capture.lines import SPAN_PREFIX

        t0 = time.perf_counter_ns()
        events = result.events()
        rows = convert_events(events, window[0], self.strings, SPAN_PREFIX)
        del result, events  # free Kineto's copy before the next window
        convert_ns = time.perf_counter_ns() - t0
        n_events = sum(len(r) for r in rows.values())
        cost = self.sched.settled(
            window[2], window[3], time.time_ns(), window[6], convert_ns, n_events, steps, calls
        )
        # The stream's thread sends too: `lock` from take_new() to the send keeps every string id in or
        # before the first batch that uses it (windows.Interner).
        with self.strings.lock:
            if not self.device_sent and self.cuda:
                self.channel.send({"type": "device", **device_facts(self.torch)})
                self.device_sent = True
            self.channel.send({
                "type": "batch", "windows": [(*window, n_events)], "strings": self.strings.take_new(),
                "lines": self.lines.take_new_rows(), "capture_costs": [(window[0], convert_ns, int(cost))],
                "line_samples": [(window[0], lid, t) for lid, t in samples], **rows,
            })  # fmt: skip

    # ---------------------------------------------------------------- the script's own profiler
    def _patch_user_profiler_entry_points(self) -> None:
        """torch.profiler.profile and the legacy torch.autograd.profiler.profile both prepare their Kineto
        session in `torch.autograd.profiler.profile._prepare_trace`; brrrtui's own windows never call it."""
        legacy = importlib.import_module("torch.autograd.profiler").profile
        prepare = legacy._prepare_trace
        agent = self

        def _prepare_trace(*args: Any, **kwargs: Any) -> Any:
            agent._guard(agent._step_aside)()
            return prepare(*args, **kwargs)

        _prepare_trace.__wrapped__ = prepare  # type: ignore[attr-defined]
        legacy._prepare_trace = _prepare_trace

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
        self.note("aside", "the script runs torch.profiler itself: brrrtui stepped aside (no more windows; "
                  "step times are still recorded)")  # fmt: skip

    # ---------------------------------------------------------------- end of run
    def finish(self) -> None:
        """The script ended (normally or not): close the open window, send the last steps and calibration."""
        if self.dead:
            return
        try:
            if self.prof is not None:
                self.close_window(background=False)
            if self.converting is not None:
                self.converting.join()
            with self.stream_lock:
                self.want_stream = False
                if self.stream is not None:
                    self.stream.stop()  # before calibration: its kernels are not the script's
                    st = self.stream
                    self.channel.send({"type": "stream_stats", "records": st.records, "bytes": st.bytes,
                                       "flush_ns_max": st.flush_ns_max, "decode_ns": st.decode_ns,
                                       "queue_ns_max": st.queue_ns_max,
                                       "write_ns_max": self.channel.blocked_ns_max,
                                       "forced_flushes": st.forced_flushes, "late_buffers": st.late_buffers,
                                       "error": st.error, "cupti_api": st.cupti.api_version})  # fmt: skip
            self.flush_steps()
            if self.cuda and self.calibrate_at_exit and os.environ.get("BRRRTUI_NO_CALIBRATE") != "1":
                from brrrtui.capture.calibrate import measure_peaks

                self.channel.send({"type": "peaks", "peaks": measure_peaks(self.torch)})
        except Exception as e:  # noqa: BLE001
            self.note("finish", f"capture could not finish cleanly: {e.__class__.__name__}: {e}")
        finally:
            self.dead = True


def device_facts(torch: Any) -> dict[str, Any]:
    idx = torch.cuda.current_device()
    p = torch.cuda.get_device_properties(idx)
    return {
        "device": {
            "name": p.name,
            "num_sms": p.multi_processor_count,
            "compute_capability": f"{p.major}.{p.minor}",
            "total_memory_bytes": p.total_memory,
            "l2_bytes": getattr(p, "L2_cache_size", None),
            "cuda": torch.version.cuda,
        },
        "torch_version": str(torch.__version__),  # a TorchVersion would make the recorder import torch
    }
