"""The recording's columns and codes: what the capture writes, the recording stores and the analyzers read.

Every layer imports these from here, so a column or a code has one definition. Times are integer nanoseconds
on the capture's wall clock (Unix epoch); "unknown" is NONE in integer columns and NaN in float columns,
never 0; names and shapes are ids into the recording's string table.
"""

from __future__ import annotations

from collections.abc import Mapping
from enum import IntEnum

import numpy as np

NONE = -1  # "unknown / not linked" in integer columns


class GpuKind(IntEnum):
    KERNEL = 0
    MEMCPY = 1
    MEMSET = 2


class WindowMode(IntEnum):
    STEPS = 0  # opened and closed on optimizer steps
    TIME = 1  # time-based fallback (no optimizer)
    FOREIGN = 2  # a whole torch.profiler trace opened from a file


i64, i32, f64 = np.int64, np.int32, np.float64

# Column schemas. Every table carries `window`, the id of the window it was captured in.
GPU_SCHEMA = {
    "window": i32,
    "kind": np.int8,
    "name": i32,
    "start_ns": i64,
    "dur_ns": i64,
    "device": i32,
    "stream": i32,
    "correlation": i64,
    "grid": i32,
    "block": i32,
    "bytes": i64,
}
"""grid/block: string ids of "x,y,z" (NONE when unknown); bytes: memcpy/memset size (NONE for kernels)."""

RUNTIME_SCHEMA = {"window": i32, "name": i32, "start_ns": i64, "dur_ns": i64, "tid": i64, "correlation": i64}
"""CUDA runtime and driver API calls on the CPU (launches, syncs, copies)."""

OP_SCHEMA = {
    "window": i32,
    "name": i32,
    "start_ns": i64,
    "dur_ns": i64,
    "tid": i64,
    "seq": i64,
    "fwd_tid": i64,
    "shapes": i32,
    "dtypes": i32,
    "flops": f64,
    "concrete": i32,
}
"""CPU operators (aten::..., autograd nodes, record_function scopes). shapes/dtypes: string ids of JSON lists
of the inputs' shapes / dtype names as torch.profiler records them (NONE without record_shapes). concrete:
string id of the JSON list of the scalar arguments' values ("Concrete Inputs": `is_causal`, `dropout_p`),
kept for attention ops only; NONE for every other op and in older recordings."""

SPAN_SCHEMA = {
    "window": i32,
    "line": i32,
    "start_ns": i64,
    "dur_ns": i64,
    "tid": i64,
    "module": i32,
    "lib_line": i32,
}
"""Intervals during which the user's code at `line` (an index into Trace.lines) was calling into torch on
thread `tid`. brrrtui's capture records one per torch call with the exact line; foreign traces give Python
function frames, which resolve only to the function. `module`: string id of the chain of nn.Modules the call
ran in (contract.modules encodes it; NONE outside any module); `lib_line`: the innermost line of a library
that is not torch itself (`transformers/models/gpt2/modeling_gpt2.py:NNN`), an index into Trace.lines, or
NONE when the user's own file is the innermost."""

COMPILED_CALL_PREFIX = "brrr.compiled:"
"""The name of the op the capture puts around each call of torch.compile'd code in a window, followed by the
line id of the user's line that made the call (`brrr.compiled:12`): analyzers.link.links gives that line to the
kernels inside the call, and to those of its backward, that Inductor's provenance does not place."""

WINDOW_SCHEMA = {
    "window": i32,
    "mode": np.int8,
    "start_ns": i64,
    "end_ns": i64,
    "first_step": i64,
    "last_step": i64,
    "stall_ns": i64,
    "events": i64,
}
"""first_step/last_step: optimizer steps completed inside the window (NONE when none); stall_ns: time the
capture stopped the training thread to open, close and convert the window."""

CAPTURE_COST_SCHEMA = {"window": i32, "convert_ns": i64, "cost_ns": i64}
"""What each window cost the run: convert_ns, the time to turn its events into rows (on a background thread);
cost_ns, the time the loop lost from the window's opening until its conversion ended (at least stall +
conversion + the window's extra step time), the figure the duty cycle budgets (slow steps after it add to it
in the scheduler, not here)."""

LINE_SAMPLE_SCHEMA = {"window": i32, "line": i32, "t_ns": i64, "cpu_ns": i64}
"""Inside windows, the user line the main thread was executing, sampled every few ms (also lines that call no
torch, such as `time.sleep` or a Python loop): it tells which line the CPU was busy on during a GPU gap.
cpu_ns: the main thread's on-CPU time at the sample (its thread CPU clock; NONE in older recordings and where
the platform has no such clock). Wall time between two samples that it does not account for is time the
thread spent off the CPU: asleep, waiting for I/O, a lock or a data loader's queue."""

STREAM_SCHEMA = {"after_window": i32} | {k: v for k, v in GPU_SCHEMA.items() if k != "window"}
"""GPU activity collected continuously between windows (CUPTI kernel, memcpy and memset records only: no CPU
side, so no launch, op or line of its own). after_window: the last window closed before it (NONE: before the
first). The other columns mean what GPU_SCHEMA's do; correlation orders launches like a window's."""

STREAM_HIST_EDGES_NS = (1_000, 4_000, 16_000, 64_000, 256_000, 1_000_000, 4_000_000)
"""Upper edges of the folded stream's duration histogram: bin k counts durations below edge k and at or above
edge k-1 (1 us, 4 us, ... 4 ms); the last bin, hist7, holds 4 ms and longer."""

STREAM_AGG_SCHEMA = (
    {
        "after_window": i32,
        "template_window": i32,
        "pos": i32,
        "name": i32,
        "kind": np.int8,
        "device": i32,
        "stream": i32,
        "bucket": i64,
        "bucket_ns": i64,
        "count": i64,
        "dur_ns": i64,
        "dur_min_ns": i64,
        "dur_max_ns": i64,
    }
    | {f"hist{k}": i64 for k in range(len(STREAM_HIST_EDGES_NS) + 1)}
    | {"gap_ns": i64, "gap_max_ns": i64, "gaps": i64, "bytes": i64}
)
"""Streamed rows folded into aggregates (the recorder keeps only the newest stream rows raw). One row per
(after_window, template_window, pos, name, kind, device, stream, bucket): `pos` is the position in
`template_window`'s template (STREAM_TEMPLATE_SCHEMA) the rows were aligned to (NONE: unmatched, by name);
bucket: start_ns // bucket_ns (60 s by default: a fold's rows mostly share one). count, dur_ns (summed),
dur_min_ns, dur_max_ns, hist0..7 (STREAM_HIST_EDGES_NS); gap_ns / gap_max_ns / gaps: the device-wide GPU idle before each row within its segment (summed, longest, rows
with any); bytes: summed copy/memset bytes (NONE for kernels)."""

STREAM_FOLD_SCHEMA = {
    "after_window": i32,
    "template_window": i32,
    "device": i32,
    "rows": i64,
    "first_ns": i64,
    "last_ns": i64,
    "next_pos": i64,
    "last_correlation": i64,
}
"""One row per fold and (segment, device): `rows` folded, their span (first start, last end = the running
latest end the idle gaps continue from), and where the alignment of the segment continues (next_pos: the
template position expected next; last_correlation: the last folded launch)."""

STREAM_BUSY_SCHEMA = {
    "after_window": i32,
    "device": i32,
    "stream": i32,
    "bucket": i64,
    "bucket_ns": i64,
    "count": i64,
    "dur_ns": i64,
    "gap_ns": i64,
}
"""The folded rows' time profile, for the timeline: per (segment, device, stream, bucket of bucket_ns, 200 ms
by default): rows starting in it, their summed duration, and the device-wide idle before them."""

STREAM_TEMPLATE_SCHEMA = {"window": i32, "pos": i32, "name": i32, "correlation": i64}
"""The template each window gives the stream: the kernels of its last step in launch order (analyzers.stream.lines)."""

STEP_SCHEMA = {"step": i64, "t_ns": i64, "optimizer_ns": i64, "zero_grad_ns": i64}
"""One row per optimizer step of the whole run (profiled or not): the time the step finished, how long the
optimizer's step() call took, and the time in its zero_grad() since the step before (NONE where not timed:
older recordings, the first steps, foreign traces)."""

TELEMETRY_SCHEMA = {
    "t_ns": i64,
    "gpu_util_pct": f64,
    "mem_used_bytes": f64,
    "power_w": f64,
    "sm_clock_mhz": f64,
}


def column(schema: Mapping[str, object], name: str) -> int:
    """The position of column `name` in a row of `schema`."""
    return list(schema).index(name)
