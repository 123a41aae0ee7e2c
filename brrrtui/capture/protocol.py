"""Frames between the traced child and the recorder: a 4-byte little-endian length, then a pickled dict.

Both ends are brrrtui processes started by the same user, so pickle is safe here and fast. Every message has a
"type": "hello" (versions, device, peaks, notes), "batch" (rows for analyzers.store.RecordingWriter.append,
plus summary counts), "note" (a one-line message for the user) or "bye" (the script finished).
"""

from __future__ import annotations

import os
import pickle
import struct
import threading
from collections.abc import Iterator
from typing import Any

_HEADER = struct.Struct("<I")
MAX_FRAME = 1 << 31


class Channel:
    """Child side: writes frames to an inherited pipe fd. Thread-safe; goes quiet if the recorder is gone."""

    def __init__(self, fd: int):
        self.fd = fd
        self.owner_pid = os.getpid()
        self.lock = threading.Lock()
        self.broken = False

    def send(self, message: dict[str, Any]) -> bool:
        # A forked DataLoader worker inherits the fd: only the process that owns the channel writes to it.
        if self.broken or os.getpid() != self.owner_pid:
            return False
        payload = pickle.dumps(message, protocol=pickle.HIGHEST_PROTOCOL)
        data = _HEADER.pack(len(payload)) + payload
        with self.lock:
            try:
                view = memoryview(data)
                while view:
                    n = os.write(self.fd, view)
                    view = view[n:]
            except OSError:  # the recorder died (kill -9): the script runs on, uncaptured
                self.broken = True
                return False
        return True


def read_frames(fd: int) -> Iterator[dict[str, Any]]:
    """Recorder side: yields messages until EOF. A torn last frame (child killed mid-write) is dropped."""
    with os.fdopen(fd, "rb", buffering=1 << 20) as f:
        while True:
            header = f.read(_HEADER.size)
            if len(header) < _HEADER.size:
                return
            (n,) = _HEADER.unpack(header)
            payload = f.read(n)
            if len(payload) < n:
                return
            try:
                yield pickle.loads(payload)
            except Exception:  # noqa: BLE001 - a corrupt frame ends the stream, it never crashes the recorder
                return
