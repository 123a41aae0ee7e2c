"""The messages the traced child sends the recorder, one frozen dataclass each.

The child builds them (brrrtui.capture), brrrtui.contract.protocol carries them, and the recorder
(brrrtui.record) reads their fields by name. On the pipe a message is plain data, `to_wire`'s dict of its
type tag and fields, never the class itself: the recorder unpickles builtins and numpy only, so that no frame
can import a library of the script into it. `from_wire` rebuilds the dataclass and refuses a frame whose tag
or fields do not match.

Rows inside batches are tuples of plain ints (and floats) in the column order of brrrtui.contract.schema; a
code column (GpuKind, WindowMode) holds the enum's int value, never the enum, which the recorder would refuse.
Times are Unix-epoch nanoseconds.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Any, ClassVar

Row = tuple[Any, ...]  # one row in schema order
StringRow = tuple[int, str]  # (id, string) of the recording's `strings` table
LineRow = tuple[int, str, int, str]  # (id, file, line, function) of its `lines` table


@dataclass(frozen=True, slots=True)
class Hello:
    """The child is up and about to run the script."""

    TAG: ClassVar[str] = "hello"
    pid: int
    python_version: str


@dataclass(frozen=True, slots=True)
class Note:
    """One line for the user (a capture limitation, a stopped feature, a dropped frame)."""

    TAG: ClassVar[str] = "note"
    text: str


@dataclass(frozen=True, slots=True)
class CaptureError:
    """Capture stopped after an internal error; the script runs on uncaptured."""

    TAG: ClassVar[str] = "error"
    traceback: str


@dataclass(frozen=True, slots=True)
class DeviceFacts:
    """The script's CUDA device, sent once, with the first window that saw it."""

    TAG: ClassVar[str] = "device"
    name: str
    num_sms: int
    compute_capability: str  # "major.minor"
    total_memory_bytes: int
    l2_bytes: int | None
    cuda_version: str | None
    torch_version: str  # a str, never torch's TorchVersion (a str subclass the recorder would refuse)


@dataclass(frozen=True, slots=True)
class StepBatch:
    """Optimizer steps finished since the last batch: STEP_SCHEMA rows (step, t_ns)."""

    TAG: ClassVar[str] = "steps"
    steps: list[Row]


@dataclass(frozen=True, slots=True)
class WindowBatch:
    """One profiler window, converted: its WINDOW_SCHEMA and CAPTURE_COST_SCHEMA rows, the rows of the tables
    it captured, and the strings and source lines first used by it."""

    TAG: ClassVar[str] = "window"
    window: Row
    capture_cost: Row
    strings: list[StringRow]
    lines: list[LineRow]
    line_samples: list[Row]
    gpu: list[Row]
    runtime: list[Row]
    ops: list[Row]
    spans: list[Row]


@dataclass(frozen=True, slots=True)
class StreamBatch:
    """Raw CUPTI buffers of the kernel stream and what the child's scan found in them; the recorder decodes
    them into STREAM_SCHEMA rows (brrrtui.contract.cupti_records.rows_from_scan, off the script's GIL).

    buffers: the buffers joined; parts: (after_window, clock_offset_ns, record count) per buffer; offsets,
    names, shapes: brrrtui.contract.cupti_records.Scanned's columns; sent_ns: when the child sent it, which
    splits the delivery latency between the two processes."""

    TAG: ClassVar[str] = "stream"
    sent_ns: int
    strings: list[StringRow]
    buffers: bytes
    parts: list[tuple[int, int, int]]
    offsets: list[int]
    names: list[int]
    shapes: list[int]


@dataclass(frozen=True, slots=True)
class StreamStats:
    """The kernel stream's own counters, sent once when it stops."""

    TAG: ClassVar[str] = "stream_stats"
    records: int
    buffer_bytes: int
    flush_ns_max: int  # longest forced flush
    decode_ns: int  # total time scanning buffers
    queue_ns_max: int  # longest a buffer waited in the child between CUPTI and the pipe
    write_ns_max: int  # longest write to the pipe
    forced_flushes: int
    late_buffers: int  # buffers CUPTI handed over after a pause: dropped
    error: str | None  # why the stream gave up, if it did
    cupti_api_version: int | None


@dataclass(frozen=True, slots=True)
class MeasuredPeaks:
    """Ceilings measured on the script's GPU after it finished (brrrtui.capture.calibrate)."""

    TAG: ClassVar[str] = "peaks"
    tensor_flops_per_s: float
    fp32_flops_per_s: float
    bytes_per_s: float
    l2_bytes: int | None


@dataclass(frozen=True, slots=True)
class CompiledKernels:
    """Source lines of the kernels of graphs torch.compile generated (brrrtui.capture.inductor_sources): rows
    (kernel name as the profiler records its launch, user line id, library line id or -1, share of the
    kernel's stack traces), and the source lines first used by them."""

    TAG: ClassVar[str] = "compiled_kernels"
    lines: list[LineRow]
    rows: list[tuple[str, int, int, float]]


@dataclass(frozen=True, slots=True)
class CompileEvent:
    """torch.compile broke its graph at a line of the user's code, or compiled a function of it again
    (brrrtui.capture.compile_events), with the source line first used by it."""

    TAG: ClassVar[str] = "compile_event"
    lines: list[LineRow]
    kind: str  # "graph_break" | "recompile"
    line: int  # line id (a recompile: the function's `def` line)
    reason: str


@dataclass(frozen=True, slots=True)
class Bye:
    """The script finished, with this exit status."""

    TAG: ClassVar[str] = "bye"
    exit_code: int


Message = (
    Hello
    | Note
    | CaptureError
    | DeviceFacts
    | StepBatch
    | WindowBatch
    | StreamBatch
    | StreamStats
    | MeasuredPeaks
    | CompiledKernels
    | CompileEvent
    | Bye
)
MESSAGE_TYPES: tuple[type[Message], ...] = (
    Hello,
    Note,
    CaptureError,
    DeviceFacts,
    StepBatch,
    WindowBatch,
    StreamBatch,
    StreamStats,
    MeasuredPeaks,
    CompiledKernels,
    CompileEvent,
    Bye,
)
_BY_TAG: dict[str, type[Message]] = {cls.TAG: cls for cls in MESSAGE_TYPES}
_FIELDS: dict[type[Message], tuple[str, ...]] = {
    cls: tuple(f.name for f in dataclasses.fields(cls)) for cls in MESSAGE_TYPES
}


class ProtocolError(ValueError):
    """A frame that is not one of the messages above."""


def to_wire(message: Message) -> dict[str, Any]:
    """The plain dict a message crosses the pipe as: {"type": tag, field: value, ...}. Shallow: the rows
    are not copied (dataclasses.asdict would deep-copy every one)."""
    wire = {name: getattr(message, name) for name in _FIELDS[type(message)]}
    wire["type"] = message.TAG
    return wire


def from_wire(wire: object) -> Message:
    """The message a wire dict stands for; ProtocolError when the tag is unknown or the fields differ."""
    if not isinstance(wire, dict):
        raise ProtocolError(f"a {type(wire).__name__}, not a message")
    fields = dict(wire)
    tag = fields.pop("type", None)
    cls = _BY_TAG.get(tag) if isinstance(tag, str) else None
    if cls is None:
        raise ProtocolError(f"an unknown message type {tag!r}")
    if set(fields) != set(_FIELDS[cls]):
        missing = sorted(set(_FIELDS[cls]) - set(fields))
        extra = sorted(set(fields) - set(_FIELDS[cls]))
        raise ProtocolError(f"a {tag!r} message with fields missing {missing} and unexpected {extra}")
    return cls(**fields)
