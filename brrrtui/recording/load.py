"""Open any input brrrtui reads: its own recordings or torch.profiler Chrome traces.

A recording compressed for storage (`gzip run.brrr`) is unpacked into a temporary file (SQLite reads files),
streamed, never more of it than SQLite would read: the database's own header says how big it is (page size
times page count), so a small .gz that expands to gigabytes past that is cut there. A file that claims more
than TMPDIR has room for, or a TMPDIR that fills while unpacking, is said so in one line (how much it needs,
how much is free), never reported as a damaged gzip.
"""

from __future__ import annotations

import errno
import gzip
import os
import stat
import tempfile
import zlib
from collections.abc import Mapping

import numpy as np

from brrrtui.contract.errors import InputError
from brrrtui.contract.model import Table, Trace
from brrrtui.recording.checks import RecordingError
from brrrtui.recording.ranks import open_as_one
from brrrtui.recording.store import TABLES, is_recording, load_recording
from brrrtui.runtime.allocator import tune_for_analysis


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
        if not stat.S_ISREG(os.stat(path).st_mode):  # a FIFO would be waited on for ever
            raise InputError(
                f"{path} is not a regular file (a FIFO, socket or device); "
                "give a .brrr recording or a torch.profiler .json/.json.gz trace"
            )
        if os.path.getsize(path) == 0:
            raise InputError(f"{path} is empty (0 bytes): the recording was never written")
        if is_recording(path):
            trace = for_analysis(load_recording(path))
            return open_as_one(trace, path)  # a distributed run: one rank, the set in meta
        if _is_gzipped_recording(path):
            return load_gzipped_recording(path)
    except OSError as e:
        raise InputError(f"{path}: cannot read ({e.strerror})") from None
    if path.endswith((".json", ".json.gz", ".gz")):
        # imported here: a recording needs none of the Chrome readers' ~20 ms of imports
        from brrrtui.recording.chrome.load import load_chrome

        try:
            return load_chrome(path)
        except zlib.error as e:  # not an OSError: gzip lets it through from a damaged deflate stream
            raise InputError(f"{path} is a damaged gzip file ({e})") from None
    raise InputError(f"{path} is neither a brrrtui recording nor a torch.profiler .json/.json.gz trace")


def check_folds(path: str, tables: Mapping[str, Table]) -> None:
    """Every segment of folded aggregates has its fold: the recorder commits a fold's stream_agg and
    stream_folds rows in one transaction, so aggregates after a window no fold names are damage (the stream
    view takes a segment's time span from its folds)."""
    agg, folds = tables.get("stream_agg"), tables.get("stream_folds")
    if agg is None or not len(agg):
        return
    known = np.unique(folds.after_window) if folds is not None and len(folds) else np.empty(0, np.int64)
    stray = np.setdiff1d(np.unique(agg.after_window), known)
    if len(stray):
        raise RecordingError(
            f"{path} is damaged: stream_agg holds aggregates after window {int(stray[0])}, which no fold names"
        )


WINDOW_LIMIT = 2**23
"""Window ids a recording may hold (8 M windows: a window a second for 97 days): the analysis packs a window id
above a 40-bit correlation id into one int64 key."""
WINDOW_COLUMNS = ("window", "after_window", "template_window")


def check_window_ids(path: str, tables: Mapping[str, Table]) -> None:
    """Every window id is -1 (none) or below WINDOW_LIMIT."""
    for table_name, table in tables.items():
        for col in WINDOW_COLUMNS:
            values = table.columns.get(col)
            if values is None or not len(values):
                continue
            lo, hi = int(values.min()), int(values.max())
            if lo < -1 or hi >= WINDOW_LIMIT:
                raise RecordingError(
                    f"{path} is damaged: {table_name}.{col} holds the window id {lo if lo < -1 else hi}"
                )


def for_analysis(trace: Trace) -> Trace:
    """`trace` (a loaded recording) once what the analysis relies on beyond a load's checks holds."""
    path = trace.source or "recording"
    check_folds(path, {"stream_agg": trace.stream_agg, "stream_folds": trace.stream_folds})
    check_window_ids(path, {name: getattr(trace, name) for name in TABLES})
    return trace


def _is_gzipped_recording(path: str) -> bool:
    with open(path, "rb") as f:
        if f.read(2) != b"\x1f\x8b":
            return False
    try:
        with gzip.open(path, "rb") as f:
            return f.read(16) == b"SQLite format 3\x00"
    except (OSError, EOFError, zlib.error):
        return False


UNPACK_CHUNK = 1 << 20
UNPACK_HEADROOM = 64 << 20
"""Space left free in TMPDIR after unpacking a recording (or a tenth of what is free, if less): other programs
write there too."""


def claimed_size(header: bytes) -> int | None:
    """The size of the SQLite database whose first 100 bytes are `header`, as its header states it (page size
    times the in-header page count), when that count is valid (SQLite 3.7.0+ keeps it so, and then reads no
    page past it); None when unknown."""
    if len(header) < 100 or not header.startswith(b"SQLite format 3\x00"):
        return None
    page = int.from_bytes(header[16:18], "big")
    page = 65536 if page == 1 else page
    pages = int.from_bytes(header[28:32], "big")
    valid = header[24:28] == header[92:96] and pages > 0
    if not valid or page < 512 or page & (page - 1):
        return None
    return page * pages


def _amount(n: int) -> str:
    return f"{n / 1e9:,.2f} GB" if n >= 1e9 else f"{n / 1e6:,.1f} MB"


def _no_room(path: str, folder: str, need: int | None, free: int) -> InputError:
    need_text = _amount(need) if need is not None else f"more than {_amount(free)}"
    return InputError(
        f"not enough space in TMPDIR ({folder}) to unpack {path}: it needs {need_text}, "
        f"{_amount(free)} free (set TMPDIR to a roomier folder, or gunzip it yourself)"
    )


def load_gzipped_recording(path: str) -> Trace:
    """A recording compressed for storage (`gzip run.brrr`): unpacked to a temporary file (at most the size
    its SQLite header states, and only when TMPDIR has room for it), read whole."""
    folder = tempfile.gettempdir()
    try:
        with gzip.open(path, "rb") as src:
            header = src.read(100)
    except (OSError, EOFError, zlib.error) as e:
        raise InputError(f"{path} is a truncated or damaged gzip file ({e})") from None
    claimed = claimed_size(header)
    free = free_bytes(folder)
    if claimed is not None and claimed + min(UNPACK_HEADROOM, free // 10) > free:
        raise _no_room(path, folder, claimed, free)
    room = free - min(UNPACK_HEADROOM, free // 10)  # when the header gives no size: stop before TMPDIR fills
    with tempfile.TemporaryDirectory(prefix="brrrtui-") as tmp:
        plain = os.path.join(tmp, os.path.basename(path).removesuffix(".gz") or "recording.brrr")
        written = 0
        try:
            with gzip.open(path, "rb") as src, open(plain, "wb") as dst:
                while claimed is None or written < claimed:
                    want = UNPACK_CHUNK if claimed is None else min(UNPACK_CHUNK, claimed - written)
                    chunk = src.read(want)
                    if not chunk:
                        break
                    if claimed is None and written + len(chunk) > room:
                        raise _no_room(path, folder, None, free)
                    dst.write(chunk)
                    written += len(chunk)
        except OSError as e:
            if e.errno in (errno.ENOSPC, errno.EDQUOT, errno.EFBIG):
                raise InputError(
                    f"not enough space in TMPDIR ({folder}) to unpack {path}: it filled after "
                    f"{_amount(written)} ({e.strerror}; set TMPDIR to a roomier folder, or gunzip it yourself)"
                ) from None
            raise InputError(f"{path} is a truncated or damaged gzip file ({e})") from None
        except (EOFError, zlib.error) as e:
            raise InputError(f"{path} is a truncated or damaged gzip file ({e})") from None
        return for_analysis(load_recording(plain, source=path))


def free_bytes(folder: str) -> int:
    """Bytes free in `folder`'s file system (for an unprivileged user), or a huge number when unknown."""
    try:
        st = os.statvfs(folder)
    except OSError:
        return 1 << 62
    return st.f_bavail * st.f_frsize
