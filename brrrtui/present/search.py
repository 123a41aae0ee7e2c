"""`/` search, case-insensitive substrings: kernels and operators by name (what the timeline's GPU and CPU lanes
show), source lines with figures by path, function or code, then any other line of those source files by its
text. Each group heaviest first (kernels by GPU time, operators by CPU time, lines as the hot lines rank them),
other source lines in file order."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from brrrtui.contract.model import SourceLine
from brrrtui.contract.units import fmt_ns
from brrrtui.present.details import display_path
from brrrtui.present.snapshot import Snapshot
from brrrtui.present.source import plain, read_highlighted

MAX_RESULTS = 60


@dataclass(frozen=True)
class Hit:
    kind: str  # "kernel" (key: kernel name) | "op" (key: operator name) | "line" (key: line id)
    # | "source" (key: the line, a SourceLine with no figures)
    key: str | int | SourceLine
    label: str


def search(snap: Snapshot, query: str) -> list[Hit]:
    """Kernels, then operators, then lines with figures, then other source lines (see the module doc)."""
    q = query.strip().lower()
    if not q:
        return []
    hits: list[Hit] = []
    for k in snap.analysis.kernels:
        if q in k.name.lower():
            hits.append(Hit("kernel", k.name, f"kernel {fmt_ns(k.gpu_ns):>9} ×{k.calls} {k.name}"))
    hits += _operators(snap, q)
    code_cache: dict[str, tuple | None] = {}

    def code(line: SourceLine) -> tuple | None:
        path = snap.resolve(line.file)
        if path is None:
            return None
        if path not in code_cache:
            code_cache[path] = read_highlighted(path)
        return code_cache[path]

    for s in snap.hot_lines:
        where = display_path(snap, s.line)
        lines = code(s.line)
        text = plain(lines[s.line.line - 1]).strip() if lines and 0 < s.line.line <= len(lines) else ""
        if q in where.lower() or q in s.line.function.lower() or q in text.lower():
            hits.append(
                Hit("line", s.line_id, f"line   {fmt_ns(s.gpu_ns):>9} {where} {s.line.function}  {text}")
            )
    hits += _other_source_lines(snap, q, code)
    return hits[:MAX_RESULTS]


def _operators(snap: Snapshot, q: str) -> list[Hit]:
    """Top-level operators of the analysed windows (the CPU lanes' items), by name, heaviest first."""
    trace, links = snap.analysis.trace, snap.analysis.links
    ops = trace.ops
    if not len(ops):
        return []
    shown = np.isin(ops.window, np.array(list(snap.lanes), dtype=ops.window.dtype)) & (links.op_parent < 0)
    ids = np.unique(ops.name[shown])
    names = {int(i): trace.name(int(i)) for i in ids.tolist()}
    matching = [i for i, name in names.items() if q in name.lower()]
    if not matching:
        return []
    rows = np.nonzero(shown & np.isin(ops.name, matching))[0]
    found, inv = np.unique(ops.name[rows], return_inverse=True)
    ns = np.bincount(inv.ravel(), weights=ops.dur_ns[rows], minlength=len(found))
    calls = np.bincount(inv.ravel(), minlength=len(found))
    order = np.argsort(-ns, kind="stable")
    return [
        Hit("op", names[int(found[j])], f"op     {fmt_ns(ns[j]):>9} ×{int(calls[j])} {names[int(found[j])]}")
        for j in order.tolist()
    ]


def _other_source_lines(snap: Snapshot, q: str, code) -> list[Hit]:  # noqa: ANN001
    """Lines of the hot lines' files whose text matches and that are not a hot line themselves."""
    hot = {(s.line.file, s.line.line) for s in snap.hot_lines}
    files = list(dict.fromkeys(s.line.file for s in snap.hot_lines))
    hits: list[Hit] = []
    for file in files:
        lines = code(SourceLine(file, 0, ""))
        for n, spans in enumerate(lines or (), start=1):
            text = plain(spans).strip()
            if (file, n) not in hot and q in text.lower():
                line = SourceLine(file, n, "")
                hits.append(Hit("source", line, f"source {'':>9} {display_path(snap, line)}  {text}"))
                if len(hits) >= MAX_RESULTS:
                    return hits
    return hits
