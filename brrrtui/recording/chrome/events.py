"""The event-by-event reader of a Chrome trace's events: each `ph: "X"` event of a known category becomes a
row of GPU_SCHEMA, RUNTIME_SCHEMA, OP_SCHEMA or SPAN_SCHEMA. A field of the wrong type reads as unknown; an
event without a usable time is skipped and counted. brrrtui.recording.chrome.bulk reads the same rows in
bulk and hands this reader whatever it cannot read exactly the same way."""

from __future__ import annotations

import json
import math
import re
import sys
from dataclasses import dataclass
from typing import Any

from brrrtui.contract.collectives import DTYPE_KEY, NELEMS_KEY, message_bytes
from brrrtui.contract.errors import InputError
from brrrtui.contract.model import SourceLine, StringTable, Table, table_from_rows
from brrrtui.contract.safe import safe_text
from brrrtui.contract.schema import (
    GPU_SCHEMA,
    NONE,
    OP_SCHEMA,
    RUNTIME_SCHEMA,
    SPAN_SCHEMA,
    GpuKind,
    WindowMode,
)
from brrrtui.contract.userfiles import is_user_file
from brrrtui.recording.checks import TIME_LIMIT

Row = tuple[Any, ...]
_FRAME = re.compile(r"^(?P<file>.*)\((?P<line>\d+)\): (?P<func>.*)$")
_GPU_CATS = {"kernel": GpuKind.KERNEL, "gpu_memcpy": GpuKind.MEMCPY, "gpu_memset": GpuKind.MEMSET}
MAX_INT_DIGITS = 40
MAX_TEXT = 16 << 10
"""The most characters of one name a trace gives (a kernel, an op, a frame, shapes) that are kept: each pass
over the names (analyzers' regular expressions, the views) costs time per character."""


class TraceFormatError(InputError):
    """The file is not a torch.profiler trace (or not a readable one)."""


class Unreadable(Exception):
    """A trace no reader follows within its bounds; str(e) completes a sentence that begins with the path."""


def bounded_text(value: Any) -> str:
    """safe_text(value), cut to MAX_TEXT characters and marked with how many more there were (so names that
    differ in length stay distinct)."""
    text = safe_text(value)
    if len(text) <= MAX_TEXT:
        return text
    return f"{text[:MAX_TEXT]}...[{len(text) - MAX_TEXT} more characters]"


def _bounded_int(text: str) -> int | float:
    """A JSON integer: exact up to MAX_INT_DIGITS digits, else as a float (+-inf past ~308 digits). `int()` of
    a long digit string takes quadratic time and is refused past 4300 digits (a ValueError)."""
    return int(text) if len(text) <= MAX_INT_DIGITS else float(text)


DECODER = json.JSONDecoder(parse_int=_bounded_int)
"""The json module's decoder with bounded integers (a Python call per integer: ~1.7x the time of a trace)."""
_PLAIN = json.JSONDecoder()


def loads(text: str) -> Any:
    """One JSON value, integers of any length read as bounded numbers: the json module's own decoder, and
    DECODER where an integer passes the interpreter's limit on digits (4300; none: always DECODER). Nesting
    is bounded by the recursion limit: RecursionError."""
    if sys.get_int_max_str_digits() == 0:  # no limit: int() of a long digit string takes quadratic time
        return DECODER.decode(text)
    try:
        return _PLAIN.decode(text)
    except json.JSONDecodeError:
        raise
    except ValueError:  # an integer of more digits than int() converts
        return DECODER.decode(text)


def raw_loads(text: str) -> tuple[Any, int]:
    """The JSON value at the start of `text` and where it ends, as `loads` reads it."""
    if sys.get_int_max_str_digits() == 0:
        return DECODER.raw_decode(text)
    try:
        return _PLAIN.raw_decode(text)
    except json.JSONDecodeError:
        raise
    except ValueError:
        return DECODER.raw_decode(text)


def int_field(value: Any, default: int = NONE, limit: int = 2**62) -> int:
    """An integer field of a trace event, or `default` where it holds anything else (a damaged trace)."""
    if isinstance(value, bool):
        return default
    if isinstance(value, int):
        return value if -limit <= value <= limit else default
    if isinstance(value, float):
        return int(value) if abs(value) <= limit else default  # NaN fails the comparison
    if isinstance(value, str):
        try:
            return int_field(int(value), default, limit)
        except ValueError:
            return default
    return default


def _float(value: Any) -> float:
    """A float field (flops), NaN where unknown or not a number."""
    if isinstance(value, int | float) and not isinstance(value, bool):
        return float(value)
    return float("nan")


def tid_of(value: Any, tids: dict[Any, int]) -> int:
    if isinstance(value, int) and not isinstance(value, bool) and abs(value) < 2**62:
        return value
    if not isinstance(value, str | int | float | None):
        value = safe_text(value)  # a list or an object where a thread id belongs: a lane of its own
    return tids.setdefault(value, -(len(tids) + 2))  # string lanes ("stream 7 ...") get negative ids


def shape_text(value: Any) -> str | None:
    """grid/block, "x,y,z": only from a list of ints."""
    if (
        isinstance(value, list)
        and value
        and all(isinstance(v, int) and not isinstance(v, bool) for v in value)
    ):
        return ",".join(map(str, value))
    return None


def dims_text(value: Any) -> str | None:
    if value is None:
        return None
    try:
        return bounded_text(json.dumps(value, separators=(",", ":")))
    except (TypeError, ValueError, RecursionError):
        return None


def nccl_bytes(nelems: Any, dtype: Any) -> int:
    """message_bytes, -1 where the element count is an infinite float (int() of it overflows)."""
    try:
        return message_bytes(nelems, dtype)
    except OverflowError:
        return -1


def _is_number(v: Any) -> bool:
    return isinstance(v, int | float) and not isinstance(v, bool) and math.isfinite(v)


class Rows:
    """The rows of one Chrome trace, gathered event by event."""

    def __init__(self, base_ns: int):
        self.base_ns = base_ns
        self.strings = StringTable()
        self.lines: list[SourceLine] = []
        self.line_ids: dict[tuple[str, int, str], int] = {}
        self.tids: dict[Any, int] = {}
        self.gpu: list[Row] = []
        self.runtime: list[Row] = []
        self.ops: list[Row] = []
        self.spans: list[Row] = []
        self.step_ends: list[int] = []
        self.skipped = 0  # events without a usable time (a damaged trace)

    def add(self, ev: Any) -> None:
        """One trace event; only complete ("X") events of known categories make rows. A field of the wrong
        type reads as unknown; an event without a usable time is skipped and counted."""
        if not isinstance(ev, dict) or ev.get("ph") != "X":
            return
        ts: Any = ev.get("ts")
        dur: Any = ev.get("dur", 0)
        if not (_is_number(ts) and _is_number(dur) and abs(ts) < 1e18 and 0 <= dur < 1e15):
            self.skipped += 1
            return
        start = self.base_ns + int(round(float(ts) * 1000.0))
        dur_ns = int(round(float(dur) * 1000.0))
        if not 0 <= start <= TIME_LIMIT // 2:
            self.skipped += 1
            return
        cat = ev.get("cat")
        args = ev.get("args")
        args = args if isinstance(args, dict) else {}
        name = bounded_text(ev.get("name", ""))
        tid = ev.get("tid")
        if not isinstance(cat, str):
            return
        cat = cat.partition(",")[0]  # a list of categories ("kernel,memory" from brrrtui export): the first
        if cat in _GPU_CATS:
            self._gpu(int(_GPU_CATS[cat]), name, start, dur_ns, args)
        elif cat in ("cuda_runtime", "cuda_driver"):
            correlation = int_field(args.get("correlation"))
            self.runtime.append((0, self.strings(name), start, dur_ns, tid_of(tid, self.tids), correlation))
        elif cat in ("cpu_op", "user_annotation"):
            self._op(name, start, dur_ns, tid_of(tid, self.tids), args)
            if cat == "user_annotation" and name.startswith("Optimizer.step#"):
                self.step_ends.append(start + dur_ns)
        elif cat == "python_function":
            self._frame(name, start, dur_ns, tid)

    def _gpu(self, kind: int, name: str, start: int, dur: int, args: dict[str, Any]) -> None:
        grid, block = shape_text(args.get("grid")), shape_text(args.get("block"))
        self.gpu.append(
            (
                0,
                kind,
                self.strings(name),
                start,
                dur,
                int_field(args.get("device"), 0, 2**31 - 1),
                int_field(args.get("stream"), NONE, 2**31 - 1),
                int_field(args.get("correlation")),
                self.strings(grid) if grid else NONE,
                self.strings(block) if block else NONE,
                self._bytes(kind, args),
            )
        )

    @staticmethod
    def _bytes(kind: int, args: dict[str, Any]) -> int:
        """A copy's bytes; an NCCL kernel's message size ("In msg nelems" x dtype), else NONE."""
        nbytes = int_field(args.get("bytes"))
        if nbytes < 0 and kind == GpuKind.KERNEL and NELEMS_KEY in args:
            nbytes = nccl_bytes(args.get(NELEMS_KEY), args.get(DTYPE_KEY))
        return nbytes

    def _op(self, name: str, start: int, dur: int, tid: int, args: dict[str, Any]) -> None:
        self.ops.append(
            (
                0,
                self.strings(name),
                start,
                dur,
                tid,
                int_field(args.get("Sequence number")),
                int_field(args.get("Fwd thread id")),
                self.strings(dims_text(args.get("Input Dims"))),
                self.strings(dims_text(args.get("Input type"))),
                _float(args.get("flops")),
            )
        )

    def frame_line(self, name: str) -> int:
        """The line id of a Python frame `path(line): function` of the user's code, else NONE."""
        m = _FRAME.match(bounded_text(name))
        if not m or not is_user_file(m["file"]):
            return NONE
        return self.line_id((m["file"], min(int(m["line"][:10]), 2**31 - 1), m["func"]))

    def line_id(self, key: tuple[str, int, str]) -> int:
        """The id of the source line (file, line, function), interned on first sight."""
        lid = self.line_ids.get(key)
        if lid is None:
            lid = self.line_ids[key] = len(self.lines)
            self.lines.append(SourceLine(*key))
        return lid

    def _frame(self, name: str, start: int, dur: int, tid: Any) -> None:
        """A Python frame of the user's code: a span at function level."""
        lid = self.frame_line(name)
        if lid != NONE:
            self.spans.append((0, lid, start, dur, tid_of(tid, self.tids), NONE, NONE))


def base_ns(value: Any) -> int:
    """A trace's `baseTimeNanoseconds`, the ns every event time is added to (0 where unusable)."""
    return max(0, int_field(value, 0, TIME_LIMIT // 2))


def header_base(header: str) -> tuple[Any, int]:
    """The document's base time as written before its events, and as the ns every event time is added to."""
    top = loads(header + '"traceEvents": []}')
    value = top.get("baseTimeNanoseconds") if isinstance(top, dict) else None
    return value, base_ns(value)


def document(header: str, trailer: str, base_value: Any) -> dict[str, Any] | None:
    """The document's values around its events; None where the text after the events does not close the
    document the header began, or its base time came after the events."""
    top = loads(header + '"traceEvents": []' + trailer)
    if (
        not isinstance(top, dict)
        or top.pop("traceEvents") != []
        or top.get("baseTimeNanoseconds") != base_value
    ):
        return None
    return top


def window_row(gpu: Table, ops: Table, steps: int, events: int) -> Row | None:
    """The trace's one WINDOW_SCHEMA row: from its first activity to its last; None when it has none."""
    if not len(gpu) and not len(ops):
        return None
    starts = [int(t.start_ns.min()) for t in (gpu, ops) if len(t)]
    ends = [int((t.start_ns + t.dur_ns).max()) for t in (gpu, ops) if len(t)]
    first_step, last_step = (0, steps - 1) if steps else (NONE, NONE)
    return (0, int(WindowMode.FOREIGN), min(starts), max(ends), first_step, last_step, NONE, events)


SCHEMAS: dict[str, dict[str, Any]] = {
    "gpu": GPU_SCHEMA,
    "runtime": RUNTIME_SCHEMA,
    "ops": OP_SCHEMA,
    "spans": SPAN_SCHEMA,
}


@dataclass
class Parsed:
    """A trace's events as tables, and the document's other top-level values."""

    top: dict[str, Any]
    strings: list[str]
    lines: list[SourceLine]
    tables: dict[str, Table]
    step_ends: list[int]
    skipped: int
    events: int

    @staticmethod
    def of_rows(top: dict[str, Any], rows: Rows, events: int) -> Parsed:
        tables = {name: table_from_rows(getattr(rows, name), schema) for name, schema in SCHEMAS.items()}
        return Parsed(top, rows.strings.strings, rows.lines, tables, rows.step_ends, rows.skipped, events)
