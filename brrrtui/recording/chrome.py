"""Load a torch.profiler (Kineto) Chrome trace (`.json` or `.json.gz`) into the columnar model.

Such a trace is one window. Its Python frames (`with_stack=True`) are named `path(line): function` and
resolve user code only to the enclosing function, so its spans are function-level; brrrtui's own recordings
carry exact lines.
"""

from __future__ import annotations

import gzip
import json
import math
import re
from typing import Any

from analyzers.errors import InputError
from analyzers.model import Device, SourceLine, StringTable, Trace, empty_table, table_from_rows
from brrrtui.contract.schema import (
    GPU_SCHEMA,
    NONE,
    OP_SCHEMA,
    RUNTIME_SCHEMA,
    SPAN_SCHEMA,
    STEP_SCHEMA,
    TELEMETRY_SCHEMA,
    WINDOW_SCHEMA,
    GpuKind,
    WindowMode,
)
from brrrtui.contract.userfiles import is_user_file
from brrrtui.recording.checks import TIME_LIMIT
from brrrtui.recording.chrome_extras import restore
from brrrtui.recording.safe import safe_text


class TraceFormatError(InputError):
    """The file is not a torch.profiler trace (or not a readable one)."""


Row = tuple[Any, ...]
_FRAME = re.compile(r"^(?P<file>.*)\((?P<line>\d+)\): (?P<func>.*)$")
_GPU_CATS = {"kernel": GpuKind.KERNEL, "gpu_memcpy": GpuKind.MEMCPY, "gpu_memset": GpuKind.MEMSET}


def read_json(path: str) -> dict[str, Any]:
    opener = gzip.open if path.endswith(".gz") else open
    try:
        with opener(path, "rt", encoding="utf-8") as f:
            data = json.load(f)
    except (OSError, EOFError, UnicodeDecodeError, json.JSONDecodeError) as e:
        raise TraceFormatError(f"{path} is not a readable JSON trace ({e.__class__.__name__}: {e})") from None
    if not isinstance(data, dict) or not isinstance(data.get("traceEvents"), list):
        raise TraceFormatError(f"{path} has no traceEvents list: not a torch.profiler Chrome trace")
    return data


def _int(value: Any, default: int = NONE, limit: int = 2**62) -> int:
    """An integer field of a trace event, or `default` where it holds anything else (a damaged trace)."""
    if isinstance(value, bool):
        return default
    if isinstance(value, int):
        return value if -limit <= value <= limit else default
    if isinstance(value, float):
        return int(value) if abs(value) <= limit else default  # NaN fails the comparison
    if isinstance(value, str):
        try:
            return _int(int(value), default, limit)
        except ValueError:
            return default
    return default


def _float(value: Any) -> float:
    """A float field (flops), NaN where unknown or not a number."""
    if isinstance(value, int | float) and not isinstance(value, bool):
        return float(value)
    return float("nan")


def _tid(value: Any, tids: dict[Any, int]) -> int:
    if isinstance(value, int) and not isinstance(value, bool) and abs(value) < 2**62:
        return value
    if not isinstance(value, str | int | float | None):
        value = safe_text(value)  # a list or an object where a thread id belongs: a lane of its own
    return tids.setdefault(value, -(len(tids) + 2))  # string lanes ("stream 7 ...") get negative ids


def _shape(value: Any) -> str | None:
    """grid/block, "x,y,z": only from a list of ints."""
    if (
        isinstance(value, list)
        and value
        and all(isinstance(v, int) and not isinstance(v, bool) for v in value)
    ):
        return ",".join(map(str, value))
    return None


def _dims(value: Any) -> str | None:
    if value is None:
        return None
    try:
        return safe_text(json.dumps(value, separators=(",", ":")))
    except (TypeError, ValueError, RecursionError):
        return None


def _is_number(v: Any) -> bool:
    return isinstance(v, int | float) and not isinstance(v, bool) and math.isfinite(v)


class _Rows:
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
        name = safe_text(ev.get("name", ""))
        tid = ev.get("tid")
        if not isinstance(cat, str):
            return
        cat = cat.partition(",")[0]  # a list of categories ("kernel,memory" from brrrtui export): the first
        if cat in _GPU_CATS:
            self._gpu(int(_GPU_CATS[cat]), name, start, dur_ns, args)
        elif cat in ("cuda_runtime", "cuda_driver"):
            correlation = _int(args.get("correlation"))
            self.runtime.append((0, self.strings(name), start, dur_ns, _tid(tid, self.tids), correlation))
        elif cat in ("cpu_op", "user_annotation"):
            self._op(name, start, dur_ns, _tid(tid, self.tids), args)
            if cat == "user_annotation" and name.startswith("Optimizer.step#"):
                self.step_ends.append(start + dur_ns)
        elif cat == "python_function":
            self._frame(name, start, dur_ns, tid)

    def _gpu(self, kind: int, name: str, start: int, dur: int, args: dict[str, Any]) -> None:
        grid, block = _shape(args.get("grid")), _shape(args.get("block"))
        self.gpu.append(
            (
                0,
                kind,
                self.strings(name),
                start,
                dur,
                _int(args.get("device"), 0, 2**31 - 1),
                _int(args.get("stream"), NONE, 2**31 - 1),
                _int(args.get("correlation")),
                self.strings(grid) if grid else NONE,
                self.strings(block) if block else NONE,
                _int(args.get("bytes")),
            )
        )

    def _op(self, name: str, start: int, dur: int, tid: int, args: dict[str, Any]) -> None:
        self.ops.append(
            (
                0,
                self.strings(name),
                start,
                dur,
                tid,
                _int(args.get("Sequence number")),
                _int(args.get("Fwd thread id")),
                self.strings(_dims(args.get("Input Dims"))),
                self.strings(_dims(args.get("Input type"))),
                _float(args.get("flops")),
            )
        )

    def _frame(self, name: str, start: int, dur: int, tid: Any) -> None:
        """A Python frame of the user's code: a span at function level."""
        m = _FRAME.match(name)
        if not m or not is_user_file(m["file"]):
            return
        key = (m["file"], min(int(m["line"][:10]), 2**31 - 1), m["func"])
        lid = self.line_ids.get(key)
        if lid is None:
            lid = self.line_ids[key] = len(self.lines)
            self.lines.append(SourceLine(*key))
        self.spans.append((0, lid, start, dur, _tid(tid, self.tids), NONE, NONE))

    def window(self, events: int) -> Row | None:
        """The trace's one WINDOW_SCHEMA row: from its first activity to its last; None when it has none."""
        starts = [r[3] for r in self.gpu] + [r[2] for r in self.ops]
        ends = [r[3] + r[4] for r in self.gpu] + [r[2] + r[3] for r in self.ops]
        if not starts:
            return None
        self.step_ends.sort()
        steps = len(self.step_ends)
        first_step, last_step = (0, steps - 1) if steps else (NONE, NONE)
        return (0, int(WindowMode.FOREIGN), min(starts), max(ends), first_step, last_step, NONE, events)


def _device(data: dict[str, Any]) -> Device:
    props_list = data.get("deviceProperties")
    props = props_list[0] if isinstance(props_list, list) and props_list else {}
    props = props if isinstance(props, dict) else {}

    def text(v: Any) -> str | None:
        return None if v is None or isinstance(v, dict | list) else safe_text(v)

    def count(v: Any) -> int | None:
        n = _int(v, NONE)
        return n if n > 0 else None

    major, minor = count(props.get("computeMajor")), _int(props.get("computeMinor"), NONE)
    return Device(
        name=text(props.get("name")),
        num_sms=count(props.get("numSms")),
        compute_capability=f"{major}.{minor}" if major is not None and minor >= 0 else None,
        total_memory_bytes=count(props.get("totalGlobalMem")),
        driver=text(data.get("cuda_driver_version")),
        cuda=text(data.get("cuda_runtime_version")),
    )


def load_chrome(path: str) -> Trace:
    data = read_json(path)
    base = _int(data.get("baseTimeNanoseconds"), 0, TIME_LIMIT // 2)
    rows = _Rows(max(0, base))
    for ev in data["traceEvents"]:
        rows.add(ev)
    window = rows.window(len(data["traceEvents"]))
    if window is None:
        raise TraceFormatError(f"{path} holds no CPU ops and no GPU activity: nothing to analyse")
    trace = Trace(
        strings=rows.strings.strings,
        lines=rows.lines,
        gpu=table_from_rows(rows.gpu, GPU_SCHEMA),
        runtime=table_from_rows(rows.runtime, RUNTIME_SCHEMA),
        ops=table_from_rows(rows.ops, OP_SCHEMA),
        spans=table_from_rows(rows.spans, SPAN_SCHEMA),
        windows=table_from_rows([window], WINDOW_SCHEMA),
        steps=table_from_rows(list(enumerate(rows.step_ends)), STEP_SCHEMA),
        telemetry=empty_table(TELEMETRY_SCHEMA),
        device=_device(data),
        meta={
            "format": "chrome",
            "trace_name": safe_text(name) if isinstance(name := data.get("traceName"), str) else None,
            "skipped_events": rows.skipped,
        },
        source=path,
    )
    return restore(trace, data.get("brrrtui"))  # a trace brrrtui exported: its windows, steps and roofs
