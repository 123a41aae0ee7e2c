"""Findings about torch.compile itself: the graph breaks it met, each on its line with Dynamo's reason.

A break splits the compiled function into graphs with a return to Python between them: the fusion across the
break is lost and the Python in between runs every step. The recording's meta key `graph_breaks` holds
`[line id, reason, count]` rows (brrrtui.capture.graph_breaks); Dynamo reports a break once per compile of
the frame, so the count is compiles, not steps.
"""

from __future__ import annotations

from analyzers.model import Trace
from analyzers.results import Finding, FindingKind

_ADVICE = (
    (
        ("print", "logging", "warn"),
        "move the print or logging out of the compiled function (or behind "
        "`if not torch.compiler.is_compiling()`)",
    ),
    (
        ("item", "data-dependent", "tolist", "nonzero", "unbacked"),
        "keep the value a tensor (torch.where, a mask) "
        "instead of reading it on the CPU, or set torch._dynamo.config.capture_scalar_outputs = True",
    ),
    (("numpy", "np."), "use torch ops instead of NumPy inside the compiled function"),
)
_GENERIC = (
    "make the call traceable or move it out of the compiled function; torch._dynamo.explain(fn)(*args) lists "
    "every break with its reason"
)


def graph_break_findings(trace: Trace) -> list[Finding]:
    rows = trace.meta.get("graph_breaks")
    if not isinstance(rows, list):
        return []
    out = []
    for row in rows:
        if not (isinstance(row, list) and len(row) == 3):
            continue
        line, reason, count = row
        if not (isinstance(line, int) and 0 <= line < len(trace.lines) and isinstance(reason, str)):
            continue
        count = count if isinstance(count, int) and count > 0 else 1
        where = trace.lines[line]
        low = reason.lower()
        action = next((a for keys, a in _ADVICE if any(k in low for k in keys)), _GENERIC)
        out.append(
            Finding(
                FindingKind.GRAPH_BREAK,
                (where,),
                None,
                f"torch.compile breaks the graph at {where} ({count}× while compiling): {reason or 'no reason given'}"
                " — the code before and after it runs as separate graphs, with Python in between every step",
                action,
            )
        )
    return out
