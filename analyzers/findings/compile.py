"""Findings about torch.compile itself: the graph breaks it met and the functions it compiled again, each on
its line with Dynamo's reason.

A break splits the compiled function into graphs with a return to Python between them: the fusion across the
break is lost and the Python in between runs every step. A recompilation costs compile time each time a guard
fails (a new shape, a changed Python value), and past `recompile_limit` the function runs uncompiled. The
recording's meta keys `graph_breaks` and `recompiles` hold `[line id, reason, count]` rows
(brrrtui.capture.compile_events; a recompile's line is the function's `def`); Dynamo reports a break once per
compile of the frame, so counts are compiles, not steps.
"""

from __future__ import annotations

from analyzers.findings.facts import GraphBreakFacts, RecompileFacts
from analyzers.results import Finding, FindingKind
from brrrtui.contract.model import Trace


def _rows(trace: Trace, key: str) -> list[tuple[int, str, int]]:
    """The meta key's valid `[line id, reason, count]` rows."""
    raw = trace.meta.get(key)
    out = []
    for row in raw if isinstance(raw, list) else []:
        if isinstance(row, list) and len(row) == 3:
            line, reason, count = row
            if isinstance(line, int) and 0 <= line < len(trace.lines) and isinstance(reason, str):
                out.append((line, reason, count if isinstance(count, int) and count > 0 else 1))
    return out


def graph_break_findings(trace: Trace) -> list[Finding]:
    """One finding per graph break and per recompiled function (their place and first reason)."""
    out = []
    for line, reason, count in _rows(trace, "graph_breaks"):
        out.append(
            Finding(FindingKind.GRAPH_BREAK, (trace.lines[line],), None, GraphBreakFacts(count, reason))
        )
    by_function: dict[int, list[tuple[str, int]]] = {}
    for line, reason, count in _rows(trace, "recompiles"):
        by_function.setdefault(line, []).append((reason, count))
    for line, failed in by_function.items():
        guards = tuple(dict.fromkeys(r for r, _ in failed if r))
        compiled = RecompileFacts(sum(n for _, n in failed), guards)
        out.append(Finding(FindingKind.RECOMPILE, (trace.lines[line],), None, compiled))
    return out
