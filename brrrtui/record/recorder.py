"""The recorder: runs the script in a child process, appends everything it captures to the recording as it
arrives, samples GPU telemetry, and tells a live UI (UI-free itself; see brrrtui.record.feed).

    user script (child) --frames over a pipe--> reader thread --queue--> writer thread --> RecordingWriter
                                                        (one transaction a batch) \\-> Feed (live UI) / stderr
    pynvml sampler thread (5-10 Hz) --------------------------> RecordingWriter + Feed

Signals: brrrtui.record.lifecycle; the end of the run and its recorded status: brrrtui.record.ending.
"""

from __future__ import annotations

import functools
import json
import os
import queue
import subprocess
import sys
import threading
import time
from collections import deque
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from typing import IO, Any

from brrrtui import __version__
from brrrtui.contract.config import WindowConfig
from brrrtui.contract.errors import InputError
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
from brrrtui.record import ending
from brrrtui.record.ending import Ending
from brrrtui.record.feed import Feed, LogLine, StepsAdded, TelemetrySample, WindowAdded
from brrrtui.record.fold import StreamFolder
from brrrtui.record.lifecycle import UNCAUGHT, RunControl
from brrrtui.record.output import Waiting, read_lines
from brrrtui.record.sink import Sink
from brrrtui.record.stream_side import StreamSide
from brrrtui.record.targets import check_target
from brrrtui.record.telemetry import TelemetrySampler
from brrrtui.recording.store import RecordingWriter, device_meta, peaks_meta

OUTPUT_TAIL = 200  # the script's last output lines kept in live mode (printed after the UI, stored in meta)
INBOX_MESSAGES = 64  # frames read but not yet written: a stream batch is 1-10 MB
CHANNEL_CHECK_S = 0.5  # the channel ended without a goodbye: how long before a live script is reported
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


class Recorder(Ending):
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
        self.uncaught = ""  # the type of the exception that ended the script, if one did
        self.said_bye = False
        self.write_errors: list[str] = []  # what the sink said when a write failed
        self.control = RunControl(lambda: self.child, self._say)
        self._frames_thread: threading.Thread | None = None
        self._output_threads: list[threading.Thread] = []
        self._waiting = {"frames": Waiting(), "stdout": Waiting(), "stderr": Waiting()}
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
        self._tail_closed = False  # the run ended: later lines (of a process it started) go to the feed only
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
            self.child = child = subprocess.Popen(
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
            self.sink.abort()  # the earlier file, if any, stays as it was
            raise InputError(f"cannot start {self.spec.python}: {e.strerror}") from None
        finally:
            os.close(write_fd)
            os.close(sig_write)
        self._write_meta(pid=child.pid)
        self._say_where()
        relay = self.control.relay
        relay.active = True
        threading.Thread(target=relay.read, args=(sig_read,), name="brrrtui-signals", daemon=True).start()
        self._thread(self._read_frames, read_fd, name="brrrtui-reader")
        self._frames_thread = self.threads[-1]
        self._thread(self._write_frames, name="brrrtui-writer")
        if self.spec.capture_output:
            self._thread(self._read_output, child.stdout, "stdout", name="brrrtui-stdout")
            self._thread(self._read_output, child.stderr, "stderr", name="brrrtui-stderr")
            self._output_threads = self.threads[-2:]
        self.sampler = TelemetrySampler(self._on_telemetry)
        if self.sampler.available:
            self._write_meta(driver=self.sampler.driver, nvml_device=self.sampler.device_name)
            self.sampler.start()
        else:
            self._write_meta(telemetry=f"unavailable: {self.sampler.reason}")

    def _open_writer(self) -> None:
        # checked and locked: a second recorder of the same path is refused here, before anything runs
        self.replaced = self.sink.open(self.spec.target, self.spec.force)
        self._write_meta(
            argv=self.spec.target,
            cwd=os.getcwd(),
            python=self.spec.python,
            brrrtui_version=__version__,
            started_at_ns=time.time_ns(),
            status="running",
            window_config=asdict(self.spec.window),
        )
        ending.reserve(self.sink)

    def _say_where(self) -> None:
        """Once the script runs: an earlier file is replaced when the recording ends; until then, where it is."""
        if self.replaced:
            self._say(f"replacing the earlier file {self.spec.out_path}")
        if self.sink.path != self.spec.out_path:
            self._say(f"until the run ends, the recording is written to {self.sink.path}")

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
        frames, waiting = read_frames(fd), self._waiting["frames"]
        try:
            while True:
                waiting.since = time.monotonic()
                msg = next(frames, None)
                waiting.since = None
                if msg is None:
                    break
                # waits only when INBOX_MESSAGES are queued: the disk has stalled that long
                self.inbox.put(msg)
                self.inbox_max = max(self.inbox_max, self.inbox.qsize())
                if isinstance(msg, Bye):
                    self.said_bye = True
                    break
        finally:
            del frames  # the generator, dropped at the goodbye, closes the pipe
            self.inbox.put(None)
        if not self.said_bye and ending.still_running(self.child, CHANNEL_CHECK_S):
            self._note(
                "the script closed brrrtui's capture channel while it ran on (os.closerange, or exec of another "
                "program): nothing it did after that is recorded"
            )

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

    def _read_output(self, stream: IO[bytes], name: str) -> None:
        on_lines = functools.partial(self._output_lines, name)
        read_lines(stream, on_lines, OUTPUT_TAIL, waiting=self._waiting[name])

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
