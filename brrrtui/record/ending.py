"""How a recorded run ends (UI-free): the `Ending` part of the Recorder, and what the recording then says.

The run follows the script's process, not its output: its exit is seen when it happens, even while a process
it started holds its stdout (or, forked, the capture channel) open; the readers get a moment to drain, then the
recording is finished. Its status says how the run ended (`run_status`): exit code, uncaught exception,
signal, and a write error (disk full) that cut the recording short. A small reserve row kept inside the
recording (`reserve`) lets that last status land even on a full disk (`write_last_status`).
"""

from __future__ import annotations

import contextlib
import json
import os
import queue
import sqlite3
import subprocess
import threading
import time
from collections import deque
from collections.abc import Callable, Iterator
from typing import Any

from brrrtui.contract.messages import Message
from brrrtui.record import feed as feeds
from brrrtui.record.feed import Exited, Feed
from brrrtui.record.lifecycle import RunControl, pass_signals_on, restore_handlers, signal_name
from brrrtui.record.output import Waiting
from brrrtui.record.sink import Sink
from brrrtui.record.stream_side import StreamSide
from brrrtui.record.telemetry import TelemetrySampler
from brrrtui.recording.store import RecordingWriter

FRAMES_GRACE_S = 1.0  # after the script's exit: how long a process it forked may hold the channel open
OUTPUT_GRACE_S = 0.5  # after the script's exit: how long its last output lines may take to arrive
RESERVE_KEY = "space_reserve"  # a meta row freed to make room for the last status on a full disk
RESERVE_BYTES = 64 * 1024
FULL_DISK_WORDS = ("disk is full", "No space left", "quota", "File too large")


class Ending:
    """The Recorder's stop and end: signals (RunControl), waiting for the script, the recording's last meta."""

    child: subprocess.Popen[bytes] | None
    control: RunControl
    feed: Feed | None
    sink: Sink
    streamed: StreamSide
    stream: Any  # streamed.latency
    sampler: TelemetrySampler | None
    threads: list[threading.Thread]
    inbox: queue.Queue[Message | None]
    output_tail: deque[tuple[str, str]]
    notes: list[str]
    write_errors: list[str]
    uncaught: str
    exit_code: int | None
    result: int | None
    _frames_thread: threading.Thread | None
    _waiting: dict[str, Waiting]
    _output_threads: list[threading.Thread]
    _tail_lock: threading.Lock
    _tail_closed: bool
    _waiter: threading.Thread | None
    _write_meta: Callable[..., None]
    _say: Callable[[str], None]

    @property
    def interrupts(self) -> int:
        return self.control.interrupts

    @contextlib.contextmanager
    def passing_signals(self, on_end: Callable[[], None] | None = None) -> Iterator[None]:
        """While in it, SIGINT, SIGTERM and SIGHUP go to `on_signal`; SIGTERM and SIGHUP then to `on_end` (the
        live UI ends: the script ends as the signal makes it, the recording is finished)."""
        old = pass_signals_on(self.on_signal, on_end)
        try:
            yield
        finally:
            restore_handlers(old)

    def on_signal(self, sig: int) -> None:
        """brrrtui received SIGINT, SIGTERM or SIGHUP: the script gets it as without brrrtui (lifecycle.py)."""
        self.control.on_signal(sig)

    def interrupt(self, now: bool = False) -> None:
        """Ctrl-C (`now`: the live UI's key, which sent nobody a signal): RunControl.interrupt."""
        self.control.interrupt(now)

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
        """After `wait_in_background`: stop the script if it still runs; wait()'s exit code. A script that was
        passed SIGTERM or SIGHUP is left to end as that signal makes it, as it would without brrrtui."""
        assert self._waiter is not None
        if not self.control.terminated():
            self.terminate()
        self._waiter.join()
        self.sink.commit()
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
        if frames is not None and not drain([(frames, self._waiting["frames"])], FRAMES_GRACE_S):
            self.inbox.put(None)  # a process the script forked holds the channel, and no goodbye came
        for t in self.threads:
            if t not in self._output_threads and t is not frames:
                t.join(timeout=30)
        outputs = zip(self._output_threads, (self._waiting["stdout"], self._waiting["stderr"]), strict=False)
        drain(list(outputs), OUTPUT_GRACE_S)
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
            write_last_status(self.sink, {**final, "notes": self.notes})
        else:
            drop_reserve(self.sink)
        self.sink.close()
        return code

    def _final_meta(self, returncode: int, ended_ns: int) -> tuple[dict[str, Any], int]:
        args = (returncode, ended_ns, self.uncaught, self.control, self.write_errors, self.sink)
        return final_meta(*args)


def drain(readers: list[tuple[threading.Thread, Waiting]], grace_s: float, most_s: float = 30.0) -> bool:
    """After the script's exit: wait for pipe readers to end, while each has data to handle; one that has
    waited `grace_s` on an empty pipe (held open by a process the script started) is left to read on. Whether
    all of them ended."""
    deadline = time.monotonic() + most_s
    for thread, waiting in readers:
        while thread.is_alive() and waiting.idle_s() < grace_s and time.monotonic() < deadline:
            thread.join(0.02)
    return not any(thread.is_alive() for thread, _ in readers)


def still_running(child: subprocess.Popen[bytes] | None, wait_s: float) -> bool:
    """Whether `child` is still alive `wait_s` from now (a killed process's pipes end a moment before its exit
    can be seen). Never reaps it: Popen.wait does."""
    deadline = time.monotonic() + wait_s
    while True:
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


def run_status(
    returncode: int, uncaught: str = "", write_errors: list[str] | None = None, full_disk: bool = False
) -> tuple[str, dict[str, Any]]:
    """How the run ended, as the recording's `status` and its `outcome` (the same, as fields): `finished`,
    `exited with code 3`, `raised ValueError (exit code 1)`, `killed by SIGTERM`, each followed by
    `; recording cut short: disk full` (or `write error`) when `write_errors` stopped the recording."""
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
        status += f"; recording cut short: {'disk full' if full_disk else 'write error'}"
        outcome["write_error"] = write_errors[0]
        outcome["disk_full"] = full_disk
    return status, outcome


def final_meta(
    returncode: int, ended_ns: int, uncaught: str, control: RunControl, write_errors: list[str], sink: Sink
) -> tuple[dict[str, Any], int]:
    """The recording's last meta (status, outcome, exit code, end time, a note for its reader when the run
    did not simply finish) and brrrtui's exit code. `write_errors` cut the recording short only where the
    sink gave up (not where it continued in a sibling file)."""
    cut_short = write_errors if sink.dead else []
    status, outcome = run_status(returncode, uncaught, cut_short, full_disk(write_errors, sink.path))
    code = 128 - returncode if returncode < 0 else returncode
    if control.interrupts >= 2:  # the user stopped brrrtui itself
        status, code = f"{status} (stopped with Ctrl-C)", 130
    if control.received:
        outcome["signals_received"] = list(control.received)
        outcome["signals_passed_on"] = list(control.passed_on)
    final: dict[str, Any] = {"status": status, "exit_code": returncode, "ended_at_ns": ended_ns}
    final["outcome"] = outcome
    if status != "finished":
        final["load_notes"] = [f"the script's run ended: {status}"]
    return final, code


def full_disk(write_errors: list[str], path: str) -> bool:
    """Whether the write errors were a full disk (or quota, or file size limit)."""
    if not write_errors:
        return False
    if any(w in " ".join(write_errors) for w in FULL_DISK_WORDS):
        return True
    try:
        st = os.statvfs(os.path.dirname(os.path.abspath(path)))
    except OSError:
        return False
    return st.f_bavail * st.f_frsize < RESERVE_BYTES


def reserve(sink: Sink) -> None:
    """Room for the last status: a meta row that `write_last_status` frees when the disk is full."""
    row = (RESERVE_KEY, json.dumps(" " * RESERVE_BYTES))

    def put(w: RecordingWriter) -> None:
        w.db.execute("INSERT OR REPLACE INTO meta(key, value) VALUES (?, ?)", row)

    sink.transact(put)


def drop_reserve(sink: Sink) -> None:
    def drop(w: RecordingWriter) -> None:
        w.db.execute("DELETE FROM meta WHERE key = ?", (RESERVE_KEY,))

    sink.transact(drop)


def write_last_status(sink: Sink, items: dict[str, Any]) -> None:
    """The writes failed (a full disk): `items` written anyway, in place of the reserve row, with the journal
    in memory (a rollback journal would need room on the disk). A reader then says what happened, not
    "killed or crashed"."""
    writer = sink.writer
    if writer is None:
        return
    with sink.lock:
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
