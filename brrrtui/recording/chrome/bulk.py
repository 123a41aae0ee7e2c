"""Reading a big Chrome/Kineto trace without holding it as Python objects (msgspec).

`json.load` of a 1 GB torch.profiler trace builds a dict per event and a Python object per field, ~6 GiB, and
takes ~36 s on our CPU machine. Here the file is read in blocks (plain or gzip) and cut into runs of whole
events at the last `},{` of each block (a cut that falls inside a string fails to decode and is moved on to
the next block); msgspec decodes each run into typed Structs that keep only the fields brrrtui reads (every
other key is skipped without building an object; names, grid/block and shapes are interned once), and numpy
turns each run into columns (map + attrgetter + fromiter, in C). Memory is a block, one run's Structs and the
columns of the events kept: 300 MB of JSON (300 k kernels, 1.8 M events) loaded in 294 MB peak RSS, against
2.2 GB through `json` (benchmarks/bench_chrome.py).

What this path does not read exactly as `chrome.events.Rows` would — a run whose fields have other types (a
damaged trace), a number msgspec does not take (NaN), the last event and what follows the array — goes
through `Rows`, the `json` path's reader, event by event; a document this path cannot follow at all (no
`traceEvents` array, a truncated file, the base time after the events) returns None, and the caller reads
it with `json`, which also words its error.

Any input is read in time linear in its size and in bounded memory beyond the events kept: each block is
searched for event boundaries only in the bytes no search covered yet; a run that fails to decode (a cut
inside a string, the text after the events) is tried again only once the buffer has doubled; a stretch of
more than MAX_STRETCH bytes without a boundary that decodes (one event, or the text after the events), or a
document whose traceEvents array does not begin within it, is refused (chrome.events.Unreadable) rather than
held whole. Nesting deeper than the interpreter's recursion limit raises RecursionError (the caller words it).
"""

from __future__ import annotations

import gc
import gzip
import itertools
import math
import operator
import re
from collections import deque
from collections.abc import Callable, Iterator
from operator import attrgetter
from typing import Any

import msgspec
import numpy as np

from brrrtui.contract.collectives import DTYPE_KEY, NELEMS_KEY
from brrrtui.contract.model import Table, table_from_rows
from brrrtui.contract.schema import NONE, GpuKind
from brrrtui.recording.checks import TIME_LIMIT
from brrrtui.recording.chrome.events import (
    SCHEMAS,
    Parsed,
    Rows,
    Unreadable,
    bounded_text,
    dims_text,
    document,
    header_base,
    loads,
    nccl_bytes,
    raw_loads,
    shape_text,
    tid_of,
)

BLOCK = 16 << 20
MAX_STRETCH = 512 << 20
"""The most bytes held at once without an event boundary that decodes."""
_OVERLAP = 64  # bytes before a search's start that a boundary found there may begin in
_MISSING = -(2**63)
_NULL = msgspec.Raw(b"null")
START = re.compile(rb'"traceEvents"\s*:\s*\[')
CUT = re.compile(rb"\}\s*,\s*\{")


class _Args(msgspec.Struct, gc=False):
    device: int = _MISSING
    stream: int = _MISSING
    correlation: int = _MISSING
    bytes: int = _MISSING
    grid: msgspec.Raw = _NULL
    block: msgspec.Raw = _NULL
    dims: msgspec.Raw = msgspec.field(default=_NULL, name="Input Dims")
    types: msgspec.Raw = msgspec.field(default=_NULL, name="Input type")
    seq: int = msgspec.field(default=_MISSING, name="Sequence number")
    fwd: int = msgspec.field(default=_MISSING, name="Fwd thread id")
    flops: float = math.nan
    nelems: msgspec.Raw = msgspec.field(default=_NULL, name=NELEMS_KEY)  # an NCCL kernel's message
    dtype: msgspec.Raw = msgspec.field(default=_NULL, name=DTYPE_KEY)


class _Event(msgspec.Struct, gc=False):
    ph: str = ""
    cat: str | None = None
    name: str = ""
    ts: float = math.nan
    dur: float = 0.0
    tid: int | str | None = None
    args: _Args = msgspec.field(default_factory=_Args)


_CATS = {
    "kernel": 0,
    "gpu_memcpy": 1,
    "gpu_memset": 2,
    "cuda_runtime": 3,
    "cuda_driver": 3,
    "cpu_op": 4,
    "user_annotation": 5,
    "python_function": 6,
}
assert (_CATS["kernel"], _CATS["gpu_memcpy"], _CATS["gpu_memset"]) == tuple(GpuKind)


class _Memo(dict[Any, Any]):
    """A dict that computes a missing value once: map(memo.__getitem__, values) runs in C for known keys."""

    def __init__(self, make: Callable[[Any], Any]):
        super().__init__()
        self.make = make

    def __missing__(self, key: Any) -> Any:
        value = self[key] = self.make(key)
        return value


def _col(objects: Any, field: str, dtype: Any, memo: _Memo | None = None, raw: bool = False) -> np.ndarray:
    """One field of every Struct in `objects` as an array, in C (map + attrgetter + fromiter): the field's
    values, their bytes (`raw`: a msgspec.Raw), and/or what `memo` maps them to."""
    values: Iterator[Any] = map(attrgetter(field), objects)
    if raw:
        values = map(bytes, values)
    if memo is not None:
        values = map(memo.__getitem__, values)
    return np.fromiter(values, dtype, len(objects))


def _message_bytes(args: Any, nbytes: np.ndarray) -> np.ndarray:
    """`nbytes`, with an NCCL kernel's message size ("In msg nelems" x dtype) where it has none (a Python
    step only for the rows that carry one: the collectives)."""
    missing = map(attrgetter("nelems"), args)  # a field the event lacks is the default object itself
    carried = np.fromiter(map(operator.is_not, missing, itertools.repeat(_NULL)), bool, len(args))
    for k in np.flatnonzero(carried & (nbytes < 0)).tolist():
        try:
            nbytes[k] = nccl_bytes(
                loads(bytes(args[k].nelems).decode()), loads(bytes(args[k].dtype).decode())
            )
        except ValueError:
            pass
    return nbytes


def _ints(objects: Any, field: str, default: int, limit: int = 2**62) -> np.ndarray:
    """chrome.events.int_field over a column: a value out of [-limit, limit] (or missing) is `default`
    (OverflowError where one does not fit int64: the caller reads the run with `Rows`)."""
    a = _col(objects, field, np.int64)
    return np.where((a < -limit) | (a > limit), default, a)


class _Columns:
    """The kept events' columns, run by run, and what `Rows` (the event-by-event reader) adds in between."""

    def __init__(self, rows: Rows):
        self.rows = rows  # shares its string table, lines and thread ids with this reader
        self.parts: dict[str, list[dict[str, np.ndarray]]] = {name: [] for name in SCHEMAS}
        self.step_ends: list[np.ndarray] = []
        self.skipped = 0
        self.name = _Memo(lambda s: rows.strings(bounded_text(s)))
        self.frame = _Memo(rows.frame_line)
        self.tid = _Memo(lambda t: tid_of(t, rows.tids))
        self.cat = _Memo(lambda c: _CATS.get(c.partition(",")[0], -1) if isinstance(c, str) else -1)
        self.is_x = _Memo(lambda p: p == "X")
        self.step = _Memo(lambda s: bounded_text(s).startswith("Optimizer.step#"))
        self.shape = _Memo(self._shape)
        self.dims = _Memo(self._dims)

    def _shape(self, raw: bytes) -> int:
        text = shape_text(msgspec.json.decode(raw))
        return self.rows.strings(text) if text else NONE

    def _dims(self, raw: bytes) -> int:
        text = dims_text(msgspec.json.decode(raw))
        return NONE if text is None else self.rows.strings(text)

    def flush_rows(self) -> None:
        """Move what `Rows` gathered into the parts, so the tables keep the events' order."""
        r = self.rows
        for name, schema in SCHEMAS.items():
            rows = getattr(r, name)
            if rows:
                self.parts[name].append(table_from_rows(rows, schema).columns)
                rows.clear()
        if r.step_ends:
            self.step_ends.append(np.array(r.step_ends, dtype=np.int64))
            r.step_ends.clear()
        self.skipped += r.skipped
        r.skipped = 0

    def tables(self) -> tuple[dict[str, Table], list[int]]:
        """The parts joined, in the schemas' dtypes; the step ends."""
        self.flush_rows()
        out = {}
        for name, schema in SCHEMAS.items():
            parts, columns = self.parts[name], {}
            for c, d in schema.items():  # each column's parts are let go once joined
                columns[c] = (
                    np.concatenate([p.pop(c) for p in parts]).astype(d, copy=False)
                    if parts
                    else np.empty(0, d)
                )
            out[name] = Table(columns)
            parts.clear()
        ends = np.concatenate(self.step_ends).tolist() if self.step_ends else []
        return out, ends

    def add(self, events: list[_Event]) -> None:
        """One run of events, all or nothing."""
        n = len(events)
        is_x = _col(events, "ph", bool, self.is_x)
        ts = _col(events, "ts", np.float64) * 1000.0
        dur = _col(events, "dur", np.float64)
        timed = np.isfinite(ts) & np.isfinite(dur) & (np.abs(ts) < 1e21) & (dur >= 0) & (dur < 1e15)
        start = self.rows.base_ns + np.round(np.where(timed, ts, 0.0)).astype(np.int64)
        timed &= (start >= 0) & (start <= TIME_LIMIT // 2)
        code = _col(events, "cat", np.int8, self.cat)
        keep = is_x & timed & (code >= 0)
        every: np.ndarray = np.empty(n, dtype=object)
        every[:] = events
        kept, code, start = every[keep], code[keep], start[keep]
        dur_ns = np.round(dur[keep] * 1000.0).astype(np.int64)
        tid = _col(kept, "tid", np.int64, self.tid)
        frames = code == 6
        ids = np.full(len(kept), NONE, dtype=np.int64)
        ids[~frames] = _col(kept[~frames], "name", np.int64, self.name)
        line = _col(kept[frames], "name", np.int64, self.frame)
        parts = self._tables(code, kept, ids, start, dur_ns, tid)
        sel = np.nonzero(frames)[0][line >= 0]
        if len(sel):
            none = np.full(len(sel), NONE, dtype=np.int64)
            spans = {
                "window": np.zeros(len(sel), np.int64),
                "line": line[line >= 0],
                "start_ns": start[sel],
                "dur_ns": dur_ns[sel],
                "tid": tid[sel],
                "module": none,
                "lib_line": none,
            }
            parts.append(("spans", spans))
        for table, cols in parts:
            if table == "steps":
                self.step_ends.append(cols["end_ns"])
            else:  # in the schema's dtypes now: the parts are most of the memory until they are joined
                self.parts[table].append(
                    {c: cols[c].astype(d, copy=False) for c, d in SCHEMAS[table].items()}
                )
        self.skipped += int((is_x & ~timed).sum())

    def _tables(
        self,
        code: np.ndarray,
        kept: np.ndarray,
        ids: np.ndarray,
        start: np.ndarray,
        dur: np.ndarray,
        tid: np.ndarray,
    ) -> list[tuple[str, dict[str, np.ndarray]]]:
        """The gpu, runtime and ops columns of a run's kept events (and its optimizer steps' ends)."""
        out: list[tuple[str, dict[str, np.ndarray]]] = []
        args = np.fromiter(map(attrgetter("args"), kept), object, len(kept))
        for table, mask in (("gpu", code <= 2), ("runtime", code == 3), ("ops", (code == 4) | (code == 5))):
            if not mask.any():
                continue
            a = args[mask]
            cols = {
                "window": np.zeros(len(a), np.int64),
                "name": ids[mask],
                "start_ns": start[mask],
                "dur_ns": dur[mask],
            }
            if table == "gpu":
                cols |= {
                    "kind": code[mask].astype(np.int64),
                    "device": _ints(a, "device", 0, 2**31 - 1),
                    "stream": _ints(a, "stream", NONE, 2**31 - 1),
                    "correlation": _ints(a, "correlation", NONE),
                    "grid": _col(a, "grid", np.int64, self.shape, raw=True),
                    "block": _col(a, "block", np.int64, self.shape, raw=True),
                    "bytes": _message_bytes(a, _ints(a, "bytes", NONE)),
                }
            elif table == "runtime":
                cols |= {"tid": tid[mask], "correlation": _ints(a, "correlation", NONE)}
            else:
                cols |= {
                    "tid": tid[mask],
                    "seq": _ints(a, "seq", NONE),
                    "fwd_tid": _ints(a, "fwd", NONE),
                    "shapes": _col(a, "dims", np.int64, self.dims, raw=True),
                    "dtypes": _col(a, "types", np.int64, self.dims, raw=True),
                    "flops": _col(a, "flops", np.float64),
                    "concrete": np.full(len(a), NONE, np.int64),  # as chrome.events.Rows: not read from traces
                }
                steps = code[mask] == 5
                steps[steps] = _col(kept[mask][steps], "name", bool, self.step)
                if steps.any():
                    out.append(("steps", {"end_ns": cols["start_ns"][steps] + cols["dur_ns"][steps]}))
            out.append((table, cols))
        return out


_DECODE = msgspec.json.Decoder(list[_Event])


def _blocks(path: str, start: int = 0, end: int = -1) -> Iterator[bytes]:
    """The file in blocks; bytes [start, end) of a plain file (brrrtui.recording.chrome.split's halves)."""
    opener: Any = gzip.open if path.endswith(".gz") else open
    with opener(path, "rb") as f:
        f.seek(start)
        while (size := BLOCK if end < 0 else min(BLOCK, end - f.tell())) > 0 and (block := f.read(size)):
            yield block


def _header(blocks: Iterator[bytes]) -> tuple[bytes, bytes]:
    """(the document up to its traceEvents array, what follows the array's "[" in the blocks read so far);
    ValueError where the document ends first, Unreadable where the array does not begin in MAX_STRETCH."""
    buf: bytes | bytearray = b""
    for block in blocks:
        searched = max(0, len(buf) - _OVERLAP)
        if not buf:
            buf = block  # the usual case: the array begins in the first block, which is not copied
        else:
            buf = buf if isinstance(buf, bytearray) else bytearray(buf)
            buf += block
        m = START.search(buf, searched)
        if m:
            return bytes(buf[: m.start()]), bytes(buf[m.end() :])
        if len(buf) > MAX_STRETCH:
            raise Unreadable(f"has no traceEvents array in its first {MAX_STRETCH / 2**20:g} MiB")
    raise ValueError("no traceEvents array")


def _last_cut(buf: bytearray, since: int = 1) -> int | None:
    """The position of the comma of the last `},{` that begins at or after `since` - _OVERLAP in `buf`
    (searched from the end, a window at a time: each byte once), or None."""
    since = max(1, since - _OVERLAP)
    end = len(buf)
    while end > since:
        tail = max(since, end - 65536)
        last = deque(CUT.finditer(buf, tail, min(len(buf), end + _OVERLAP)), maxlen=1)
        if last:
            return buf.index(b",", last[0].start())
        end = tail
    return None


def _decode_run(run: memoryview, cols: _Columns) -> int | None:
    """Add one run ("[" + events + "]") to `cols`; its event count, or None when it is no JSON array (a cut
    that fell inside a string: the caller cuts further on)."""
    try:
        events = _DECODE.decode(run)
        cols.add(events)
        return len(events)
    except (msgspec.ValidationError, msgspec.DecodeError, OverflowError):
        pass  # fields of other types, NaN, a huge number: as the json path reads them
    try:
        objects = loads(bytes(run).decode("utf-8"))
    except ValueError:  # UnicodeDecodeError too
        return None
    for ev in objects:
        cols.rows.add(ev)
    cols.flush_rows()
    return len(objects)


def _event_runs(blocks: Iterator[bytes], first: bytes, cols: _Columns) -> tuple[int, bytes]:
    """Decode the events block by block, each time up to the last `},{` (its comma made the run's "]");
    (events decoded, the rest: the last event through the end of the document). Unreadable where more than
    MAX_STRETCH bytes gather without a run that decodes."""
    buf = bytearray(b"[") + first
    events = 0
    searched = 1  # where the bytes no search for a cut covered begin
    retry_at = 0  # after a run that did not decode: the buffer length at which to try again
    for block in itertools.chain([b""], blocks):  # the first bytes too: a trace of one block is cut as well
        buf += block
        if len(buf) > MAX_STRETCH:
            raise Unreadable(
                f"has more than {MAX_STRETCH / 2**20:g} MiB of JSON without an event boundary that reads "
                "(one event, or the text after the events): not a torch.profiler trace"
            )
        if len(buf) < retry_at:
            continue
        comma = _last_cut(buf, searched)
        searched = len(buf)
        if comma is None:
            continue
        buf[comma] = ord("]")
        with memoryview(buf) as view:
            count = _decode_run(view[: comma + 1], cols)
        if count is None:
            buf[comma] = ord(",")
            retry_at = 2 * len(buf)  # each failed try reads at most as much as the bytes added since
            continue
        events += count
        del buf[1 : comma + 1]
        searched, retry_at = 1, 0
    return events, bytes(buf[1:])


def _finish(rest: bytes, cols: _Columns) -> tuple[int, str]:
    """The last run, read up to the end of the traceEvents array; (its event count, the text after it)."""
    text = "[" + rest.decode("utf-8")
    objects, end = raw_loads(text)
    for ev in objects:
        cols.rows.add(ev)
    cols.flush_rows()
    return len(objects), text[end:]


def read_events(path: str) -> Parsed | None:
    """The trace's events as tables (chrome.events.Parsed), or None where this reader cannot follow the
    document (the caller reads it with `json`, which also words any error)."""
    collecting = gc.isenabled()
    gc.disable()  # runs make millions of short-lived objects, none of them cyclic
    try:
        blocks = _blocks(path)
        head_bytes, first = _header(blocks)
        header = head_bytes.decode("utf-8")
        base_value, base = header_base(header)
        cols = _Columns(Rows(base))
        events, rest = _event_runs(blocks, first, cols)
        count, trailer = _finish(rest, cols)
        top = document(header, trailer, base_value)
    except (OSError, EOFError, ValueError):  # RecursionError and Unreadable: for the caller to word
        return None
    finally:
        if collecting:
            gc.enable()
    if top is None:
        return None
    tables, step_ends = cols.tables()
    rows = cols.rows
    return Parsed(top, rows.strings.strings, rows.lines, tables, step_ends, cols.skipped, events + count)
