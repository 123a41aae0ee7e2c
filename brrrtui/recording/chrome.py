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
from analyzers.model import (
    GPU_SCHEMA,
    NONE,
    OP_SCHEMA,
    RUNTIME_SCHEMA,
    SPAN_SCHEMA,
    STEP_SCHEMA,
    TELEMETRY_SCHEMA,
    WINDOW_SCHEMA,
    Device,
    GpuKind,
    SourceLine,
    StringTable,
    Trace,
    WindowMode,
    empty_table,
    table_from_rows,
)
from brrrtui.contract.userfiles import is_user_file


class TraceFormatError(InputError):
    """The file is not a torch.profiler trace (or not a readable one)."""


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


def load_chrome(path: str) -> Trace:
    data = read_json(path)
    base_ns = int(data.get("baseTimeNanoseconds") or 0)
    strings = StringTable()
    lines: list[SourceLine] = []
    line_ids: dict[tuple[str, int, str], int] = {}
    tids: dict[Any, int] = {}
    gpu_rows: list[tuple] = []
    rt_rows: list[tuple] = []
    op_rows: list[tuple] = []
    span_rows: list[tuple] = []
    step_ends: list[int] = []

    def ns(us: Any) -> int:
        return base_ns + int(round(float(us) * 1000.0))

    for ev in data["traceEvents"]:
        if not isinstance(ev, dict) or ev.get("ph") != "X":
            continue
        cat = ev.get("cat")
        try:
            start = ns(ev["ts"])
            dur = int(round(float(ev.get("dur", 0)) * 1000.0))
        except (KeyError, TypeError, ValueError):
            continue
        args = ev.get("args") or {}
        name = str(ev.get("name", ""))
        if cat in _GPU_CATS:
            grid, block = args.get("grid"), args.get("block")
            gpu_rows.append((
                0, _GPU_CATS[cat], strings(name), start, dur, int(args.get("device", 0)), int(args.get("stream", NONE)),
                int(args.get("correlation", NONE)),
                strings(",".join(map(str, grid))) if grid else NONE,
                strings(",".join(map(str, block))) if block else NONE,
                int(args["bytes"]) if "bytes" in args else NONE,
            ))  # fmt: skip
        elif cat in ("cuda_runtime", "cuda_driver"):
            rt_rows.append(
                (0, strings(name), start, dur, _tid(ev.get("tid"), tids), int(args.get("correlation", NONE)))
            )
        elif cat in ("cpu_op", "user_annotation"):
            op_rows.append((
                0, strings(name), start, dur, _tid(ev.get("tid"), tids), int(args.get("Sequence number", NONE)),
                int(args.get("Fwd thread id", NONE)), strings(_dims(args.get("Input Dims"))),
                strings(_dims(args.get("Input type"))), float(args.get("flops", np.nan)),
            ))  # fmt: skip
            if cat == "user_annotation" and name.startswith("Optimizer.step#"):
                step_ends.append(start + dur)
        elif cat == "python_function":
            m = _FRAME.match(name)
            if m and is_user_file(m["file"]):
                key = (m["file"], int(m["line"]), m["func"])
                lid = line_ids.get(key)
                if lid is None:
                    lid = line_ids[key] = len(lines)
                    lines.append(SourceLine(*key))
                span_rows.append((0, lid, start, dur, _tid(ev.get("tid"), tids)))

    all_starts = [r[3] for r in gpu_rows] + [r[2] for r in op_rows]
    all_ends = [r[3] + r[4] for r in gpu_rows] + [r[2] + r[3] for r in op_rows]
    if not all_starts:
        raise TraceFormatError(f"{path} holds no CPU ops and no GPU activity: nothing to analyse")
    step_ends.sort()
    window = (0, WindowMode.FOREIGN, min(all_starts), max(all_ends),
              0 if step_ends else NONE, len(step_ends) - 1 if step_ends else NONE, NONE,
              len(data["traceEvents"]))  # fmt: skip
    props = (data.get("deviceProperties") or [{}])[0]
    device = Device(
        name=props.get("name"),
        num_sms=props.get("numSms"),
        compute_capability=f"{props['computeMajor']}.{props['computeMinor']}"
        if "computeMajor" in props
        else None,
        total_memory_bytes=props.get("totalGlobalMem"),
        driver=str(data["cuda_driver_version"]) if "cuda_driver_version" in data else None,
        cuda=str(data["cuda_runtime_version"]) if "cuda_runtime_version" in data else None,
    )
    return Trace(
        strings=strings.strings,
        lines=lines,
        gpu=table_from_rows(gpu_rows, GPU_SCHEMA),
        runtime=table_from_rows(rt_rows, RUNTIME_SCHEMA),
        ops=table_from_rows(op_rows, OP_SCHEMA),
        spans=table_from_rows(span_rows, SPAN_SCHEMA),
        windows=table_from_rows([window], WINDOW_SCHEMA),
        steps=table_from_rows(list(enumerate(step_ends)), STEP_SCHEMA),
        telemetry=empty_table(TELEMETRY_SCHEMA),
        device=device,
        meta={"format": "chrome", "trace_name": data.get("traceName")},
        source=path,
    )
