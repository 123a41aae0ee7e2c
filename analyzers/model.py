"""The columnar trace model every analysis pass reads.

One `Trace` holds every captured window of a run (or one foreign torch.profiler trace) as numpy columns with
interned names, so a million kernels cost a few arrays, not a million Python objects. Loaders
(`analyzers.store`, `analyzers.chrome`) build it; `analyzers.links` joins kernel -> launch -> op -> line.

Conventions: times are integer nanoseconds on the capture's wall clock (Unix epoch); "unknown" is -1 in
integer columns and NaN in float columns, never 0; names and shapes are indices into `Trace.strings`.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from enum import IntEnum
from typing import Any

import numpy as np

NONE = -1  # "unknown / not linked" in integer columns


def flag_of(flags: np.ndarray, ids: np.ndarray) -> np.ndarray:
    """flags[ids] per row (flags from Trace.string_flags); False where the id is NONE."""
    ok = ids >= 0
    out = np.zeros(len(ids), dtype=bool)
    out[ok] = flags[ids[ok]]
    return out


class GpuKind(IntEnum):
    KERNEL = 0
    MEMCPY = 1
    MEMSET = 2


class WindowMode(IntEnum):
    STEPS = 0  # opened and closed on optimizer steps
    TIME = 1  # time-based fallback (no optimizer)
    FOREIGN = 2  # a whole torch.profiler trace opened from a file


@dataclass(frozen=True)
class SourceLine:
    file: str
    line: int  # 1-based; for foreign traces the line Python frames name (often the `def` line)
    function: str

    def __str__(self) -> str:  # `file:line` so VS Code's terminal makes it clickable
        return f"{self.file}:{self.line}"


class Table:
    """A set of equally long numpy columns; `t.start_ns`, `t["start_ns"]`, `len(t)`."""

    def __init__(self, columns: dict[str, np.ndarray]):
        lengths = {len(v) for v in columns.values()}
        if len(lengths) > 1:
            raise ValueError(f"columns of unequal length: { {k: len(v) for k, v in columns.items()} }")
        self.columns = columns

    def __getattr__(self, name: str) -> np.ndarray:
        try:
            return self.__dict__["columns"][name]
        except KeyError:
            raise AttributeError(name) from None

    def __getitem__(self, name: str) -> np.ndarray:
        return self.columns[name]

    def __len__(self) -> int:
        return len(next(iter(self.columns.values()))) if self.columns else 0

    def take(self, index: np.ndarray) -> Table:
        return Table({k: v[index] for k, v in self.columns.items()})

    @staticmethod
    def concat(tables: list[Table], schema: dict[str, Any]) -> Table:
        if not tables:
            return empty_table(schema)
        return Table(
            {k: np.concatenate([t.columns[k] for t in tables]).astype(dt) for k, dt in schema.items()}
        )


def empty_table(schema: dict[str, Any]) -> Table:
    return Table({k: np.empty(0, dtype=dt) for k, dt in schema.items()})


def table_from_rows(rows: list[tuple], schema: dict[str, Any]) -> Table:
    """Rows in schema order -> Table. Cheap enough for per-window batches (tested at 1 M rows in benchmarks)."""
    if not rows:
        return empty_table(schema)
    cols = list(zip(*rows, strict=True))
    return Table({k: np.asarray(c, dtype=dt) for (k, dt), c in zip(schema.items(), cols, strict=True)})


i64, i32, f64 = np.int64, np.int32, np.float64

# Column schemas. Every table carries `window`, the id of the window it was captured in.
GPU_SCHEMA = {
    "window": i32, "kind": np.int8, "name": i32, "start_ns": i64, "dur_ns": i64, "device": i32, "stream": i32,
    "correlation": i64, "grid": i32, "block": i32, "bytes": i64,
}  # fmt: skip
"""grid/block: string ids of "x,y,z" (NONE when unknown); bytes: memcpy/memset size (NONE for kernels)."""

RUNTIME_SCHEMA = {"window": i32, "name": i32, "start_ns": i64, "dur_ns": i64, "tid": i64, "correlation": i64}
"""CUDA runtime and driver API calls on the CPU (launches, syncs, copies)."""

OP_SCHEMA = {
    "window": i32, "name": i32, "start_ns": i64, "dur_ns": i64, "tid": i64, "seq": i64, "fwd_tid": i64,
    "shapes": i32, "dtypes": i32, "flops": f64,
}  # fmt: skip
"""CPU operators (aten::..., autograd nodes, record_function scopes). shapes/dtypes: string ids of JSON lists
of the inputs' shapes / dtype names as torch.profiler records them (NONE without record_shapes)."""

SPAN_SCHEMA = {"window": i32, "line": i32, "start_ns": i64, "dur_ns": i64, "tid": i64}
"""Intervals during which the user's code at `line` (an index into Trace.lines) was calling into torch on
thread `tid`. brrrtui's capture records one per torch call with the exact line; foreign traces give Python
function frames, which resolve only to the function."""

WINDOW_SCHEMA = {"window": i32, "mode": np.int8, "start_ns": i64, "end_ns": i64, "first_step": i64,
                 "last_step": i64, "stall_ns": i64, "events": i64}  # fmt: skip
"""first_step/last_step: optimizer steps completed inside the window (NONE when none); stall_ns: time the
capture stopped the training thread to open, close and convert the window."""

CAPTURE_COST_SCHEMA = {"window": i32, "convert_ns": i64, "cost_ns": i64}
"""What each window cost the run: convert_ns, the time to turn its events into rows (on a background thread);
cost_ns, stall + conversion + the extra time its steps took, the figure the duty cycle budgets."""

LINE_SAMPLE_SCHEMA = {"window": i32, "line": i32, "t_ns": i64}
"""Inside windows, the user line the main thread was executing, sampled every few ms (also lines that call no
torch, such as `time.sleep` or a Python loop): it tells which line the CPU was busy on during a GPU gap."""

STREAM_SCHEMA = {
    "after_window": i32, "kind": np.int8, "name": i32, "start_ns": i64, "dur_ns": i64, "device": i32,
    "stream": i32, "correlation": i64, "grid": i32, "block": i32, "bytes": i64,
}  # fmt: skip
"""GPU activity collected continuously between windows (CUPTI kernel, memcpy and memset records only: no CPU
side, so no launch, op or line of its own). after_window: the last window closed before it (NONE: before the
first). The other columns mean what GPU_SCHEMA's do; correlation orders launches like a window's."""

STEP_SCHEMA = {"step": i64, "t_ns": i64}
"""One row per optimizer step of the whole run (profiled or not): the time the step finished."""

TELEMETRY_SCHEMA = {
    "t_ns": i64,
    "gpu_util_pct": f64,
    "mem_used_bytes": f64,
    "power_w": f64,
    "sm_clock_mhz": f64,
}


@dataclass
class Peaks:
    """Ceilings for the roofline. flops_per_s by unit: tensor-core dtypes vs SIMT fp32."""

    tensor_flops_per_s: float | None
    fp32_flops_per_s: float | None
    bytes_per_s: float | None
    source: str  # "measured", "datasheet:<name>", "override", "unknown"
    l2_bytes: int | None = None


@dataclass
class Device:
    name: str | None = None
    num_sms: int | None = None
    compute_capability: str | None = None
    total_memory_bytes: int | None = None
    l2_bytes: int | None = None
    driver: str | None = None
    cuda: str | None = None


@dataclass
class Trace:
    strings: list[str]
    lines: list[SourceLine]
    gpu: Table
    runtime: Table
    ops: Table
    spans: Table
    windows: Table
    steps: Table
    telemetry: Table
    device: Device = field(default_factory=Device)
    peaks: Peaks | None = None
    meta: dict[str, Any] = field(default_factory=dict)
    source: str = ""  # the file it was loaded from
    capture_costs: Table = field(default_factory=lambda: empty_table(CAPTURE_COST_SCHEMA))
    line_samples: Table = field(default_factory=lambda: empty_table(LINE_SAMPLE_SCHEMA))
    stream: Table = field(default_factory=lambda: empty_table(STREAM_SCHEMA))
    stream_total: int = 0  # rows of the stream in the recording (`stream` may hold only the newest of them)
    _ids: dict[str, int] | None = field(default=None, repr=False)

    def name(self, sid: int) -> str:
        return self.strings[sid] if sid >= 0 else ""

    def string_flags(self, test: Callable[[str], object]) -> np.ndarray:
        """Boolean per string id: test(string), evaluated once per distinct name, not once per row."""
        return np.fromiter((bool(test(s)) for s in self.strings), dtype=bool, count=len(self.strings))

    def sid(self, s: str) -> int:
        """String id of `s`, or NONE if it never occurs."""
        if self._ids is None:
            self._ids = {s: i for i, s in enumerate(self.strings)}
        return self._ids.get(s, NONE)

    @property
    def has_gpu(self) -> bool:
        return len(self.gpu) > 0


class StringTable:
    """Interns strings while a trace is being built."""

    def __init__(self, strings: list[str] | None = None):
        self.strings: list[str] = list(strings or [])
        self.ids = {s: i for i, s in enumerate(self.strings)}

    def __call__(self, s: str | None) -> int:
        if s is None:
            return NONE
        i = self.ids.get(s)
        if i is None:
            i = self.ids[s] = len(self.strings)
            self.strings.append(s)
        return i
