"""Load a torch.profiler (Kineto) Chrome trace (`.json` or `.json.gz`) into the columnar model.

Such a trace is one window. Its Python frames (`with_stack=True`) are named `path(line): function` and
resolve user code only to the enclosing function, so its spans are function-level; brrrtui's own recordings
carry exact lines.

A trace is untrusted input: every reader here takes time linear in its size, reads integers of any length
as bounded numbers (events.loads), refuses nesting past the interpreter's recursion limit and reads
whole (the `json` path) only a text that fits in memory, each refusal one TraceFormatError line.
"""

from __future__ import annotations

import gzip
import io
import json
from typing import Any

from brrrtui.contract.model import Device, Trace, empty_table, table_from_rows
from brrrtui.contract.schema import (
    NONE,
    STEP_SCHEMA,
    TELEMETRY_SCHEMA,
    WINDOW_SCHEMA,
)
from brrrtui.recording.chrome.brrrtui_block import restore
from brrrtui.recording.chrome.events import (
    Parsed,
    Rows,
    TraceFormatError,
    Unreadable,
    base_ns,
    bounded_text,
    int_field,
    loads,
    window_row,
)

try:  # msgspec reads big traces in bulk; without it (a machine that lacks it) the json module reads them
    from brrrtui.recording.chrome import bulk, split
except ImportError:  # pragma: no cover - exercised where msgspec is not installed
    bulk = split = None  # type: ignore[assignment]


__all__ = ["TraceFormatError", "load_chrome", "read_events", "read_json"]

JSON_MEMORY_FACTOR = 8
"""Memory the `json` path takes per byte of text it reads whole (a dict per event, an object per field)."""
_CHUNK = 16 << 20


def available_memory() -> int | None:
    """Bytes of memory this process can still take (MemAvailable, or less under an address-space limit);
    None where unknown."""
    limits = []
    try:
        with open("/proc/meminfo", "rb") as f:
            for line in f:
                if line.startswith(b"MemAvailable:"):
                    limits.append(int(line.split()[1]) * 1024)
    except (OSError, ValueError, IndexError):
        pass
    try:
        import resource

        soft = resource.getrlimit(resource.RLIMIT_AS)[0]
        if soft != resource.RLIM_INFINITY:
            limits.append(soft)
    except (ImportError, OSError, ValueError):
        pass
    return min(limits) if limits else None


def json_text_limit() -> int | None:
    """The most bytes of JSON text the `json` path reads whole; None: no limit known."""
    memory = available_memory()
    return None if memory is None else memory // JSON_MEMORY_FACTOR


def _size(n: int) -> str:
    return f"{n / 2**30:.1f} GiB" if n >= 2**30 else f"{max(n, 1) / 2**20:.1f} MiB"


def _read_text(path: str, limit: int | None) -> str:
    """The file's text (a .gz file unpacked as it is read), refused past `limit` characters before more is
    read. Decoded a chunk at a time: at most the text twice in memory (its chunks, then the joined text)."""
    opener: Any = gzip.open if path.endswith(".gz") else open
    chunks, size = [], 0
    with opener(path, "rb") as raw, io.TextIOWrapper(raw, encoding="utf-8") as f:
        while chunk := f.read(_CHUNK):
            size += len(chunk)
            if limit is not None and size > limit:
                packed = " unpacks to" if path.endswith(".gz") else " holds"
                raise TraceFormatError(
                    f"{path}{packed} more than {_size(limit)} of JSON: read whole it would need "
                    f"~{JSON_MEMORY_FACTOR}x that in memory, more than is available"
                )
            chunks.append(chunk)
    return "".join(chunks)


def read_json(path: str, limit: int | None = None) -> dict[str, Any]:
    """The whole document (json module, bounded integers). `limit`: the most bytes of text read whole
    (default: json_text_limit())."""
    try:
        data = loads(_read_text(path, json_text_limit() if limit is None else limit))
    except (OSError, EOFError, UnicodeDecodeError, json.JSONDecodeError) as e:
        raise TraceFormatError(f"{path} is not a readable JSON trace ({e.__class__.__name__}: {e})") from None
    except RecursionError:
        raise TraceFormatError(f"{path} nests its JSON too deeply to read") from None
    except ValueError as e:  # any other value the decoder refuses
        raise TraceFormatError(f"{path} is not a readable JSON trace ({e})") from None
    if not isinstance(data, dict) or not isinstance(data.get("traceEvents"), list):
        raise TraceFormatError(f"{path} has no traceEvents list: not a torch.profiler Chrome trace")
    return data


def read_events(path: str) -> Parsed:
    """The whole document with `json`, then its events one by one (events.Rows)."""
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
        return None if v is None or isinstance(v, dict | list) else bounded_text(v)

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
    (bulk.py; a big plain file in two processes, split.py), else, or where that reader cannot follow
    the document, with `json` (read_events). A trace no reader follows within its bounds: TraceFormatError."""
    try:
        return _load_chrome(path, fast)
    except Unreadable as e:
        raise TraceFormatError(f"{path} {e}") from None
    except RecursionError:  # JSON nested past the recursion limit, met by a decoder or by a value's repr
        raise TraceFormatError(f"{path} nests its JSON too deeply to read") from None


def _load_chrome(path: str, fast: bool) -> Trace:
    parsed = None
    if fast and bulk is not None:
        parsed = split.read_events(path) or bulk.read_events(path)
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
            "trace_name": bounded_text(name) if isinstance(name := data.get("traceName"), str) else None,
            "skipped_events": parsed.skipped,
        },
        source=path,
    )
    return restore(trace, data.get("brrrtui"))  # a trace brrrtui exported: its windows, steps and roofs
