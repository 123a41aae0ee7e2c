"""Load a torch.profiler (Kineto) Chrome trace (`.json` or `.json.gz`) into the columnar model.

Such a trace is one window. Its Python frames (`with_stack=True`) are named `path(line): function` and
resolve user code only to the enclosing function, so its spans are function-level; brrrtui's own recordings
carry exact lines.
"""

from __future__ import annotations

import gzip
import json
import re
from typing import Any

import numpy as np

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


def _tid(value: Any, tids: dict[Any, int]) -> int:
    if isinstance(value, int):
        return value
    return tids.setdefault(value, -(len(tids) + 2))  # string lanes ("stream 7 ...") get negative ids


def _dims(value: Any) -> str | None:
    return None if value is None else json.dumps(value, separators=(",", ":"))


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

    def add(self, ev: Any) -> None:
        """One trace event; only complete ("X") events of known categories make rows."""
        if not isinstance(ev, dict) or ev.get("ph") != "X":
            return
        try:
            start = self.base_ns + int(round(float(ev["ts"]) * 1000.0))
            dur = int(round(float(ev.get("dur", 0)) * 1000.0))
        except (KeyError, TypeError, ValueError):
            return
        cat = ev.get("cat")
        args = ev.get("args") or {}
        name = str(ev.get("name", ""))
        tid = ev.get("tid")
        if cat in _GPU_CATS:
            self._gpu(int(_GPU_CATS[cat]), name, start, dur, args)
        elif cat in ("cuda_runtime", "cuda_driver"):
            correlation = int(args.get("correlation", NONE))
            self.runtime.append((0, self.strings(name), start, dur, _tid(tid, self.tids), correlation))
        elif cat in ("cpu_op", "user_annotation"):
            self._op(name, start, dur, _tid(tid, self.tids), args)
            if cat == "user_annotation" and name.startswith("Optimizer.step#"):
                self.step_ends.append(start + dur)
        elif cat == "python_function":
            self._frame(name, start, dur, tid)

    def _gpu(self, kind: int, name: str, start: int, dur: int, args: dict[str, Any]) -> None:
        grid, block = args.get("grid"), args.get("block")
        self.gpu.append(
            (
                0,
                kind,
                self.strings(name),
                start,
                dur,
                int(args.get("device", 0)),
                int(args.get("stream", NONE)),
                int(args.get("correlation", NONE)),
                self.strings(",".join(map(str, grid))) if grid else NONE,
                self.strings(",".join(map(str, block))) if block else NONE,
                int(args["bytes"]) if "bytes" in args else NONE,
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
                int(args.get("Sequence number", NONE)),
                int(args.get("Fwd thread id", NONE)),
                self.strings(_dims(args.get("Input Dims"))),
                self.strings(_dims(args.get("Input type"))),
                float(args.get("flops", np.nan)),
            )
        )

    def _frame(self, name: str, start: int, dur: int, tid: Any) -> None:
        """A Python frame of the user's code: a span at function level."""
        m = _FRAME.match(name)
        if not m or not is_user_file(m["file"]):
            return
        key = (m["file"], int(m["line"]), m["func"])
        lid = self.line_ids.get(key)
        if lid is None:
            lid = self.line_ids[key] = len(self.lines)
            self.lines.append(SourceLine(*key))
        self.spans.append((0, lid, start, dur, _tid(tid, self.tids)))

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
    props = (data.get("deviceProperties") or [{}])[0]
    capability = f"{props['computeMajor']}.{props['computeMinor']}" if "computeMajor" in props else None
    return Device(
        name=props.get("name"),
        num_sms=props.get("numSms"),
        compute_capability=capability,
        total_memory_bytes=props.get("totalGlobalMem"),
        driver=str(data["cuda_driver_version"]) if "cuda_driver_version" in data else None,
        cuda=str(data["cuda_runtime_version"]) if "cuda_runtime_version" in data else None,
    )


def load_chrome(path: str) -> Trace:
    data = read_json(path)
    rows = _Rows(int(data.get("baseTimeNanoseconds") or 0))
    for ev in data["traceEvents"]:
        rows.add(ev)
    window = rows.window(len(data["traceEvents"]))
    if window is None:
        raise TraceFormatError(f"{path} holds no CPU ops and no GPU activity: nothing to analyse")
    return Trace(
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
        meta={"format": "chrome", "trace_name": data.get("traceName")},
        source=path,
    )
