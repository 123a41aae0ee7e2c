"""Lines of torch.compile'd kernels, from what Inductor recorded about them (brrrtui.capture.inductor_sources).

The recording's meta key `compiled_kernels` holds rows `[kernel name, line id, library line id, share]`:
for each kernel Inductor generated (Triton, or an extern call such as `aten::addmm`), the user's lines whose
ops it fused and the share of its stack traces each holds. A profiler window records each launch inside a CPU
op named like the kernel (Inductor wraps Triton launches in a record_function of the kernel's name; extern
calls are aten ops), so an op with no span of its own takes the line with the largest share, and the
per-line figures split the kernel's time by the shares (`kernel_line_shares`).

Several graphs can hold kernels of one name (forward and backward, two graph pieces): their rows pool.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from brrrtui.contract.model import NONE, Trace


@dataclass(frozen=True)
class CompiledLines:
    """Per kernel (op) name id: its lines, library lines and shares (summing to 1)."""

    by_name: dict[int, tuple[tuple[int, int, float], ...]]

    def top(self, name: int) -> tuple[int, int] | None:
        rows = self.by_name.get(name)
        if not rows:
            return None
        line, lib, _ = max(rows, key=lambda r: (r[2], -r[0]))
        return line, lib


def compiled_lines(trace: Trace) -> CompiledLines | None:
    """The recording's compiled-kernel lines, rows that do not fit the recording left out; None without any."""
    raw = trace.meta.get("compiled_kernels")
    if not isinstance(raw, list) or not raw:
        return None
    n_lines = len(trace.lines)
    pooled: dict[int, dict[tuple[int, int], float]] = {}
    for row in raw:
        if not (isinstance(row, list) and len(row) == 4 and isinstance(row[0], str)):
            continue
        name, line, lib, share = row
        ok = isinstance(line, int) and isinstance(lib, int) and -1 <= line < n_lines and -1 <= lib < n_lines
        ok = ok and max(line, lib) >= 0  # a user line, or at least a library line
        if not ok or not isinstance(share, int | float) or not math.isfinite(share) or share <= 0:
            continue
        sid = trace.sid(name)
        if sid == NONE:
            continue  # no op of that name in this recording
        places = pooled.setdefault(sid, {})
        places[(line, lib)] = places.get((line, lib), 0.0) + float(share)
    if not pooled:
        return None
    by_name = {}
    for sid, places in pooled.items():
        if any(line >= 0 for line, _ in places):  # library-only traces count only where no user line is known
            places = {k: v for k, v in places.items() if k[0] >= 0}
        total = sum(places.values())
        by_name[sid] = tuple((line, lib, s / total) for (line, lib), s in sorted(places.items()))
    return CompiledLines(by_name)


def fill_op_lines(
    trace: Trace, op_line: np.ndarray, op_lib_line: np.ndarray, lines: CompiledLines
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Ops with no line of their own whose name is a compiled kernel's take its top line and library line.
    Returns the new columns and which ops took a line so. A kernel Inductor traced to library code only
    gives its library line alone (the line comes from the compiled call: analyzers.link.links)."""
    op_line, op_lib_line = op_line.copy(), op_lib_line.copy()
    filled = np.zeros(len(op_line), dtype=bool)
    names = trace.ops.name
    for sid in lines.by_name:
        rows = np.nonzero((names == sid) & (op_line < 0))[0]
        top = lines.top(sid)
        if len(rows) and top is not None:
            op_line[rows], op_lib_line[rows] = top
            filled[rows] = top[0] >= 0
    return op_line, op_lib_line, filled


def kernel_line_shares(
    trace: Trace,
    kernel_op: np.ndarray,
    kernel_line: np.ndarray,
    op_compiled: np.ndarray,
    lines: CompiledLines | None,
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(gpu row, line id, weight) for every kernel with a line: weight 1 on its line, or, for a compiled
    kernel spanning several lines, its share on each. The per-line figures sum with these weights."""
    rows = np.nonzero(kernel_line >= 0)[0]
    if lines is None or not len(rows):
        return rows, kernel_line[rows], np.ones(len(rows))
    ops = kernel_op[rows]
    compiled = (ops >= 0) & op_compiled[np.maximum(ops, 0)] if len(op_compiled) else np.zeros(len(rows), bool)
    op_name = np.where(compiled, trace.ops.name[np.maximum(ops, 0)] if len(op_compiled) else NONE, NONE)
    split = np.zeros(len(rows), dtype=bool)
    extra_rows, extra_lines, extra_w = [], [], []
    for sid, places in lines.by_name.items():
        if len(places) < 2:
            continue
        hit = op_name == sid
        if not hit.any():
            continue
        split |= hit
        for line, _lib, share in places:
            extra_rows.append(rows[hit])
            extra_lines.append(np.full(int(hit.sum()), line, dtype=np.int64))
            extra_w.append(np.full(int(hit.sum()), share))
    keep = rows[~split]
    return (
        np.concatenate([keep, *extra_rows]).astype(np.int64),
        np.concatenate([kernel_line[keep], *extra_lines]).astype(np.int64),
        np.concatenate([np.ones(len(keep)), *extra_w]),
    )
