"""Recordings with a kernel stream between windows, made from a recorded H200 fixture.

The stream is built from the window's own kernels, so the right answer is known: a copy of window k's kernels
(in launch order, shifted in time and in correlation id) streamed after window k must be matched, row for
row, to the kernels it was copied from. A few kernels with names no window has seen are mixed in::

    window 0 | stream after 0: copy 0 of window 0's kernels, copy 1, copy 2, 3 unknown kernels
"""

from __future__ import annotations

import numpy as np
from tui_fakes import h200_recording

from brrrtui.contract.model import NONE, GpuKind, Trace
from brrrtui.recording.store import RecordingWriter, load_recording

UNKNOWN = "brrrtui_test_kernel_no_window_has_seen_{}"
GAP_NS = 1_000_000  # between a window's end and the stream after it, and between copies
CORRELATION_BASE = 10_000_000


def window_rows(trace: Trace, window: int) -> np.ndarray:
    """Window `window`'s gpu rows in launch order (as analyzers.stream.lines orders its template)."""
    rows = np.nonzero(trace.gpu.window == window)[0]
    return rows[np.argsort(trace.gpu.correlation[rows], kind="stable")]


def copy_rows(
    trace: Trace, window: int, after_window: int, repeats: int, t0_ns: int, first_copy: int = 0
) -> list[tuple]:
    """`repeats` copies of window `window`'s kernels as STREAM_SCHEMA rows, starting at `t0_ns`; copy number
    `first_copy + r` gets correlation ids above every earlier copy's."""
    g = trace.gpu
    rows = window_rows(trace, window)
    s0 = int(g.start_ns[rows].min())
    span = int((g.start_ns[rows] + g.dur_ns[rows]).max()) - s0
    c0 = int(g.correlation[rows].min())
    ncorr = int(g.correlation[rows].max()) - c0 + 1
    out = []
    for r in range(repeats):
        k = first_copy + r
        shift = t0_ns + r * (span + GAP_NS) - s0
        corr = CORRELATION_BASE * (after_window + 2) + k * ncorr - c0
        for i in rows.tolist():
            out.append(
                (
                    after_window,
                    int(g.kind[i]),
                    int(g.name[i]),
                    int(g.start_ns[i]) + shift,
                    int(g.dur_ns[i]),
                    int(g.device[i]),
                    int(g.stream[i]),
                    int(g.correlation[i]) + corr,
                    int(g.grid[i]),
                    int(g.block[i]),
                    int(g.bytes[i]),
                )
            )
    return out


def unknown_rows(
    trace: Trace, after_window: int, count: int, t0_ns: int, first_string: int
) -> tuple[list[tuple], list[tuple[int, str]]]:
    """`count` kernels with new names (ids from `first_string`), 10 µs each, 10 µs apart, on the busiest
    stream; correlation ids after every copy."""
    g = trace.gpu
    device, stream = int(np.bincount(g.device).argmax()), int(np.bincount(g.stream).argmax())
    strings = [(first_string + i, UNKNOWN.format(i)) for i in range(count)]
    rows = [
        (
            after_window,
            int(GpuKind.KERNEL),
            sid,
            t0_ns + i * 20_000,
            10_000,
            device,
            stream,
            CORRELATION_BASE * (after_window + 3) - count + i,
            NONE,
            NONE,
            0,
        )
        for i, (sid, _) in enumerate(strings)
    ]
    return rows, strings


def make_stream_recording(
    directory,
    name: str = "h200_gpt_small",
    window: int = 0,
    repeats: int = 3,
    unknown: int = 3,
    before: bool = False,
) -> str:
    """The fixture `name` with `repeats` copies of window `window`'s kernels streamed after it, then `unknown`
    unknown kernels; `before`: also one copy streamed before the first window (after_window NONE)."""
    path = h200_recording(name, directory)
    trace = load_recording(path)
    w = trace.windows
    end = int(w.end_ns[w.window == window].max())
    rows = window_rows(trace, window)
    span = int((trace.gpu.start_ns[rows] + trace.gpu.dur_ns[rows]).max() - trace.gpu.start_ns[rows].min())
    batch = copy_rows(trace, window, window, repeats, end + GAP_NS)
    t_unknown = end + GAP_NS + repeats * (span + GAP_NS)
    extra, strings = unknown_rows(trace, window, unknown, t_unknown, len(trace.strings))
    batch += extra
    if before:
        first = int(w.start_ns.min()) - span - 2 * GAP_NS
        batch = copy_rows(trace, window, NONE, 1, first) + batch
    writer = RecordingWriter(path)
    writer.append({"strings": strings, "stream": batch})
    writer.close()
    return path


def stream_end_ns(path: str) -> int:
    """The end of the last streamed kernel of a recording."""
    t = load_recording(path).stream
    return int((t.start_ns + t.dur_ns).max()) if len(t) else 0
