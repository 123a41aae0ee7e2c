"""`/` search: kernels by name, source lines by path, function or code; case-insensitive substrings."""

from __future__ import annotations

from dataclasses import dataclass

from brrrtui.contract.units import fmt_ns
from brrrtui.present.details import display_path
from brrrtui.present.snapshot import Snapshot
from brrrtui.present.source import plain, read_highlighted

MAX_RESULTS = 60


@dataclass(frozen=True)
class Hit:
    kind: str  # "kernel" (key: kernel name) | "line" (key: line id)
    key: str | int
    label: str


def search(snap: Snapshot, query: str) -> list[Hit]:
    """Kernels (heaviest first, as the analysis lists them), then lines (heaviest first)."""
    q = query.strip().lower()
    if not q:
        return []
    hits: list[Hit] = []
    for k in snap.analysis.kernels:
        if q in k.name.lower():
            hits.append(Hit("kernel", k.name, f"kernel {fmt_ns(k.gpu_ns):>9} ×{k.calls} {k.name}"))
    code_cache: dict[str, tuple | None] = {}
    for s in snap.hot_lines:
        where = display_path(snap, s.line)
        text = ""
        path = snap.resolve(s.line.file)
        if path:
            if path not in code_cache:
                code_cache[path] = read_highlighted(path)
            lines = code_cache[path]
            if lines and 0 < s.line.line <= len(lines):
                text = plain(lines[s.line.line - 1]).strip()
        if q in where.lower() or q in s.line.function.lower() or q in text.lower():
            hits.append(
                Hit("line", s.line_id, f"line   {fmt_ns(s.gpu_ns):>9} {where} {s.line.function}  {text}")
            )
    return hits[:MAX_RESULTS]
