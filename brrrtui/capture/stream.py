"""Every kernel between windows: CUPTI kernel, memcpy and memset activity records, flushed once a second.

Facts measured on an H200 (../shared/DESIGN.md, and this module's own runs) shape it:
- kernel-kind records only: runtime records outnumber kernels 14:1;
- decoding in Python per record is too slow (cupti-python's record objects: ~30-40 us each, a tiny-op loop
  ran 10x slower), so buffers are copied as bytes and decoded with numpy (brrrtui.capture.records);
- CUPTI's own flush period delivered records 7-9 s late, so one dedicated thread forces a flush every
  `period_s`, and nothing else flushes while it may (one lock);
- one CUPTI subscriber below driver r610: a torch.profiler window takes the activity API over and, with
  TEARDOWN_CUPTI=1, finalizes CUPTI at the exit of the next CUDA call after it stops. The stream pauses
  before each window and re-registers after it, once that CUDA call has happened. The callback API is never
  used (it made torch.profiler return no GPU events for the rest of the process).

Nothing accumulates in this process: each flush's records are sent to the recorder and dropped.
"""

from __future__ import annotations

import ctypes
import threading
import time
from collections.abc import Callable
from typing import Any

from brrrtui.capture import records


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
            f.restype, f.argtypes = ctypes.c_void_p, [ctypes.c_char_p, ctypes.c_void_p, ctypes.c_void_p,
                                                      ctypes.POINTER(ctypes.c_int)]  # fmt: skip
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

    `cupti` is a brrrtui.capture.cupti_ffi.Cupti (or a test double with the same methods); `send` gets one
    list of analyzers.model.STREAM_SCHEMA rows per flush, called with `intern_lock` held."""

    def __init__(self, cupti: Any, send: Callable[[list[tuple]], None], intern: Callable[[str | None], int],
                 intern_lock: threading.Lock, period_s: float = 1.0,
                 name_of: Callable[[int], str] = c_string):  # fmt: skip
        self.cupti = cupti
        self.send = send
        self.intern = intern
        self.intern_lock = intern_lock
        self.period_s = period_s
        self.name_of = name_of
        self.lock = threading.Lock()  # CUPTI enable/disable/flush: one thread at a time
        self.active = False
        self.stopped = False
        self.after_window = -1
        self.offset_ns = 0
        self.sizes: dict[int, int] = {}  # record size by kind, learnt from the first buffer
        self._names: dict[int, str] = {}  # name pointer -> name, until CUPTI is finalized
        self._pending: list[tuple[int, int, bytes]] = []  # (after_window, offset_ns, buffer)
        self._pending_lock = threading.Lock()
        self._thread: threading.Thread | None = None
        self.records = 0
        self.incomplete = 0  # records a forced flush returned before their kernel ended (dropped)
        self.forced_flushes = 0
        self.bytes = 0
        self.flush_ns_max = 0  # longest forced flush (on the stream's thread)
        self.decode_ns = 0
        self.last_buffer_s = time.monotonic()
        self.error: str | None = None  # set when the stream gave up (bad records): windows go on
        cupti.on_buffer = self._on_buffer

    # ------------------------------------------------------------------ CUPTI's buffer callback
    def _on_buffer(self, data: bytes) -> None:
        self.last_buffer_s = time.monotonic()
        with self._pending_lock:
            self._pending.append((self.after_window, self.offset_ns, data))

    # ------------------------------------------------------------------ control
    def _enable(self) -> None:
        self.cupti.register()
        for k in records.KINDS:
            self.cupti.enable(k)
        self.offset_ns = clock_offset(self.cupti.timestamp)
        self._names.clear()
        self.active = True

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
            self.cupti.flush_all()
            for k in records.KINDS:
                self.cupti.disable(k)
            self.active = False
        self._send()

    def resume(self, after_window: int) -> None:
        """After a window: the profiler left the activity API off and our callbacks unregistered."""
        with self.lock:
            if self.stopped:
                return
            self.after_window = after_window
            self._enable()
        self._ensure_thread()

    def stop(self) -> None:
        self.pause()
        with self.lock:
            self.stopped = True

    # ------------------------------------------------------------------ the flush thread
    def _loop(self) -> None:
        """Small buffers complete (every record ended) and come back by themselves while kernels flow; a
        forced flush, which also returns records of kernels still running (with no end: dropped), is only
        for a buffer that has sat partly filled for `period_s` (a slow or idle GPU, few records lost)."""
        while True:
            time.sleep(self.period_s / 2)
            with self.lock:
                if self.stopped:
                    return
                if self.active:
                    t0 = time.perf_counter_ns()
                    self.cupti.flush_all(forced=False)
                    if time.monotonic() - self.last_buffer_s > self.period_s:
                        self.cupti.flush_all(forced=True)
                        self.forced_flushes += 1
                    self.flush_ns_max = max(self.flush_ns_max, time.perf_counter_ns() - t0)
            self._send()

    def _give_up(self, reason: str) -> None:
        self.error = reason
        with self.lock:
            if self.active:
                for k in records.KINDS:
                    self.cupti.disable(k)
            self.active = False
            self.stopped = True

    def _name(self, pointer: int) -> str:
        name = self._names.get(pointer)
        if name is None:
            name = self._names[pointer] = self.name_of(pointer)
        return name

    def _send(self) -> None:
        with self._pending_lock:
            pending, self._pending = self._pending, []
        if not pending or self.error:
            return
        t0 = time.perf_counter_ns()
        parts: list[tuple[int, int, records.Decoded]] = []
        for after_window, offset_ns, data in pending:
            offsets = records.walk(data, self.sizes)
            if offsets is None:
                self.sizes.update(self.cupti.record_sizes(data))
                offsets = records.walk(data, self.sizes)
            if offsets is None:
                return self._give_up("CUPTI records of an unknown layout")
            decoded = records.decode(data, offsets, self._name)
            complete = records.complete(decoded)
            bad = int(records.malformed(decoded).sum())
            if bad and bad >= len(decoded) // 2:
                return self._give_up("CUPTI records that do not decode as CUDA 13's layout")
            self.incomplete += int(len(decoded) - complete.sum())
            decoded = records.take(decoded, complete)
            parts.append((after_window, offset_ns, decoded))
            self.bytes += len(data)
        with self.intern_lock:
            rows: list[tuple] = []
            for after_window, offset_ns, decoded in parts:
                rows += records.to_rows(decoded, after_window, offset_ns, self.intern)
            self.decode_ns += time.perf_counter_ns() - t0
            if rows:
                self.records += len(rows)
                self.send(rows)
