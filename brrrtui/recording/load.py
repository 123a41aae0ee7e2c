"""Open any input brrrtui reads: its own recordings or torch.profiler Chrome traces."""

from __future__ import annotations

import gzip
import os
import shutil
import tempfile
import zlib

from analyzers.allocator import tune_for_analysis
from analyzers.errors import InputError
from analyzers.model import Trace
from brrrtui.recording.ranks import open_as_one
from brrrtui.recording.store import is_recording, load_recording


def load_trace(path: str) -> Trace:
    """A recording or a Chrome trace, for analysis: this process is an analysing one from here on."""
    tune_for_analysis()
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
            return open_as_one(load_recording(path), path)  # a distributed run: one rank, the set in meta
        if _is_gzipped_recording(path):
            return load_gzipped_recording(path)
    except OSError as e:
        raise InputError(f"{path}: cannot read ({e.strerror})") from None
    if path.endswith((".json", ".json.gz", ".gz")):
        # imported here: a recording needs none of the Chrome readers' ~20 ms of imports
        from brrrtui.recording.chrome import load_chrome

        try:
            return load_chrome(path)
        except zlib.error as e:  # not an OSError: gzip lets it through from a damaged deflate stream
            raise InputError(f"{path} is a damaged gzip file ({e})") from None
    raise InputError(f"{path} is neither a brrrtui recording nor a torch.profiler .json/.json.gz trace")


def _is_gzipped_recording(path: str) -> bool:
    with open(path, "rb") as f:
        if f.read(2) != b"\x1f\x8b":
            return False
    try:
        with gzip.open(path, "rb") as f:
            return f.read(16) == b"SQLite format 3\x00"
    except (OSError, EOFError, zlib.error):
        return False


def load_gzipped_recording(path: str) -> Trace:
    """A recording compressed for storage (`gzip run.brrr`): unpack to a temporary file, read it whole."""
    with tempfile.TemporaryDirectory(prefix="brrrtui-") as tmp:
        plain = os.path.join(tmp, os.path.basename(path).removesuffix(".gz") or "recording.brrr")
        try:
            with gzip.open(path, "rb") as src, open(plain, "wb") as dst:
                shutil.copyfileobj(src, dst)
        except (OSError, EOFError, zlib.error) as e:
            raise InputError(f"{path} is a truncated or damaged gzip file ({e})") from None
        return load_recording(plain, source=path)
