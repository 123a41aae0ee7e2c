"""Every kernel between windows: CUPTI kernel, memcpy and memset activity records, flushed once a second.

Facts measured on an H200 shape it:
- kernel-kind records only: runtime records outnumber kernels 14:1;
- the script's process must do little per record, beside a training loop that wants the GIL (cupti-python's
  record objects: ~30-40 us each, a tiny-op loop ran 10x slower; numpy decoding with per-record strings:
  3.7 us of wall time per record, 12 % on GPT-2; numpy decoding per buffer: 1.0 us): one plain-Python scan
  per buffer notes offsets and string ids (0.7-0.8 us on GPT-2), the bytes go to the recorder as they are,
  and the recorder reads the numbers with numpy (brrrtui.contract.cupti_records);
- CUPTI's own flush period delivered records 7-9 s late, so one dedicated thread forces a flush every
  `period_s`, and nothing else flushes while it may (one lock);
- one CUPTI subscriber below driver r610: a torch.profiler window takes the activity API over and, with
  TEARDOWN_CUPTI=1, finalizes CUPTI at the exit of the next CUDA call after it stops. The stream pauses
  before each window and re-registers after it, once that CUDA call has happened. The callback API is never
  used (it made torch.profiler return no GPU events for the rest of the process).

Nothing accumulates in this process: each flush's buffers are sent to the recorder and dropped.
"""

from __future__ import annotations

import ctypes
import json
import os
import threading
import time
from collections.abc import Callable
from typing import Any

import numpy as np

from brrrtui.contract import cupti_records as records
from brrrtui.contract.messages import StreamStats


def clock_offset(
    cupti_now: Callable[[], int], wall_now: Callable[[], int] = time.time_ns, tries: int = 5
) -> int:
    """wall - CUPTI clock, from the tightest of a few bracketed reads."""
    best: tuple[int, int] | None = None
    for _ in range(tries):
        t0 = wall_now()
        c = cupti_now()
        t1 = wall_now()
        if best is None or t1 - t0 < best[0]:
            best = (t1 - t0, (t0 + t1) // 2 - c)
    assert best is not None
    return best[1]


_libstdcxx: Any = None


def demangle(name: str) -> str:
    """The C++ name as Kineto reports it (abi::__cxa_demangle), so streamed kernels match the windows'."""
    global _libstdcxx
    if not name.startswith("_Z"):
        return name
    if _libstdcxx is None:
        try:
            _libstdcxx = ctypes.CDLL("libstdc++.so.6")
            f = _libstdcxx.__cxa_demangle
            f.restype = ctypes.c_void_p
            f.argtypes = [ctypes.c_char_p, ctypes.c_void_p, ctypes.c_void_p, ctypes.POINTER(ctypes.c_int)]
        except OSError:
            _libstdcxx = False
    if not _libstdcxx:
        return name
    status = ctypes.c_int(1)
    out = _libstdcxx.__cxa_demangle(name.encode(), None, None, ctypes.byref(status))
    if status.value != 0 or not out:
        return name
    text = ctypes.string_at(out).decode("utf-8", "replace")
    ctypes.CDLL(None).free(ctypes.c_void_p(out))
    return text


def c_string(pointer: int) -> str:
    """A kernel's name from CUPTI's pointer to it, demangled."""
    return demangle(ctypes.string_at(pointer).decode("utf-8", "replace")) if pointer else "?"


class KernelStream:
    """start() once; pause() before each window, resume() after it; stop() when the script ends.

    `cupti` is a brrrtui.capture.cupti_ffi.Cupti (or a test double with the same methods). Per flush, `send`
    gets the buffers joined, (after_window, offset_ns, record count) per buffer and what the scan found
    (records.rows_from_scan turns them into rows, in the recorder), called with `intern_lock` held (see
    brrrtui.capture.convert.Interner)."""

    def __init__(
        self,
        cupti: Any,
        send: Callable[[bytes, list[tuple[int, int, int]], records.Scanned], None],
        intern: Callable[[str | None], int],
        intern_lock: threading.Lock,
        period_s: float = 1.0,
        name_of: Callable[[int], str] | None = None,
    ):
        self.cupti = cupti
        self.send = send
        self.intern = intern
        self.intern_lock = intern_lock
        self.period_s = period_s
        self.lock = threading.Lock()  # CUPTI enable/disable/flush: one thread at a time
        self.active = False
        self.stopped = False
        self.after_window = -1
        self.offset_ns = 0
        self.sizes: dict[int, int] = {}  # record size by kind, learnt from the first buffer
        self.ids = records.ScanIds(intern, name_of or c_string)
        self.layout_checked = False
        self.send_lock = threading.Lock()  # one scan at a time: pause() waits for the flush thread's
        self.accepting = False  # True from enable to pause: buffers handed over outside it are dropped
        self.late_buffers = 0
        self._pending: list[tuple[int, int, bytes, int]] = []  # (after_window, offset_ns, buffer, arrived)
        self._pending_lock = threading.Lock()
        self._thread: threading.Thread | None = None
        self.records = 0
        self.forced_flushes = 0
        self.bytes = 0
        self.flush_ns_max = 0  # longest forced flush (on the stream's thread)
        self.decode_ns = 0
        self.queue_ns_max = 0  # longest a buffer waited in this process between CUPTI and the recorder
        self.last_buffer_s = time.monotonic()
        self.error: str | None = None  # set when the stream gave up (bad records): windows go on
        # BRRRTUI_STREAM_LOG=path: a JSON line per event (buffer handed over, flush thread's wake-up, batch
        # phases, pause, resume), for benchmarks/stream_phases.py
        log_path = os.environ.get("BRRRTUI_STREAM_LOG")
        self._log = open(log_path, "w", buffering=1) if log_path else None  # noqa: SIM115 - open while the script runs
        cupti.on_buffer = self._on_buffer

    def _note(self, event: str, **fields: Any) -> None:
        if self._log:
            thread = threading.current_thread().name
            record = {"event": event, "t_ns": time.time_ns(), "thread": thread, **fields}
            self._log.write(json.dumps(record) + "\n")

    # ------------------------------------------------------------------ CUPTI's buffer callback
    def _on_buffer(self, data: bytes) -> None:
        self.last_buffer_s = time.monotonic()
        if not self.accepting:  # CUPTI handed a buffer over after pause(): its kernel names may be freed by
            self.late_buffers += 1  # the time it could be scanned, so it is dropped (and counted)
            return
        with self._pending_lock:
            self._pending.append((self.after_window, self.offset_ns, data, time.perf_counter_ns()))
        if self._log:
            self._note("buffer", bytes=len(data))

    # ------------------------------------------------------------------ control
    def _enable(self) -> None:
        self.cupti.register()
        for k in records.KINDS:
            self.cupti.enable(k)
        self.offset_ns = clock_offset(self.cupti.timestamp)
        with self.send_lock:
            self.ids.names.clear()  # name pointers are CUPTI's, freed when a window's profiler finalizes it
        self.active = self.accepting = True

    def start(self) -> None:
        with self.lock:
            if self.stopped or self.active:
                return
            self._enable()
        self._ensure_thread()

    def _ensure_thread(self) -> None:
        if self._thread is None:
            self._thread = threading.Thread(target=self._loop, name="brrrtui-stream", daemon=True)
            self._thread.start()

    def pause(self) -> None:
        """Before a window: deliver what CUPTI holds and leave the activity API to the profiler."""
        with self.lock:
            if not self.active:
                return
            for k in records.KINDS:  # first, so that the flush returns every buffer CUPTI will fill
                self.cupti.disable(k)
            self.cupti.flush_all()
            self.active = self.accepting = False
        self._note("pause")
        # Scan what CUPTI returned (waiting for a scan the flush thread may be in) before the window starts:
        # the profiler finalizes CUPTI when it stops, which frees the kernel names the records point to.
        self._send()

    def resume(self, after_window: int) -> None:
        """After a window: the profiler left the activity API off and our callbacks unregistered."""
        with self.lock:
            if self.stopped:
                return
            self.after_window = after_window
            self._enable()
        self._note("resume")
        self._ensure_thread()

    def stop(self) -> None:
        self.pause()
        with self.lock:
            self.stopped = True

    def stats(self, write_ns_max: int) -> StreamStats:
        """Its counters for the recording; `write_ns_max`: the channel's longest write."""
        return StreamStats(
            records=self.records,
            buffer_bytes=self.bytes,
            flush_ns_max=self.flush_ns_max,
            decode_ns=self.decode_ns,
            queue_ns_max=self.queue_ns_max,
            write_ns_max=write_ns_max,
            forced_flushes=self.forced_flushes,
            late_buffers=self.late_buffers,
            error=self.error,
            cupti_api_version=self.cupti.api_version,
        )

    # ------------------------------------------------------------------ the flush thread
    def _loop(self) -> None:
        """Small buffers complete (every record ended) and come back by themselves while kernels flow; a
        forced flush, which also returns records of kernels still running (with no end: dropped), is only
        for a buffer that has sat partly filled for `period_s` (a slow or idle GPU, few records lost)."""
        while True:
            t_sleep = time.perf_counter_ns()
            time.sleep(self.period_s / 2)
            t_woke = time.perf_counter_ns()
            with self.lock:
                t_locked = time.perf_counter_ns()
                if self.stopped:
                    return
                if self.active:
                    t0 = time.perf_counter_ns()
                    self.cupti.flush_all(forced=False)
                    if time.monotonic() - self.last_buffer_s > self.period_s:
                        self.cupti.flush_all(forced=True)
                        self.forced_flushes += 1
                    self.flush_ns_max = max(self.flush_ns_max, time.perf_counter_ns() - t0)
            t_flushed = time.perf_counter_ns()
            self._note(
                "loop",
                late_wake_ms=(t_woke - t_sleep) / 1e6 - self.period_s * 500,
                lock_wait_ms=(t_locked - t_woke) / 1e6,
                flush_ms=(t_flushed - t_locked) / 1e6,
            )
            self._send()

    def _give_up(self, reason: str) -> None:
        self.error = reason
        with self.lock:
            if self.active:
                for k in records.KINDS:
                    self.cupti.disable(k)
            self.active = self.accepting = False
            self.stopped = True

    def _check_layout(self, data: bytes) -> str | None:
        """On the first buffer: learn the record sizes and check that the records decode as CUDA 13's
        structs (timestamps in order) before any name pointer in them is followed."""
        offsets = records.walk(data, self.sizes)
        if offsets is None:
            self.sizes.update(self.cupti.record_sizes(data))
            offsets = records.walk(data, self.sizes)
        if offsets is None:
            return "CUPTI records of an unknown layout"
        bad = records.malformed(data, np.concatenate(list(offsets.values())))
        if bad.any() and bad.sum() >= len(bad) // 2:
            return "CUPTI records that do not decode as CUDA 13's layout"
        self.layout_checked = True
        return None

    def _send(self) -> None:
        t0 = time.perf_counter_ns()
        with self.send_lock:
            if self._log:
                self._note("send_lock", wait_ms=(time.perf_counter_ns() - t0) / 1e6)
            self._send_pending()

    def _send_pending(self) -> None:
        with self._pending_lock:
            pending, self._pending = self._pending, []
        if not pending or self.error:
            return
        t0 = time.perf_counter_ns()
        cpu0 = time.thread_time_ns()
        names0 = len(self.ids.names)
        found = records.Scanned.empty()
        parts: list[tuple[int, int, int]] = []
        buffers: list[bytes] = []
        base = 0
        for after_window, offset_ns, data, _ in pending:
            if not self.layout_checked and (why := self._check_layout(data)):
                return self._give_up(why)
            mark = len(found)
            if not records.scan(data, self.sizes, base, found, self.ids):
                found.truncate(mark)  # a kind not met before: learn its size, once
                self.sizes.update(self.cupti.record_sizes(data))
                if not records.scan(data, self.sizes, base, found, self.ids):
                    return self._give_up("CUPTI records of an unknown layout")
            parts.append((after_window, offset_ns, len(found) - mark))
            buffers.append(data)
            base += len(data)
        self.bytes += base
        self.records += len(found)
        t1 = time.perf_counter_ns()
        cpu1 = time.thread_time_ns()
        self.decode_ns += t1 - t0
        if len(found):
            with self.intern_lock:  # strings interned above go out in this batch or one sent before it
                t2 = time.perf_counter_ns()
                self.send(b"".join(buffers), parts, found)
        t3 = time.perf_counter_ns()
        self.queue_ns_max = max(self.queue_ns_max, t3 - pending[0][3])
        if self._log:
            self._note(
                "batch",
                buffers=len(pending),
                records=len(found),
                new_names=len(self.ids.names) - names0,
                oldest_age_ms=(t0 - pending[0][3]) / 1e6,
                scan_ms=(t1 - t0) / 1e6,
                scan_cpu_ms=(cpu1 - cpu0) / 1e6,
                intern_wait_ms=(t2 - t1) / 1e6 if len(found) else 0,
                send_ms=(t3 - t1) / 1e6,
            )
