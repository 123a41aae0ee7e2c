"""Open any input brrrtui reads: its own recordings or torch.profiler Chrome traces."""

from __future__ import annotations

import os

from analyzers.chrome import load_chrome
from analyzers.errors import InputError
from analyzers.model import Trace
from analyzers.store import is_recording, load_recording


def load_trace(path: str) -> Trace:
    if not os.path.exists(path):
        raise InputError(f"{path}: no such file")
    if os.path.isdir(path):
        raise InputError(
            f"{path} is a directory; give a .brrr recording or a torch.profiler .json/.json.gz trace"
        )
    try:
        if os.path.getsize(path) == 0:
            raise InputError(f"{path} is empty (0 bytes): the recording was never written")
        if is_recording(path):
            return load_recording(path)
    except OSError as e:
        raise InputError(f"{path}: cannot read ({e.strerror})") from None
    if path.endswith((".json", ".json.gz", ".gz")):
        return load_chrome(path)
    raise InputError(f"{path} is neither a brrrtui recording nor a torch.profiler .json/.json.gz trace")
