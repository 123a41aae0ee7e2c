"""The recorder: runs the script in a child process, appends everything it captures to the recording as it
arrives, samples GPU telemetry, and tells a live UI (UI-free itself; see brrrtui.record.feed).

    user script (child) --frames over a pipe--> reader thread --queue--> writer thread --> RecordingWriter
                                                        (one transaction a batch) \\-> Feed (live UI) / stderr
    pynvml sampler thread (5-10 Hz) --------------------------> RecordingWriter + Feed

Signals reach the script as they would without brrrtui. A terminal's Ctrl-C (or hang-up) goes to the whole
foreground process group, the script and brrrtui alike; `kill PID` reaches brrrtui alone. The child's Python
writes the number of every signal it catches to a pipe the recorder reads (capture/bootstrap.py), so when
brrrtui receives SIGINT, SIGTERM or SIGHUP it passes the signal on only if the script did not get its own copy:
one Ctrl-C is one SIGINT to the script either way; a second Ctrl-C stops the script at once (SIGKILL).

The live run follows the script's process, not its output: its exit is seen when it happens, even while a
process it started holds its stdout open; brrrtui waits a moment for the script's last output, then goes on.
The recorded status says how the run ended (`run_status`): exit code, uncaught exception, signal, and a write
error (disk full) that cut the recording short; a small reserve kept inside the recording lets that last
status land even on a full disk.
"""

from __future__ import annotations

import errno
import json
import os
import queue
import signal
import sqlite3
import subprocess
import sys
import threading
import time
from collections import deque
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from typing import IO, Any

from analyzers.errors import InputError
from brrrtui import __version__
from brrrtui.capture.bootstrap import UNCAUGHT
from brrrtui.contract.config import WindowConfig
from brrrtui.contract.messages import (
    Bye,
    CaptureError,
    CompiledKernels,
    CompileEvent,
    DeviceFacts,
    Hello,
    MeasuredPeaks,
    Message,
    Note,
    StepBatch,
    StreamBatch,
    StreamStats,
    WindowBatch,
)
from brrrtui.contract.protocol import read_frames
from brrrtui.contract.schema import GPU_SCHEMA, STEP_SCHEMA, WINDOW_SCHEMA, GpuKind, WindowMode, column
from brrrtui.record import feed as feeds
from brrrtui.record.feed import Exited, Feed, LogLine, StepsAdded, TelemetrySample, WindowAdded
from brrrtui.record.fold import StreamFolder
from brrrtui.record.output import read_lines
from brrrtui.record.sink import Sink
from brrrtui.record.stream_side import StreamSide
from brrrtui.record.targets import check_out_path, check_target
from brrrtui.record.telemetry import TelemetrySampler
from brrrtui.recording.store import RecordingWriter, device_meta, peaks_meta

OUTPUT_TAIL = 200  # the script's last output lines kept in live mode (printed after the UI, stored in meta)
INBOX_MESSAGES = 64  # frames read but not yet written: a stream batch is 1-10 MB
FORWARDED = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)  # passed on to the script unless it got its own
COPY_WAIT_S = 0.3  # how long the script's copy of a signal may take to show in its receipts
COPY_SINCE_S = 1.0  # a receipt this long before brrrtui's own signal is the same signal
FALLBACK_SIGINT_S = 2.0  # no receipts (a launcher, not brrrtui's child): pass SIGINT on after this long
FRAMES_GRACE_S = 1.0  # after the script's exit: how long a process it forked may hold the channel open
OUTPUT_GRACE_S = 0.5  # after the script's exit: how long its last output lines may take to arrive
CHANNEL_CHECK_S = 0.5  # the channel ended without a goodbye: how long before a live script is reported
RESERVE_KEY = "space_reserve"  # a meta row freed to make room for the last status on a full disk
RESERVE_BYTES = 64 * 1024
FULL_ERRNOS = (errno.ENOSPC, errno.EDQUOT, errno.EFBIG)
BOOTSTRAP = os.path.join(
    os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "capture", "bootstrap.py"
)


@dataclass
class RunSpec:
    target: list[str]  # [SCRIPT, *ARGS] or ["-m", MODULE, *ARGS]
    out_path: str
    python: str = sys.executable
    window: WindowConfig = field(default_factory=WindowConfig)
    calibrate: bool = True
    capture_output: bool = False  # True under the TUI: the script's stdout/stderr become LogLines
    force: bool = False  # replace an existing file that is not a brrrtui recording (never the script)


class Recorder:
    def __init__(
        self, spec: RunSpec, feed: Feed | None = None, progress: Callable[[str], None] | None = None
    ):
        self.spec = spec
        self.feed = feed
        self.progress = progress or (lambda text: None)
        self.sink = Sink(spec.out_path, self._write_failed)
        self.replaced = False  # an earlier file at out_path was replaced
        self.child: subprocess.Popen[bytes] | None = None
        self.threads: list[threading.Thread] = []
        self.windows = 0
        self.kernels = 0
        self.steps = 0
        self.compiled_kernels: list[list[Any]] = []  # meta `compiled_kernels`: every graph's kernel lines
        self.compile_events: dict[str, dict[tuple[int, str], int]] = {}  # kind -> (line, reason) -> count
        self.notes: list[str] = []
        self.script_exit: int | None = None
        self.exit_code: int | None = None
        self.sampler: TelemetrySampler | None = None
        self.interrupts = 0
        self.uncaught = ""  # the type of the exception that ended the script, if one did
        self.said_bye = False
        self.write_errors: list[str] = []  # what the sink said when a write failed
        self.passed_on: list[str] = []  # signals brrrtui received and sent the script
        self.received: list[str] = []  # signals brrrtui received
        self._receipts: deque[tuple[int, float]] = deque(maxlen=256)  # (signal, monotonic) the script caught
        self._receipts_cv = threading.Condition()
        self.has_receipts = False
        self._start_lock = threading.Lock()
        self._early: list[int] = []  # signals received before the script started
        self._frames_thread: threading.Thread | None = None
        self._output_threads: list[threading.Thread] = []
        self.streamed = StreamSide(
            self.sink, StreamFolder() if spec.window.stream else None, self.progress, feed
        )
        self.stream = self.streamed.latency
        # The reader only reads, so the script's sends (a window's, on its main thread) never wait for a commit
        # (up to 80 ms for a stream batch on the H200 box); the writer appends in order.
        self.inbox: queue.Queue[Message | None] = queue.Queue(maxsize=INBOX_MESSAGES)
        self.inbox_max = 0
        self.write_ns_max = 0
        self.output_tail: deque[tuple[str, str]] = deque(maxlen=OUTPUT_TAIL)  # (stream, line), live mode
        self._tail_lock = threading.Lock()
        self._tail_closed = (
            False  # the run has ended: later lines (of a process it started) go to the feed only
        )
        self.result: int | None = None  # wait()'s return, once the script has ended
        self._waiter: threading.Thread | None = None

    @property
    def writer(self) -> RecordingWriter | None:
        """The recording's writer now (for tools and tests; the recorder writes through `sink`)."""
        return self.sink.writer

    # ------------------------------------------------------------------ start
    def start(self) -> None:
        check_target(self.spec.target)
        self._open_writer()
        read_fd, write_fd = os.pipe()
        sig_read, sig_write = os.pipe()
        env = dict(os.environ)
        env["BRRRTUI_FD"] = str(write_fd)
        env["BRRRTUI_SIGNAL_FD"] = str(sig_write)
        env["BRRRTUI_CONFIG"] = json.dumps(asdict(self.spec.window))
        env["BRRRTUI_CALIBRATE"] = "1" if self.spec.calibrate else "0"
        if self.spec.capture_output:
            env["PYTHONUNBUFFERED"] = "1"  # so the log pane shows lines as they are printed
        out = subprocess.PIPE if self.spec.capture_output else None
        try:
            child = subprocess.Popen(
                [self.spec.python, BOOTSTRAP, *self.spec.target],
                env=env,
                pass_fds=(write_fd, sig_write),
                stdout=out,
                stderr=out,
                stdin=None if not out else subprocess.DEVNULL,
            )
        except OSError as e:
            os.close(read_fd)
            os.close(sig_read)
            self.sink.close()
            raise InputError(f"cannot start {self.spec.python}: {e.strerror}") from None
        finally:
            os.close(write_fd)
            os.close(sig_write)
        with self._start_lock:  # a signal brrrtui received while the script started is its now
            self.child, early, self._early = child, self._early, []
        for sig in early:
            self._send(sig)
        self._write_meta(pid=child.pid)
        self.has_receipts = True
        threading.Thread(
            target=self._read_receipts, args=(sig_read,), name="brrrtui-signals", daemon=True
        ).start()
        self._thread(self._read_frames, read_fd, name="brrrtui-reader")
        self._frames_thread = self.threads[-1]
        self._thread(self._write_frames, name="brrrtui-writer")
        if self.spec.capture_output:
            self._thread(self._read_output, self.child.stdout, "stdout", name="brrrtui-stdout")
            self._thread(self._read_output, self.child.stderr, "stderr", name="brrrtui-stderr")
            self._output_threads = self.threads[-2:]
        self.sampler = TelemetrySampler(self._on_telemetry)
        if self.sampler.available:
            self._write_meta(driver=self.sampler.driver, nvml_device=self.sampler.device_name)
            self.sampler.start()
        else:
            self._write_meta(telemetry=f"unavailable: {self.sampler.reason}")

    def _open_writer(self) -> None:
        path = self.spec.out_path
        self.replaced = check_out_path(path, self.spec.target, self.spec.force)
        self.sink.open()  # locked: a second recorder of the same path is refused here, before anything runs
        if self.replaced:
            self._say(f"replacing the earlier file {path}")
        self._write_meta(
            argv=self.spec.target,
            cwd=os.getcwd(),
            python=self.spec.python,
            brrrtui_version=__version__,
            started_at_ns=time.time_ns(),
            status="running",
            window_config=asdict(self.spec.window),
        )
        self._reserve()

    def _thread(self, target: Callable[..., Any], *args: Any, name: str) -> None:
        t = threading.Thread(target=target, args=args, name=name, daemon=True)
        t.start()
        self.threads.append(t)

    # ------------------------------------------------------------------ inputs
    def _write_meta(self, **items: Any) -> None:
        self.sink.set_meta(**items)

    def _read_frames(self, fd: int) -> None:
        """Until the script's goodbye (its last message: a process it forked may hold the pipe open after it)
        or the end of the pipe. An end without a goodbye while the script runs on: it closed the channel."""
        frames = read_frames(fd)
        try:
            for msg in frames:
                # waits only when INBOX_MESSAGES are queued: the disk has stalled that long
                self.inbox.put(msg)
                self.inbox_max = max(self.inbox_max, self.inbox.qsize())
                if isinstance(msg, Bye):
                    self.said_bye = True
                    break
        finally:
            frames.close()
            self.inbox.put(None)
        if not self.said_bye and self._still_running(CHANNEL_CHECK_S):
            self._note(
                "the script closed brrrtui's capture channel while it ran on (os.closerange, or exec of another "
                "program): nothing it did after that is recorded"
            )

    def _still_running(self, wait_s: float) -> bool:
        """Whether the script is still alive `wait_s` from now (a killed script's pipe ends a moment before its
        exit can be seen). Never reaps it: Popen.wait does."""
        deadline = time.monotonic() + wait_s
        while True:
            child = self.child
            if child is None or child.returncode is not None:
                return False
            try:
                if os.waitid(os.P_PID, child.pid, os.WEXITED | os.WNOHANG | os.WNOWAIT) is not None:
                    return False
            except ChildProcessError:  # reaped already
                return False
            if time.monotonic() >= deadline:
                return True
            time.sleep(0.02)

    def _write_frames(self) -> None:
        """Appends what the reader queued, in order. After a failure it drains the queue and drops what comes,
        so the script is never left blocked on a full pipe."""
        failed = False
        while (msg := self.inbox.get()) is not None:
            if failed:
                continue
            t0 = time.perf_counter_ns()
            try:
                self._handle(msg)
            except Exception as e:  # noqa: BLE001 - disk full, file removed, a bug: say so once, the script runs on
                failed = True
                self._note(f"cannot append to the recording any more: {e!r}")
            self.write_ns_max = max(self.write_ns_max, time.perf_counter_ns() - t0)

    def _handle(self, msg: Message) -> None:
        if isinstance(msg, StepBatch):
            self._on_steps(msg)
        elif isinstance(msg, WindowBatch):
            self._on_window(msg)
        elif isinstance(msg, StreamBatch):
            self.streamed.on_batch(msg)
        elif isinstance(msg, DeviceFacts):
            self._write_meta(device=device_meta(msg), torch_version=msg.torch_version)
        elif isinstance(msg, MeasuredPeaks):
            self._write_meta(peaks=peaks_meta(msg))
        elif isinstance(msg, Hello):
            self._write_meta(child_python=msg.python_version)
        elif isinstance(msg, Note) and msg.text.startswith(UNCAUGHT):
            self.uncaught = msg.text[len(UNCAUGHT) :]  # in the status, after the script's own traceback
        elif isinstance(msg, Note):
            self._note(msg.text)
        elif isinstance(msg, CaptureError):
            self._write_meta(capture_error=msg.traceback)
        elif isinstance(msg, StreamStats):
            self._on_stream_stats(msg)
        elif isinstance(msg, CompiledKernels):
            self._on_compiled_kernels(msg)
        elif isinstance(msg, CompileEvent):
            self._on_compile_event(msg)
        elif isinstance(msg, Bye):
            self.script_exit = msg.exit_code

    def _on_compiled_kernels(self, msg: CompiledKernels) -> None:  # meta: every graph's rows so far
        self._append({"lines": msg.lines})
        self.compiled_kernels += [list(r) for r in msg.rows]
        self._write_meta(compiled_kernels=self.compiled_kernels)

    def _on_compile_event(
        self, msg: CompileEvent
    ) -> None:  # meta graph_breaks / recompiles: [line, reason, n]
        self._append({"lines": msg.lines})
        events = self.compile_events.setdefault(msg.kind, {})
        events[(msg.line, msg.reason)] = events.get((msg.line, msg.reason), 0) + 1
        key = "recompiles" if msg.kind == "recompile" else "graph_breaks"
        self._write_meta(**{key: [[line, reason, n] for (line, reason), n in events.items()]})

    def _append(self, batch: dict[str, Any]) -> None:
        self.sink.append(batch)

    def _on_steps(self, msg: StepBatch) -> None:
        self._append({"steps": msg.steps})
        self.streamed.on_steps(msg.steps)
        if msg.steps:
            self.steps += len(msg.steps)
            if self.feed:
                last_step = msg.steps[-1][column(STEP_SCHEMA, "step")]
                self.feed.put(StepsAdded(last_step, len(msg.steps)))

    def _on_window(self, msg: WindowBatch) -> None:
        self._append(
            {
                "windows": [msg.window],
                "capture_costs": [msg.capture_cost],
                "strings": msg.strings,
                "lines": msg.lines,
                "line_samples": msg.line_samples,
                "gpu": msg.gpu,
                "runtime": msg.runtime,
                "ops": msg.ops,
                "spans": msg.spans,
            }
        )
        self.streamed.on_window(msg)
        window = dict(zip(WINDOW_SCHEMA, msg.window, strict=True))
        kind = column(GPU_SCHEMA, "kind")
        n_kernels = sum(1 for r in msg.gpu if r[kind] == GpuKind.KERNEL)
        self.windows += 1
        self.kernels += n_kernels
        first, last = window["first_step"], window["last_step"]
        steps = (
            f"steps {first}–{last}"
            if first >= 0
            else "no step"
            if window["mode"] == WindowMode.STEPS
            else "time-based"
        )
        self._say(
            f"window {window['window'] + 1}: {steps}, {n_kernels:,} kernels, {len(msg.ops):,} ops, "
            f"stall {window['stall_ns'] / 1e6:.0f} ms"
        )
        if self.feed:
            self.feed.put(WindowAdded(window["window"], n_kernels, len(msg.ops)))

    def _on_stream_stats(self, msg: StreamStats) -> None:
        self._write_meta(stream=self.streamed.meta(msg, self.write_ns_max, self.inbox_max))
        if msg.error:
            self._note(f"kernel stream stopped: {msg.error}")

    def _note(self, text: str) -> None:
        self.notes.append(text)
        self._write_meta(notes=self.notes)
        self._say(text)
        if self.feed:
            self.feed.put(LogLine("brrrtui", text))

    def _say(self, text: str) -> None:
        """A progress line; a terminal that hung up (SIGHUP) must not stop the recording from finishing."""
        try:
            self.progress(text)
        except OSError:
            pass

    def _write_failed(self, text: str) -> None:
        self.write_errors.append(text)
        self._note(text)

    def _reserve(self) -> None:
        """Room for the last status: a meta row the final write frees when the disk is full (`_last_status`)."""
        row = (RESERVE_KEY, json.dumps(" " * RESERVE_BYTES))
        self.sink.transact(
            lambda w: w.db.execute("INSERT OR REPLACE INTO meta(key, value) VALUES (?, ?)", row)
        )

    def _drop_reserve(self) -> None:
        self.sink.transact(lambda w: w.db.execute("DELETE FROM meta WHERE key = ?", (RESERVE_KEY,)))

    def _read_output(self, stream: IO[bytes], name: str) -> None:
        read_lines(stream, lambda lines, dropped: self._output_lines(name, lines, dropped), OUTPUT_TAIL)

    def _output_lines(self, name: str, lines: list[str], dropped: int) -> None:
        """A block of the script's output (record/output.py): its last lines, after `dropped` others."""
        with self._tail_lock:
            if not self._tail_closed:
                self.output_tail.extend((name, text) for text in lines)
        if self.feed:
            self.feed.put(LogLine(name, "", lines, dropped))

    def _on_telemetry(self, rows: list[tuple]) -> None:
        self.sink.append({"telemetry": rows})
        if self.feed and rows:
            self.feed.put(TelemetrySample(*rows[-1]))

    # ------------------------------------------------------------------ stop
    def on_signal(self, sig: int) -> None:
        """brrrtui received SIGINT, SIGTERM or SIGHUP (in a signal handler: returns at once). The script gets
        it as it would without brrrtui: once — passed on only if it did not get its own copy. A second SIGINT
        stops the script at once."""
        t = time.monotonic()
        self.received.append(signal_name(sig))
        if sig == signal.SIGINT:
            self.interrupts += 1
            if self.interrupts >= 2:
                self._kill()
                return
        threading.Thread(target=self._pass_on, args=(sig, t), name="brrrtui-signal", daemon=True).start()

    def interrupt(self, now: bool = False) -> None:
        """Ctrl-C: the first stops the script, the second kills it. `now`: the live UI's Ctrl-C key, which
        its raw terminal sent nobody as a signal: the script gets SIGINT at once."""
        if not now:
            self.on_signal(signal.SIGINT)
            return
        self.interrupts += 1
        if self.interrupts >= 2:
            self._kill()
        elif self._running():
            self._say("stopping the script; Ctrl-C again to stop brrrtui now (the recording is kept)")
            self._send(signal.SIGINT)

    def _pass_on(self, sig: int, t: float) -> None:
        with self._start_lock:
            if self.child is None:
                self._early.append(sig)
                return
        if sig == signal.SIGINT and self._running():
            self._say("stopping the script; Ctrl-C again to stop brrrtui now (the recording is kept)")
        if not self._running() or self._got_own_copy(sig, t):
            return
        if sig == signal.SIGINT and self.interrupts >= 2:
            return
        self._send(sig)

    def _got_own_copy(self, sig: int, t: float) -> bool:
        """Whether the script received `sig` itself, at about time `t` (when brrrtui received its own): a
        receipt it wrote (consumed, so a second signal needs a second receipt), or the signal pending in the
        kernel for it (queued to a process blocked in a driver call). Without receipts (a launcher started
        here, not bootstrap.py): SIGINT is passed on FALLBACK_SIGINT_S later, if the script still runs."""
        if not self.has_receipts:
            if sig != signal.SIGINT:
                return False
            time.sleep(FALLBACK_SIGINT_S)
            return self.interrupts != 1
        deadline = t + COPY_WAIT_S
        with self._receipts_cv:
            while True:
                for i, (got, at) in enumerate(self._receipts):
                    if got == sig and at >= t - COPY_SINCE_S:
                        del self._receipts[i]
                        return True
                if self.child is not None and signal_pending(self.child.pid, sig):
                    return True
                left = deadline - time.monotonic()
                if left <= 0:
                    return False
                self._receipts_cv.wait(left)

    def _read_receipts(self, fd: int) -> None:
        """The signals the script caught, one byte each, as they arrive (until it exits)."""
        with os.fdopen(fd, "rb", buffering=0) as f:
            while data := f.read(256):
                now = time.monotonic()
                with self._receipts_cv:
                    self._receipts.extend((b, now) for b in data if b in FORWARDED)
                    self._receipts_cv.notify_all()

    def _send(self, sig: int) -> None:
        child = self.child
        if child is not None and child.returncode is None:
            try:
                child.send_signal(sig)
                self.passed_on.append(signal_name(sig))
            except OSError:
                pass

    def _kill(self) -> None:
        child = self.child
        if child is not None and child.returncode is None:
            try:
                child.kill()
            except OSError:
                pass

    def _running(self) -> bool:
        return self.child is not None and self.child.poll() is None

    def terminate(self) -> None:
        if self.child is not None and self.child.poll() is None:
            self.child.terminate()
            try:
                self.child.wait(5)
            except subprocess.TimeoutExpired:
                self.child.kill()

    def wait_in_background(self) -> None:
        """Live: wait on a thread, so the exit reaches the feed and recording (and is reaped) when it happens."""
        self._waiter = threading.Thread(target=self._wait_for_result, name="brrrtui-waiter", daemon=True)
        self._waiter.start()

    def _wait_for_result(self) -> None:
        self.result = self.wait()

    def finish(self) -> int:
        """After `wait_in_background`: stop the script if it still runs; wait()'s exit code. A script that was
        passed SIGTERM or SIGHUP is left to end as that signal makes it, as it would without brrrtui."""
        assert self._waiter is not None
        if not any(name != "SIGINT" for name in self.passed_on + self.received):
            self.terminate()
        self._waiter.join()
        return self.result if self.result is not None else 1

    def _wait_child(self) -> int:
        assert self.child is not None
        while True:
            try:
                return self.child.wait()
            except KeyboardInterrupt:  # no handler installed (a caller other than the CLI)
                self.interrupt()

    def wait(self) -> int:
        """Wait for the script, finish the recording, and return the exit code brrrtui should exit with. It
        follows the script's process: once that has exited, the channel and output readers get a moment to
        drain (a process the script started may hold them open for ever), then the run is finished."""
        returncode = self._wait_child()
        ended_ns = time.time_ns()
        frames = self._frames_thread
        if frames is not None:
            frames.join(FRAMES_GRACE_S)
            if frames.is_alive():  # a process the script forked holds the channel, and no goodbye came
                self.inbox.put(None)
        for t in self.threads:
            if t not in self._output_threads:
                t.join(timeout=30)
        deadline = time.monotonic() + OUTPUT_GRACE_S
        for t in self._output_threads:
            t.join(timeout=max(0.0, deadline - time.monotonic()))
        with self._tail_lock:
            self._tail_closed = True
        if self.sampler:
            self.sampler.stop()
        final, code = self._final_meta(returncode, ended_ns)
        errors = len(self.write_errors)
        self.exit_code = returncode
        self._write_meta(**final)
        if self.output_tail:
            self._write_meta(output_tail=[f"{stream}: {text}" for stream, text in self.output_tail])
        if self.stream.records:
            self._say(
                f"kernel stream: {self.stream.records:,} GPU activities between windows, delivered "
                f"p50 {self.stream.percentile(50):.0f} ms / p99 {self.stream.percentile(99):.0f} ms "
                "after they ended"
            )
        if self.feed:
            self.feed.put(Exited(returncode, feeds.last_error(self.output_tail) if returncode else ""))
        self.streamed.finish()
        if len(self.write_errors) > errors:  # these last writes failed: the status says so
            final, code = self._final_meta(returncode, ended_ns)
            self._write_meta(**final)
        if self.sink.dead:
            self._last_status({**final, "notes": self.notes})
        else:
            self._drop_reserve()
        self.sink.close()
        return code

    def _final_meta(self, returncode: int, ended_ns: int) -> tuple[dict[str, Any], int]:
        """The recording's last meta (status, outcome, exit code, end time) and brrrtui's exit code."""
        cut_short = self.write_errors if self.sink.dead else []  # not when it continued in a sibling file
        status, outcome = run_status(returncode, self.uncaught, cut_short, self._full_disk())
        code = 128 - returncode if returncode < 0 else returncode
        if self.interrupts >= 2:  # the user stopped brrrtui itself
            status, code = f"{status} (stopped with Ctrl-C)", 130
        if self.passed_on or self.received:
            outcome["signals_received"] = list(self.received)
            outcome["signals_passed_on"] = list(self.passed_on)
        final: dict[str, Any] = {"status": status, "exit_code": returncode, "ended_at_ns": ended_ns}
        final["outcome"] = outcome
        if status != "finished":
            final["load_notes"] = [f"the script's run ended: {status}"]
        return final, code

    def _full_disk(self) -> bool:
        """Whether the write errors so far were a full disk (or quota, or file size limit)."""
        if not self.write_errors:
            return False
        text = " ".join(self.write_errors)
        if any(w in text for w in ("disk is full", "No space left", "quota", "File too large")):
            return True
        try:
            st = os.statvfs(os.path.dirname(os.path.abspath(self.sink.path)))
        except OSError:
            return False
        return st.f_bavail * st.f_frsize < RESERVE_BYTES

    def _last_status(self, items: dict[str, Any]) -> None:
        """The writes failed (a full disk): the final status written anyway, in place of the reserve row, with
        the journal in memory (a rollback journal would need room on the disk). What a reader then says is
        what happened, not "killed or crashed"."""
        writer = self.sink.writer
        if writer is None:
            return
        with self.sink.lock:
            db = writer.db
            try:
                db.execute("PRAGMA journal_mode=MEMORY")
                db.execute("BEGIN")
                db.execute("DELETE FROM meta WHERE key = ?", (RESERVE_KEY,))
                db.executemany(
                    "INSERT OR REPLACE INTO meta(key, value) VALUES (?, ?)",
                    [(k, json.dumps(v)) for k, v in items.items()],
                )
                db.execute("COMMIT")
            except sqlite3.Error:
                try:
                    db.execute("ROLLBACK")
                except sqlite3.Error:
                    pass


def run_status(
    returncode: int, uncaught: str = "", write_errors: list[str] | None = None, full_disk: bool = False
) -> tuple[str, dict[str, Any]]:
    """How the run ended, as the recording's `status` and its `outcome` (the same, as fields): `finished`,
    `exited with code 3`, `raised ValueError (exit code 1)`, `killed by SIGTERM`, each followed by
    `; recording cut short: disk full` when its writes failed."""
    outcome: dict[str, Any] = {"exit_code": returncode}
    if returncode < 0:
        status = f"killed by {signal_name(-returncode)}"
        outcome["signal"] = signal_name(-returncode)
    elif uncaught:
        status = f"raised {uncaught} (exit code {returncode})"
        outcome["exception"] = uncaught
    elif returncode:
        status = f"exited with code {returncode}"
    else:
        status = "finished"
    if write_errors:
        why = "disk full" if full_disk else "write error"
        status += f"; recording cut short: {why}"
        outcome["write_error"] = write_errors[0]
        outcome["disk_full"] = full_disk
    return status, outcome


def signal_name(number: int) -> str:
    try:
        return signal.Signals(number).name
    except ValueError:
        return f"signal {number}"


def signal_pending(pid: int, sig: int) -> bool:
    """Whether `sig` is queued for process `pid` and not yet delivered (Linux's /proc status masks)."""
    try:
        with open(f"/proc/{pid}/status") as f:
            for line in f:
                if line.startswith(("SigPnd:", "ShdPnd:")) and int(line.split()[1], 16) >> (sig - 1) & 1:
                    return True
    except (OSError, ValueError, IndexError):
        pass
    return False
