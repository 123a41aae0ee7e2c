"""Read back the `brrrtui` block of a trace that `brrrtui export --perfetto` wrote.

A Chrome trace has events, not a run: it has no capture windows, no step times of the steps outside the
profiler, no measured ceilings and no line samples. The exporter (brrrtui/present/perfetto_block.py) keeps
them in a top-level `brrrtui` object that trace viewers ignore; with it the re-opened trace has the
recording's windows (each row back in its window, by time), phases, unprofiled step times and roofs, so
`view` and `report` give the same verdicts. A block that does not read as written is left out with a note:
the events alone still make a trace.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import replace
from typing import Any

import numpy as np

from brrrtui.contract.model import Peaks, SourceLine, Table, Trace, table_from_rows
from brrrtui.contract.schema import LINE_SAMPLE_SCHEMA, NONE, STEP_SCHEMA, TELEMETRY_SCHEMA, WINDOW_SCHEMA
from brrrtui.recording.checks import TIME_LIMIT, RecordingError, check_column
from brrrtui.recording.chrome.events import bounded_text

FORMAT = 1


class _Bad(ValueError):
    pass


def _ints(row: Any, n: int, limit: int = TIME_LIMIT) -> tuple[int, ...]:
    if not isinstance(row, list) or len(row) != n:
        raise _Bad("a row of the wrong length")
    if not all(isinstance(v, int) and not isinstance(v, bool) and -limit <= v <= limit for v in row):
        raise _Bad("a row with a value that is not an integer in range")
    return tuple(row)


def _table(rows: Sequence[tuple[int, ...]], schema: dict[str, Any], name: str) -> Table:
    """Integer rows as a table of `schema`, each column checked as a recording's is (range, codes, times)."""
    matrix = np.array(rows, dtype=np.int64).reshape(-1, len(schema))
    columns = {}
    for i, (col, dtype) in enumerate(schema.items()):
        try:
            check_column("the brrrtui block", name, col, matrix[:, i], dtype)
        except RecordingError as e:
            raise _Bad(str(e).removeprefix("the brrrtui block is damaged: ")) from None
        columns[col] = matrix[:, i].astype(dtype)
    return Table(columns)


def _list(block: dict[str, Any], key: str) -> list[Any]:
    value = block.get(key, [])
    if not isinstance(value, list):
        raise _Bad(f"{key} is not a list")
    return value


def _opt_float(v: Any) -> float | None:
    if v is None:
        return None
    if isinstance(v, int | float) and not isinstance(v, bool) and math.isfinite(v) and v > 0:
        return float(v)
    raise _Bad("a ceiling that is not a positive number")


def _peaks(value: Any) -> Peaks | None:
    if value is None:
        return None
    if not isinstance(value, dict) or not isinstance(value.get("source"), str):
        raise _Bad("peaks is not an object with a source")
    l2 = value.get("l2_bytes")
    return Peaks(
        tensor_flops_per_s=_opt_float(value.get("tensor_flops_per_s")),
        fp32_flops_per_s=_opt_float(value.get("fp32_flops_per_s")),
        bytes_per_s=_opt_float(value.get("bytes_per_s")),
        source=bounded_text(value["source"]),
        l2_bytes=int(_opt_float(l2) or 0) or None,
    )


def _lines(trace: Trace, block: dict[str, Any]) -> tuple[list[SourceLine], list[int]]:
    """The trace's lines plus any of the block's it lacks, and the block's line index -> the trace's."""
    lines = list(trace.lines)
    known = {(ln.file, ln.line, ln.function): i for i, ln in enumerate(lines)}
    index: list[int] = []
    for row in _list(block, "lines"):
        if not (isinstance(row, list) and len(row) == 3 and isinstance(row[1], int) and 0 <= row[1] < 2**31):
            raise _Bad("a line that is not [file, line, function]")
        key = (bounded_text(row[0]), row[1], bounded_text(row[2]))
        if key not in known:
            known[key] = len(lines)
            lines.append(SourceLine(*key))
        index.append(known[key])
    return lines, index


def _telemetry(block: dict[str, Any]) -> Table:
    rows = []
    for row in _list(block, "telemetry"):
        if not (isinstance(row, list) and len(row) == 5):
            raise _Bad("a telemetry row of the wrong length")
        t = _ints(row[:1], 1)[0]
        values = [
            float(v) if isinstance(v, int | float) and not isinstance(v, bool) else math.nan for v in row[1:]
        ]
        rows.append((t, *values))
    return table_from_rows(rows, TELEMETRY_SCHEMA)


def _in_windows(table: Table, starts: np.ndarray, ids: np.ndarray, column: str = "start_ns") -> Table:
    """Each row into the window whose start last precedes it (the first window for rows before any)."""
    if not len(table):
        return table
    pos = np.clip(np.searchsorted(starts, table[column], side="right") - 1, 0, len(starts) - 1)
    cols = dict(table.columns)
    cols["window"] = ids[pos].astype(cols["window"].dtype)
    return Table(cols)


def _scoped(
    spans: Table, block: dict[str, Any], strings: list[str], index: list[int]
) -> tuple[Table, list[str]]:
    """The spans with the module chain and library line each had (by thread, start and duration), and the
    strings with the chains added."""
    known: dict[tuple[int, int, int], tuple[int, int]] = {}
    ids = {s: i for i, s in enumerate(strings)}
    strings = list(strings)
    for row in _list(block, "span_scopes"):
        if not (isinstance(row, list) and len(row) == 5 and isinstance(row[3], str | None)):
            raise _Bad("a span scope that is not [tid, start, dur, module, library line]")
        tid, start, dur, lib = _ints([*row[:3], row[4]], 4)
        if not -1 <= lib < len(index):
            raise _Bad("a span scope of an unknown library line")
        module = -1
        if row[3] is not None:
            text = bounded_text(row[3])
            if text not in ids:
                ids[text] = len(strings)
                strings.append(text)
            module = ids[text]
        known[(tid, start, dur)] = (module, index[lib] if lib >= 0 else -1)
    if not known or not len(spans):
        return spans, strings
    cols = dict(spans.columns)
    keys = zip(spans.tid.tolist(), spans.start_ns.tolist(), spans.dur_ns.tolist(), strict=True)
    found = [known.get(k, (-1, -1)) for k in keys]
    cols["module"] = np.array([m for m, _ in found], dtype=cols["module"].dtype)
    cols["lib_line"] = np.array([lb for _, lb in found], dtype=cols["lib_line"].dtype)
    return Table(cols), strings


def _restore(trace: Trace, block: dict[str, Any]) -> Trace:
    if block.get("format") != FORMAT:
        raise _Bad(f"format {block.get('format')!r} is not {FORMAT}")
    windows = _table(
        [_ints(r, len(WINDOW_SCHEMA)) for r in _list(block, "windows")], WINDOW_SCHEMA, "windows"
    )
    if not len(windows):
        raise _Bad("no windows")
    if len(set(windows.window.tolist())) < len(windows) or (windows.window < 0).any():
        raise _Bad("window ids that are negative or repeated")
    if (windows.start_ns < 0).any() or (windows.end_ns < windows.start_ns).any():
        raise _Bad("a window that ends before it starts")
    order = np.argsort(windows.start_ns, kind="stable")
    starts, ids = windows.start_ns[order], windows.window[order]
    # (step, t_ns, optimizer_ns, zero_grad_ns); an export that predates the durations has two
    rows = [
        (*_ints(r, 2), NONE, NONE) if isinstance(r, list) and len(r) == 2 else _ints(r, 4)
        for r in _list(block, "steps")
    ]
    steps = _table(rows, STEP_SCHEMA, "steps")
    lines, index = _lines(trace, block)
    samples = []
    for row in _list(block, "line_samples"):
        # (window, line, t_ns, cpu_ns); an export that predates cpu_ns has no fourth value
        short = isinstance(row, list) and len(row) == 3
        window, line, t, cpu = (*_ints(row, 3), NONE) if short else _ints(row, 4)
        if not 0 <= line < len(index):
            raise _Bad("a line sample of an unknown line")
        samples.append((window, index[line], t, cpu))
    spans, strings = _scoped(_in_windows(trace.spans, starts, ids), block, trace.strings, index)
    device: dict[str, Any] = block["device"] if isinstance(block.get("device"), dict) else {}
    meta: dict[str, Any] = block["meta"] if isinstance(block.get("meta"), dict) else {}
    l2 = device.get("l2_bytes")
    driver, cuda = (
        bounded_text(v) if isinstance(v := device.get(k), str) else None for k in ("driver", "cuda")
    )
    return replace(
        trace,
        lines=lines,
        gpu=_in_windows(trace.gpu, starts, ids),
        runtime=_in_windows(trace.runtime, starts, ids),
        ops=_in_windows(trace.ops, starts, ids),
        spans=spans,
        strings=strings,
        windows=windows,
        steps=steps,
        telemetry=_telemetry(block),
        line_samples=_table(samples, LINE_SAMPLE_SCHEMA, "line_samples"),
        peaks=_peaks(block.get("peaks")),
        device=replace(
            trace.device,
            l2_bytes=l2
            if isinstance(l2, int) and not isinstance(l2, bool) and l2 > 0
            else trace.device.l2_bytes,
            driver=driver or trace.device.driver,
            cuda=cuda or trace.device.cuda,
        ),
        meta=trace.meta | {k: meta[k] for k in ("argv", "cwd", "torch_version", "status") if k in meta},
        _ids=None,
    )


def restore(trace: Trace, block: Any) -> Trace:
    """`trace` (as the Chrome loader read its events) with the recording's structure back from `block`, the
    document's `brrrtui` value; `trace` unchanged, with a load note, when the block is damaged."""
    if block is None:
        return trace
    try:
        if not isinstance(block, dict):
            raise _Bad("not an object")
        return _restore(trace, block)
    except _Bad as e:
        notes = [*trace.meta.get("load_notes", []), f"the trace's brrrtui block is left out ({e})"]
        return replace(trace, meta=trace.meta | {"load_notes": notes})
