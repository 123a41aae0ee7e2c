"""Frames between the traced child and the recorder: a 4-byte little-endian length, then a pickled message.

The messages are brrrtui.contract.messages' dataclasses, pickled in their wire form (plain dicts of builtins
and numpy). Both ends are brrrtui processes started by the same user, so pickle is safe here and fast.
Unpickling a class from the script's libraries would import them into the recorder (a TorchVersion made it
import torch on the H200 box: 3-4 s without reading the pipe, which stalled the script's sends, and +450 MB),
so the recorder refuses every class outside builtins and numpy, and drops such a frame with a note; a frame
that is no message is dropped the same way.
"""

from __future__ import annotations

import io
import os
import pickle
import struct
import threading
import time
from collections.abc import Iterator
from typing import Any

from brrrtui.contract.messages import Message, Note, ProtocolError, from_wire, to_wire

_HEADER = struct.Struct("<I")


class Channel:
    """Child side: writes frames to an inherited pipe fd. Thread-safe; goes quiet if the recorder is gone."""

    def __init__(self, fd: int) -> None:
        self.fd = fd
        self.owner_pid = os.getpid()
        self.lock = threading.Lock()
        self.broken = False
        self.blocked_ns_max = 0  # longest write: the recorder not reading (a full pipe) shows here

    def send(self, message: Message, wait_s: float = -1) -> bool:
        """Write one frame. `wait_s` >= 0: give up (False) if another send holds the pipe that long — a
        signal handler must not wait forever on a send its own thread was interrupted in."""
        # A forked DataLoader worker inherits the fd: only the process that owns the channel writes to it.
        if self.broken or os.getpid() != self.owner_pid:
            return False
        payload = pickle.dumps(to_wire(message), protocol=pickle.HIGHEST_PROTOCOL)
        data = _HEADER.pack(len(payload)) + payload
        if not self.lock.acquire(timeout=wait_s):
            return False
        try:
            t0 = time.perf_counter_ns()
            try:
                view = memoryview(data)
                while view:
                    n = os.write(self.fd, view)
                    view = view[n:]
            except OSError:  # the recorder died (kill -9): the script runs on, uncaptured
                self.broken = True
                return False
            self.blocked_ns_max = max(self.blocked_ns_max, time.perf_counter_ns() - t0)
        finally:
            self.lock.release()
        return True


_ALLOWED_MODULES = {"builtins", "numpy", "numpy.core.multiarray", "numpy._core.multiarray"}


class ForeignClass(pickle.UnpicklingError):
    pass


class _PlainUnpickler(pickle.Unpickler):
    def find_class(self, module: str, name: str) -> Any:
        if module not in _ALLOWED_MODULES:
            raise ForeignClass(f"{module}.{name}")
        return super().find_class(module, name)


def loads(payload: bytes) -> Any:
    return _PlainUnpickler(io.BytesIO(payload)).load()


def read_frames(fd: int) -> Iterator[Message]:
    """Recorder side: yields messages until EOF. A torn last frame (child killed mid-write) is dropped; a frame
    carrying a class of the script's libraries, or one that is no message, is dropped with a note (the frames
    after it still arrive)."""
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
                wire = loads(payload)
            except ForeignClass as e:
                yield Note(f"brrrtui dropped a capture message that carried a {e} (a bug)")
                continue
            except Exception:  # noqa: BLE001 - a corrupt frame ends the stream, it never crashes the recorder
                return
            try:
                message = from_wire(wire)
            except ProtocolError as e:
                message = Note(
                    f"brrrtui dropped a capture message that does not fit the protocol: {e} (a bug)"
                )
            yield message
