"""The recorder: runs the script in a child process, appends everything it captures to the recording as it
arrives, samples GPU telemetry, and tells a live UI (UI-free itself; see brrrtui.record.feed).

    user script (child) --frames over a pipe--> reader thread --queue--> writer thread --> RecordingWriter
                                                        (one transaction a batch) \\-> Feed (live UI) / stderr
    pynvml sampler thread (5-10 Hz) --------------------------> RecordingWriter + Feed
"""

from __future__ import annotations

import json
import os
import queue
import signal
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
from brrrtui.record.targets import check_target
from brrrtui.record.telemetry import TelemetrySampler
from brrrtui.recording.store import RecordingWriter, device_meta, peaks_meta

OUTPUT_TAIL = 200  # the script's last output lines kept in live mode (printed after the UI, stored in meta)
INBOX_MESSAGES = 64  # frames read but not yet written: a stream batch is 1-10 MB
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
        self.sink = Sink(spec.out_path, self._note)
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
        env = dict(os.environ)
        env["BRRRTUI_FD"] = str(write_fd)
        env["BRRRTUI_CONFIG"] = json.dumps(asdict(self.spec.window))
        env["BRRRTUI_CALIBRATE"] = "1" if self.spec.calibrate else "0"
        if self.spec.capture_output:
            env["PYTHONUNBUFFERED"] = "1"  # so the log pane shows lines as they are printed
        out = subprocess.PIPE if self.spec.capture_output else None
        try:
            self.child = subprocess.Popen(
                [self.spec.python, BOOTSTRAP, *self.spec.target],
                env=env,
                pass_fds=(write_fd,),
                stdout=out,
                stderr=out,
                stdin=None if not out else subprocess.DEVNULL,
            )
        except OSError as e:
            os.close(read_fd)
            self.sink.abort()  # the earlier file, if any, stays as it was
            raise InputError(f"cannot start {self.spec.python}: {e.strerror}") from None
        finally:
            os.close(write_fd)
        self._write_meta(pid=self.child.pid)
        self._say_where()
        self._thread(self._read_frames, read_fd, name="brrrtui-reader")
        self._thread(self._write_frames, name="brrrtui-writer")
        if self.spec.capture_output:
            self._thread(self._read_output, self.child.stdout, "stdout", name="brrrtui-stdout")
            self._thread(self._read_output, self.child.stderr, "stderr", name="brrrtui-stderr")
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

    def _say_where(self) -> None:
        """Once the script runs: an earlier file is replaced when the recording ends; until then, where it is."""
        if self.replaced:
            self.progress(f"replacing the earlier file {self.spec.out_path}")
        if self.sink.path != self.spec.out_path:
            self.progress(f"until the run ends, the recording is written to {self.sink.path}")

    def _thread(self, target: Callable[..., Any], *args: Any, name: str) -> None:
        t = threading.Thread(target=target, args=args, name=name, daemon=True)
        t.start()
        self.threads.append(t)

    # ------------------------------------------------------------------ inputs
    def _write_meta(self, **items: Any) -> None:
        self.sink.set_meta(**items)

    def _read_frames(self, fd: int) -> None:
        try:
            for msg in read_frames(fd):
                # waits only when INBOX_MESSAGES are queued: the disk has stalled that long
                self.inbox.put(msg)
                self.inbox_max = max(self.inbox_max, self.inbox.qsize())
        finally:
            self.inbox.put(None)

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
        self.progress(
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
        self.progress(text)
        if self.feed:
            self.feed.put(LogLine("brrrtui", text))

    def _read_output(self, stream: IO[bytes], name: str) -> None:
        read_lines(stream, lambda lines, dropped: self._output_lines(name, lines, dropped), OUTPUT_TAIL)

    def _output_lines(self, name: str, lines: list[str], dropped: int) -> None:
        """A block of the script's output (record/output.py): its last lines, after `dropped` others."""
        self.output_tail.extend((name, text) for text in lines)
        if self.feed:
            self.feed.put(LogLine(name, "", lines, dropped))

    def _on_telemetry(self, rows: list[tuple]) -> None:
        self.sink.append({"telemetry": rows})
        if self.feed and rows:
            self.feed.put(TelemetrySample(*rows[-1]))

    # ------------------------------------------------------------------ stop
    def interrupt(self, now: bool = False) -> None:
        """Ctrl-C: the first stops the script (the terminal already sent it SIGINT; forward it in case the
        signal reached only us; `now`: at once, for the live UI's raw terminal sent none), the second kills it."""
        self.interrupts += 1
        if self.child is None or self.child.poll() is not None:
            return
        if self.interrupts == 1:
            self.progress("stopping the script; Ctrl-C again to stop brrrtui now (the recording is kept)")
            if now:
                self.child.send_signal(signal.SIGINT)
            else:
                threading.Timer(2.0, self._forward_sigint).start()
        else:
            self.child.kill()

    def _forward_sigint(self) -> None:
        if self.child is not None and self.child.poll() is None and self.interrupts == 1:
            self.child.send_signal(signal.SIGINT)

    def terminate(self) -> None:
        if self.child is not None and self.child.poll() is None:
            self.child.terminate()
            try:
                self.child.wait(5)
            except subprocess.TimeoutExpired:
                self.child.kill()

    def wait_in_background(self) -> None:
        """Live: wait on a thread, so the exit reaches the feed and recording (and is reaped) when it happens."""
        self.sink.defer = True  # the UI reads the file until it closes: finish() renames it
        self._waiter = threading.Thread(target=self._wait_for_result, name="brrrtui-waiter", daemon=True)
        self._waiter.start()

    def _wait_for_result(self) -> None:
        self.result = self.wait()

    def finish(self) -> int:
        """After `wait_in_background`: stop the script if it still runs; wait()'s exit code."""
        assert self._waiter is not None
        self.terminate()
        self._waiter.join()
        self.sink.commit()
        return self.result if self.result is not None else 1

    def wait(self) -> int:
        """Wait for the script, finish the recording, and return the exit code brrrtui should exit with."""
        assert self.child is not None
        while True:
            try:
                returncode = self.child.wait()
                break
            except KeyboardInterrupt:
                self.interrupt()
        for t in self.threads:
            t.join(timeout=30)
        if self.sampler:
            self.sampler.stop()
        if returncode < 0:
            sig = signal.Signals(-returncode).name
            status, code = f"killed by {sig}", 128 - returncode
        else:
            status, code = "finished", returncode
        if self.interrupts >= 2:  # the user stopped brrrtui itself
            status, code = f"{status} (stopped with Ctrl-C)", 130
        self.exit_code = returncode
        self._write_meta(status=status, exit_code=returncode, ended_at_ns=time.time_ns())
        if self.output_tail:
            self._write_meta(output_tail=[f"{stream}: {text}" for stream, text in self.output_tail])
        if self.stream.records:
            self.progress(
                f"kernel stream: {self.stream.records:,} GPU activities between windows, delivered "
                f"p50 {self.stream.percentile(50):.0f} ms / p99 {self.stream.percentile(99):.0f} ms "
                "after they ended"
            )
        if self.feed:
            self.feed.put(Exited(returncode, feeds.last_error(self.output_tail) if returncode else ""))
        self.streamed.finish()
        self.sink.close()
        return code
