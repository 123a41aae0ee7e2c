"""The recorded model: the columnar trace that capture, the recording format and every analysis pass share.

One `Trace` holds every captured window of a run (or one foreign torch.profiler trace) as numpy columns with
interned names, so a million kernels cost a few arrays, not a million Python objects. Loaders
(`brrrtui.recording.store`, `brrrtui.recording.chrome.load`) build it; `analyzers.link.links` joins kernel -> launch -> op -> line.

Conventions: times are integer nanoseconds on the capture's wall clock (Unix epoch); "unknown" is -1 in
integer columns and NaN in float columns, never 0; names and shapes are indices into `Trace.strings`.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from brrrtui.contract.schema import (  # the columns are the recording's contract; re-exported here
    CAPTURE_COST_SCHEMA as CAPTURE_COST_SCHEMA,
    GPU_SCHEMA as GPU_SCHEMA,
    LINE_SAMPLE_SCHEMA as LINE_SAMPLE_SCHEMA,
    NONE as NONE,
    OP_SCHEMA as OP_SCHEMA,
    RUNTIME_SCHEMA as RUNTIME_SCHEMA,
    SPAN_SCHEMA as SPAN_SCHEMA,
    STEP_SCHEMA as STEP_SCHEMA,
    STREAM_AGG_SCHEMA as STREAM_AGG_SCHEMA,
    STREAM_BUSY_SCHEMA as STREAM_BUSY_SCHEMA,
    STREAM_FOLD_SCHEMA as STREAM_FOLD_SCHEMA,
    STREAM_SCHEMA as STREAM_SCHEMA,
    STREAM_TEMPLATE_SCHEMA as STREAM_TEMPLATE_SCHEMA,
    TELEMETRY_SCHEMA as TELEMETRY_SCHEMA,
    WINDOW_SCHEMA as WINDOW_SCHEMA,
    GpuKind as GpuKind,
    WindowMode as WindowMode,
)


def flag_of(flags: np.ndarray, ids: np.ndarray) -> np.ndarray:
    """flags[ids] per row (flags from Trace.string_flags); False where the id is NONE."""
    hits = np.flatnonzero(flags).tolist()
    if len(hits) <= 4:  # most tests match a few names: comparing ids is ~10x faster than a gather
        out: np.ndarray = np.zeros(len(ids), dtype=bool)
        for h in hits:
            out |= ids == h
        return out
    if not len(ids) or int(ids.min()) >= NONE:  # one gather: NONE (-1) reads the False appended
        out = np.append(flags, False)[ids]  # not take(): it copies int32 ids to int64 first (41 MB for 5 M)
        return out
    ok = ids >= 0
    out = np.zeros(len(ids), dtype=bool)
    out[ok] = flags[ids[ok]]
    return out


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
        columns: dict[str, np.ndarray] = self.__dict__["columns"]
        try:
            return columns[name]
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


def table_from_rows(rows: list[tuple[Any, ...]], schema: dict[str, Any]) -> Table:
    """Rows in schema order -> Table. Cheap enough for per-window batches (tested at 1 M rows in benchmarks).
    Rows shorter than the schema (a producer that predates a column added at the end) leave the missing
    columns unknown: NONE, or NaN in a float column."""
    if not rows:
        return empty_table(schema)
    cols = list(zip(*rows, strict=True))
    n = len(rows)
    out = {k: np.asarray(c, dtype=dt) for (k, dt), c in zip(schema.items(), cols, strict=False)}
    for k, dt in list(schema.items())[len(cols) :]:
        out[k] = np.full(n, np.nan if np.dtype(dt).kind == "f" else NONE, dtype=dt)
    return Table(out)


@dataclass(frozen=True)
class Peaks:
    """Ceilings for the roofline. flops_per_s by unit: tensor-core dtypes vs SIMT fp32."""

    tensor_flops_per_s: float | None
    fp32_flops_per_s: float | None
    bytes_per_s: float | None
    source: str  # "measured", "datasheet:<name>", "override", "unknown"
    l2_bytes: int | None = None
    # (field, the figure it replaced) for each FLOP roof raised to a rate a matmul or convolution of the analysed
    # windows reached (analyzers/cost/peaks.py: raise_to_reached); empty when none was
    raised_from: tuple[tuple[str, float], ...] = ()


@dataclass(frozen=True)
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
    # the stream's older rows folded into aggregates by the recorder (analyzers.stream.lines), and the templates
    stream_agg: Table = field(default_factory=lambda: empty_table(STREAM_AGG_SCHEMA))
    stream_folds: Table = field(default_factory=lambda: empty_table(STREAM_FOLD_SCHEMA))
    stream_busy: Table = field(default_factory=lambda: empty_table(STREAM_BUSY_SCHEMA))
    stream_templates: Table = field(default_factory=lambda: empty_table(STREAM_TEMPLATE_SCHEMA))
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
