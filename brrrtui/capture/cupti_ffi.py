"""The few libcupti calls the kernel stream needs, through ctypes (the library torch's CUDA build loads).

Only the activity API: enable/disable a kind, register buffer callbacks, force a flush, read the clock. The
callback API is never used (it made torch.profiler return no GPU events). Buffers are copied out
as bytes in the completion callback and decoded later by brrrtui.contract.cupti_records.
"""

from __future__ import annotations

import ctypes
import glob
import os
import sys
import threading
from collections.abc import Callable

_REQUEST = ctypes.CFUNCTYPE(
    None, ctypes.POINTER(ctypes.c_void_p), ctypes.POINTER(ctypes.c_size_t), ctypes.POINTER(ctypes.c_size_t)
)
_COMPLETE = ctypes.CFUNCTYPE(
    None, ctypes.c_void_p, ctypes.c_uint32, ctypes.c_void_p, ctypes.c_size_t, ctypes.c_size_t
)


class CuptiError(RuntimeError):
    pass


def find_libcupti() -> str | None:
    """The libcupti this process already loaded (torch's), else one from the nvidia-cuda-cupti wheel."""
    try:
        with open("/proc/self/maps") as f:
            for line in f:
                path = line.rsplit(None, 1)[-1]
                if "libcupti.so" in os.path.basename(path):
                    return path
    except OSError:
        pass
    for base in sys.path:
        for pattern in ("nvidia/cu13/lib/libcupti.so*", "nvidia/cuda_cupti/lib/libcupti.so*"):
            hits = sorted(glob.glob(os.path.join(base, pattern)))
            if hits:
                return hits[0]
    return None


class Cupti:
    def __init__(self, path: str, buffer_bytes: int = 256 << 10):
        lib = ctypes.CDLL(path)
        self.lib = lib
        self.path = path
        self.buffer_bytes = buffer_bytes
        self.api_version = 0
        for fn, args in {
            "cuptiGetVersion": [ctypes.POINTER(ctypes.c_uint32)],
            "cuptiActivityEnable": [ctypes.c_int],
            "cuptiActivityDisable": [ctypes.c_int],
            "cuptiActivityFlushAll": [ctypes.c_uint32],
            "cuptiGetTimestamp": [ctypes.POINTER(ctypes.c_uint64)],
            "cuptiActivityRegisterCallbacks": [_REQUEST, _COMPLETE],
            "cuptiActivityGetNextRecord": [ctypes.c_void_p, ctypes.c_size_t, ctypes.POINTER(ctypes.c_void_p)],
            "cuptiGetResultString": [ctypes.c_int, ctypes.POINTER(ctypes.c_char_p)],
        }.items():
            f = getattr(lib, fn)
            f.argtypes, f.restype = args, ctypes.c_int
        self._buffers: dict[int, ctypes.Array] = {}  # address -> the buffer CUPTI is filling
        self._lock = threading.Lock()
        self.on_buffer: Callable[[bytes], None] = lambda data: None
        # the ctypes callbacks must live as long as CUPTI may call them
        self._request_cb = _REQUEST(self._request)
        self._complete_cb = _COMPLETE(self._complete)

    def _check(self, result: int, what: str) -> None:
        if result != 0:
            text = ctypes.c_char_p()
            self.lib.cuptiGetResultString(result, ctypes.byref(text))
            raise CuptiError(f"{what}: {(text.value or b'?').decode()} ({result})")

    def version(self) -> int:
        v = ctypes.c_uint32()
        self._check(self.lib.cuptiGetVersion(ctypes.byref(v)), "cuptiGetVersion")
        return v.value

    def enable(self, kind: int) -> None:
        self._check(self.lib.cuptiActivityEnable(kind), f"cuptiActivityEnable({kind})")

    def disable(self, kind: int) -> None:
        self._check(self.lib.cuptiActivityDisable(kind), f"cuptiActivityDisable({kind})")

    def flush_all(self, forced: bool = True) -> None:
        self._check(self.lib.cuptiActivityFlushAll(1 if forced else 0), "cuptiActivityFlushAll")

    def timestamp(self) -> int:
        t = ctypes.c_uint64()
        self._check(self.lib.cuptiGetTimestamp(ctypes.byref(t)), "cuptiGetTimestamp")
        return t.value

    def register(self) -> None:
        self._check(
            self.lib.cuptiActivityRegisterCallbacks(self._request_cb, self._complete_cb),
            "cuptiActivityRegisterCallbacks",
        )

    def record_sizes(self, data: bytes) -> dict[int, int]:
        """Size of each record kind in a completed buffer, the way CUPTI walks it (pointer differences)."""
        buf = ctypes.create_string_buffer(data, len(data))
        base = ctypes.addressof(buf)
        rec = ctypes.c_void_p(None)
        prev: tuple[int, int] | None = None  # (address, kind)
        sizes: dict[int, int] = {}
        while self.lib.cuptiActivityGetNextRecord(ctypes.c_void_p(base), len(data), ctypes.byref(rec)) == 0:
            addr = rec.value or 0
            if prev is not None:
                sizes[prev[1]] = addr - prev[0]
            prev = (addr, ctypes.c_uint32.from_address(addr).value)
        if prev is not None and prev[1] not in sizes:
            sizes[prev[1]] = base + len(data) - prev[0]
        return sizes

    # CUPTI's threads (or the flushing one) call these
    def _request(self, buffer, size, max_records) -> None:  # noqa: ANN001 - ctypes pointers
        buf = ctypes.create_string_buffer(self.buffer_bytes + 8)
        addr = (ctypes.addressof(buf) + 7) & ~7
        with self._lock:
            self._buffers[addr] = buf
        buffer[0] = addr
        size[0] = self.buffer_bytes
        max_records[0] = 0

    def _complete(self, ctx, stream_id, buffer, size, valid) -> None:  # noqa: ANN001
        data = ctypes.string_at(buffer, valid) if valid else b""
        with self._lock:
            self._buffers.pop(buffer or 0, None)
        if data:
            self.on_buffer(data)


def load() -> tuple[Cupti | None, str]:
    """(Cupti, "") or (None, why not: one line for the user)."""
    path = find_libcupti()
    if path is None:
        return None, "no libcupti found (torch's CUDA build ships it in the nvidia-cuda-cupti package)"
    try:
        cupti = Cupti(path)
        version = cupti.version()
    except (OSError, AttributeError, CuptiError) as e:
        return None, f"libcupti at {path} cannot be used ({e})"
    cupti.api_version = version  # record layouts are checked on the first buffer (KernelStream._check_layout)
    return cupti, ""
