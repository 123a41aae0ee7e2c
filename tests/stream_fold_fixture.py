"""Recordings of a hand-built kernel stream written through the recorder's own stream path (Sink, StreamSide,
StreamFolder), once folding and once keeping every row raw, so the two can be compared.

The windows, steps and names come from a recorded H200 fixture; the stream is copies of a window's kernels in
launch order (tests/stream_fixture.py), with a few kernels dropped and a few of unknown names mixed in, so the
greedy alignment meets mismatches; copies go after every window and before the first one.
"""

from __future__ import annotations

import numpy as np
from stream_fixture import UNKNOWN, copy_rows
from tui_fakes import h200_recording

from brrrtui.contract.messages import WindowBatch
from brrrtui.contract.model import NONE, GpuKind
from brrrtui.contract.schema import GPU_SCHEMA, RUNTIME_SCHEMA, WINDOW_SCHEMA
from brrrtui.record.fold import StreamFolder
from brrrtui.record.sink import Sink
from brrrtui.record.stream_side import StreamSide
from brrrtui.recording.store import TABLES, load_recording


def _rows(table, schema, sel) -> list[tuple]:
    return list(zip(*(table[c][sel].tolist() for c in schema), strict=True))


def stream_rows(trace, copies: int, seed: int = 0) -> tuple[np.ndarray, list[tuple[int, str]]]:
    """`copies` copies of the last window's kernels after each window (and one before the first), each copy
    shifted past the previous; ~1 % of kernels dropped, an unknown kernel every ~300."""
    rng = np.random.default_rng(seed)
    w = trace.windows
    out: list[tuple] = []
    strings = [(len(trace.strings) + i, UNKNOWN.format(i)) for i in range(3)]
    src = int(w.window.max())
    first = int(w.start_ns.min()) - 10_000_000_000
    for after in [NONE, *w.window.tolist()]:
        t0 = first if after == NONE else int(w.end_ns[w.window == after].max()) + 1_000_000
        out += copy_rows(trace, src, after, 1 if after == NONE else copies, t0, first_copy=0)
    rows = np.asarray(out, dtype=np.int64)
    keep = rng.random(len(rows)) > 0.01
    rows = rows[keep]
    unknown = np.nonzero(rng.random(len(rows)) < 1 / 300)[0]
    rows[unknown, 1] = int(GpuKind.KERNEL)
    rows[unknown, 2] = [strings[i % 3][0] for i in range(len(unknown))]
    return rows, strings


def record(path: str, name: str, tmp, folder: StreamFolder | None, copies: int = 40, batch: int = 700) -> str:
    """Write fixture `name`'s windows and steps, and the stream of `stream_rows`, to `path` the way the
    recorder does: each window's batch (and its template), the steps, then the stream in batches."""
    trace = load_recording(h200_recording(name, tmp))
    notes: list[str] = []
    sink = Sink(path, notes.append)
    sink.open()
    side = StreamSide(sink, folder, lambda _: None, None)
    sink.append(
        {
            "strings": list(enumerate(trace.strings)),
            "lines": [(i, ln.file, ln.line, ln.function) for i, ln in enumerate(trace.lines)],
        }
    )
    sink.append({"steps": trace.steps})
    side.on_steps(list(zip(trace.steps.step.tolist(), trace.steps.t_ns.tolist(), strict=True)))
    rows, strings = stream_rows(trace, copies)
    sink.append({"strings": strings})

    def stream(seg: np.ndarray) -> None:
        for lo in range(0, len(seg), batch):
            side.append_rows(seg[lo : lo + batch], [])

    stream(rows[rows[:, 0] == NONE])  # before the first window
    for i, win in enumerate(trace.windows.window.tolist()):
        sel = {t: np.nonzero(getattr(trace, t).window == win)[0] for t in ("gpu", "runtime", "ops", "spans")}
        sink.append(
            {t: getattr(trace, t).take(s) for t, s in sel.items()}
            | {"windows": trace.windows.take(np.asarray([i]))}
        )
        msg = WindowBatch(
            window=_rows(trace.windows, WINDOW_SCHEMA, [i])[0],
            capture_cost=(win, 0, 0),
            strings=[],
            lines=[],
            line_samples=[],
            gpu=_rows(trace.gpu, GPU_SCHEMA, sel["gpu"]),
            runtime=_rows(trace.runtime, RUNTIME_SCHEMA, sel["runtime"]),
            ops=[],
            spans=[],
        )
        side.on_window(msg)
        stream(rows[rows[:, 0] == win])  # the rows after this window arrive once its batch has
    for t in ("telemetry", "line_samples", "capture_costs"):
        if t in TABLES and len(getattr(trace, t)):
            sink.append({t: getattr(trace, t)})
    sink.set_meta(**{k: v for k, v in trace.meta.items() if k not in ("format", "format_version", "columns")})
    side.finish()
    sink.close()
    assert not notes, notes
    return path
