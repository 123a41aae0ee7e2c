"""Load a torch.profiler (Kineto) Chrome trace (`.json` or `.json.gz`) into the columnar model.

Such a trace is one window. Its Python frames (`with_stack=True`) are named `path(line): function` and
resolve user code only to the enclosing function, so its spans are function-level; brrrtui's own recordings
carry exact lines.
"""

from __future__ import annotations

import gzip
import json
from typing import Any

from analyzers.errors import InputError
from analyzers.model import Device, Trace, empty_table, table_from_rows
from brrrtui.contract.schema import (
    NONE,
    STEP_SCHEMA,
    TELEMETRY_SCHEMA,
    WINDOW_SCHEMA,
)
from brrrtui.recording.chrome_extras import restore
from brrrtui.recording.chrome_rows import Parsed, Rows, base_ns, int_field, window_row
from brrrtui.recording.safe import safe_text

try:  # msgspec reads big traces in bulk; without it (a machine that lacks it) the json module reads them
    from brrrtui.recording import chrome_fast, chrome_split
except ImportError:  # pragma: no cover - exercised where msgspec is not installed
    chrome_fast = chrome_split = None  # type: ignore[assignment]


class TraceFormatError(InputError):
    """The file is not a torch.profiler trace (or not a readable one)."""


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


def read_events(path: str) -> Parsed:
    """The whole document with `json`, then its events one by one (chrome_rows.Rows)."""
    data = read_json(path)
    rows = Rows(base_ns(data.get("baseTimeNanoseconds")))
    events = data.pop("traceEvents")
    for ev in events:
        rows.add(ev)
    return Parsed.of_rows(data, rows, len(events))


def _device(data: dict[str, Any]) -> Device:
    props_list = data.get("deviceProperties")
    props = props_list[0] if isinstance(props_list, list) and props_list else {}
    props = props if isinstance(props, dict) else {}

    def text(v: Any) -> str | None:
        return None if v is None or isinstance(v, dict | list) else safe_text(v)

    def count(v: Any) -> int | None:
        n = int_field(v, NONE)
        return n if n > 0 else None

    major, minor = count(props.get("computeMajor")), int_field(props.get("computeMinor"), NONE)
    return Device(
        name=text(props.get("name")),
        num_sms=count(props.get("numSms")),
        compute_capability=f"{major}.{minor}" if major is not None and minor >= 0 else None,
        total_memory_bytes=count(props.get("totalGlobalMem")),
        driver=text(data.get("cuda_driver_version")),
        cuda=text(data.get("cuda_runtime_version")),
    )


def load_chrome(path: str, fast: bool = True) -> Trace:
    """A Chrome trace as a Trace of one window. `fast`: read it in bulk with msgspec when it is installed
    (chrome_fast; a big plain file in two processes, chrome_split), else, or where that reader cannot follow
    the document, with `json` (read_events)."""
    parsed = None
    if fast and chrome_fast is not None:
        parsed = chrome_split.read_events(path) or chrome_fast.read_events(path)
    if parsed is None:
        parsed = read_events(path)
    t, data = parsed.tables, parsed.top
    window = window_row(t["gpu"], t["ops"], len(parsed.step_ends), parsed.events)
    if window is None:
        raise TraceFormatError(f"{path} holds no CPU ops and no GPU activity: nothing to analyse")
    trace = Trace(
        strings=parsed.strings,
        lines=parsed.lines,
        gpu=t["gpu"],
        runtime=t["runtime"],
        ops=t["ops"],
        spans=t["spans"],
        windows=table_from_rows([window], WINDOW_SCHEMA),
        steps=table_from_rows(list(enumerate(sorted(parsed.step_ends))), STEP_SCHEMA),
        telemetry=empty_table(TELEMETRY_SCHEMA),
        device=_device(data),
        meta={
            "format": "chrome",
            "trace_name": safe_text(name) if isinstance(name := data.get("traceName"), str) else None,
            "skipped_events": parsed.skipped,
        },
        source=path,
    )
    return restore(trace, data.get("brrrtui"))  # a trace brrrtui exported: its windows, steps and roofs
