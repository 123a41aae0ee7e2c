"""Reading a big plain Chrome trace on two cores.

bulk.py decodes a trace on one core (~11 s of CPU for a 1 GB, 1 M-kernel torch.profiler trace on our CPU
machine). A plain (not gzip) trace of at least MIN_BYTES is cut in two at the first `},{` after its middle:
a second process (`python -m brrrtui.recording.chrome.split PATH START BASE`) reads from that cut to the end
of the document while this one reads up to it, and sends back through a pipe (pickle) its columns and what
they number: strings, source lines, thread lanes. Those are renumbered into this process's tables in order,
as one reader of the whole file would have numbered them. A cut inside a string fails to decode on both
sides; a failure of either half returns None, and the caller reads the file in one process.
"""

from __future__ import annotations

import gc
import os
import pickle
import subprocess
import sys
from collections.abc import Iterator
from typing import Any

import numpy as np

from brrrtui.contract.schema import NONE
from brrrtui.recording.chrome.bulk import (
    CUT,
    START,
    _blocks,
    _Columns,
    _decode_run,
    _event_runs,
    _finish,
)
from brrrtui.recording.chrome.events import Parsed, Rows, document, header_base, tid_of

MIN_BYTES = 128 << 20  # below this a second process (~0.3 s to start) saves little
_PACKAGE_ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
STRING_COLUMNS = {"gpu": ("name", "grid", "block"), "runtime": ("name",), "ops": ("name", "shapes", "dtypes")}
TID_COLUMNS = {"runtime": ("tid",), "ops": ("tid",), "spans": ("tid",)}


def read_events(path: str) -> Parsed | None:
    """The trace's events as tables, read in two processes; None where this reader does not apply (gzip, a
    file under MIN_BYTES, one CPU) or either half cannot be read."""
    if path.endswith(".gz") or _cpus() < 2:
        return None
    try:
        size = os.path.getsize(path)
        head = _head(path) if size >= MIN_BYTES else None
        cut = _cut_after(path, max(head[1], size // 2)) if head else None
        header = head[0].decode("utf-8") if head else ""
        base_value, base = header_base(header) if head else (None, 0)
    except (OSError, ValueError):
        return None
    if head is None or cut is None:
        return None
    child = _start_second_half(path, cut + 1, base)
    if child is None or child.stdout is None:
        return None
    first = second = None
    collecting = gc.isenabled()
    gc.disable()  # runs make millions of short-lived objects, none of them cyclic
    try:
        first = _first_half(path, head[1], cut, base)
        second = pickle.load(child.stdout) if first is not None else None
    except (OSError, EOFError, ValueError, RecursionError, pickle.UnpicklingError):
        pass
    finally:
        if collecting:
            gc.enable()
        if first is None or not isinstance(second, dict):
            child.kill()
        child.stdout.close()
        child.wait()
    if first is None or not isinstance(second, dict) or child.returncode != 0:
        return None
    cols, events = first
    try:
        top = document(header, second["trailer"], base_value)
    except ValueError:
        return None
    if top is None:
        return None
    _merge(cols, second)
    tables, step_ends = cols.tables()
    rows = cols.rows
    return Parsed(
        top, rows.strings.strings, rows.lines, tables, step_ends, cols.skipped, events + second["events"]
    )


def _start_second_half(path: str, start: int, base: int) -> subprocess.Popen[bytes] | None:
    """The process that reads from `start` to the end (None where none can be started: no interpreter to
    run, an embedded Python, no process left to make)."""
    paths = [_PACKAGE_ROOT, os.environ.get("PYTHONPATH")]
    # one OpenBLAS thread: numpy's pool would spin a core away as it loads (brrrtui.numpy_start)
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, paths)), "OPENBLAS_NUM_THREADS": "1"}
    argv = [sys.executable, "-m", __name__, path, str(start), str(base)]
    try:
        return subprocess.Popen(
            argv, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, env=env
        )
    except OSError:
        return None


def _cpus() -> int:
    affinity = getattr(os, "sched_getaffinity", None)  # Linux; elsewhere every CPU counts
    return len(affinity(0)) if affinity is not None else os.cpu_count() or 1


def _head(path: str) -> tuple[bytes, int] | None:
    """(the document up to its traceEvents array, the offset of the array's first event)."""
    with open(path, "rb") as f:
        m = START.search(data := f.read(1 << 20))
    return (data[: m.start()], m.end()) if m else None


def _cut_after(path: str, offset: int) -> int | None:
    """The offset of the comma of the first `},{` at or after `offset`."""
    with open(path, "rb") as f:
        f.seek(offset)
        m = CUT.search(data := f.read(4 << 20))
    return offset + data.index(b",", m.start()) if m else None


def _first_half(path: str, start: int, cut: int, base: int) -> tuple[_Columns, int] | None:
    """The events before the cut: (their columns, their count); None where they do not decode."""
    cols = _Columns(Rows(base))
    events, rest = _event_runs(_blocks(path, start, cut), b"", cols)
    with memoryview(bytearray(b"[") + rest + b"]") as run:
        count = _decode_run(run, cols)
    return None if count is None else (cols, events + count)


def _second_half(path: str, start: int, base: int, parent: int) -> dict[str, Any]:
    """The events from `start` to the end of the document, for the first half's process (`parent`)."""
    cols = _Columns(Rows(base))
    events, rest = _event_runs(_while_alive(_blocks(path, start), parent), b"", cols)
    count, trailer = _finish(rest, cols)
    tables, step_ends = cols.tables()
    rows = cols.rows
    return {
        "columns": {name: table.columns for name, table in tables.items()},
        "step_ends": step_ends,
        "skipped": cols.skipped,
        "events": events + count,
        "strings": rows.strings.strings,
        "lines": [(line.file, line.line, line.function) for line in rows.lines],
        "tids": list(rows.tids.items()),
        "trailer": trailer,
    }


def _while_alive(blocks: Iterator[bytes], parent: int) -> Iterator[bytes]:
    """`blocks`, while the process that wants them lives (a `view` whose user quit does not wait for it)."""
    for block in blocks:
        if os.getppid() != parent:
            raise SystemExit(1)
        yield block


def _merge(cols: _Columns, part: dict[str, Any]) -> None:
    """The second half's columns after the first's, its strings, lines and lanes numbered as the first's."""
    rows = cols.rows
    cols.flush_rows()
    strings = np.array([rows.strings(s) for s in part["strings"]] + [NONE], np.int64)
    lines = np.array([rows.line_id(key) for key in part["lines"]] + [NONE], np.int64)
    lanes = [(lane, tid_of(value, rows.tids)) for value, lane in part["tids"]]
    for name, columns in part["columns"].items():
        for c in STRING_COLUMNS.get(name, ()):
            columns[c] = strings[columns[c]].astype(columns[c].dtype)  # NONE (-1) indexes the NONE at the end
        for c in TID_COLUMNS.get(name, ()):
            was, columns[c] = columns[c], columns[c].copy()
            for lane, tid in lanes:
                columns[c][was == lane] = tid
        if name == "spans":
            columns["line"] = lines[columns["line"]].astype(columns["line"].dtype)
        cols.parts[name].append(columns)
    cols.step_ends.append(np.asarray(part["step_ends"], dtype=np.int64))
    cols.skipped += part["skipped"]


def main(argv: list[str]) -> int:
    path, start, base = argv[0], int(argv[1]), int(argv[2])
    gc.disable()
    part = _second_half(path, start, base, os.getppid())
    pickle.dump(part, sys.stdout.buffer, protocol=pickle.HIGHEST_PROTOCOL)
    sys.stdout.buffer.flush()
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
