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

from analyzers.results import Finding, FindingKind
from brrrtui.contract.model import Trace

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


_RECOMPILE_ADVICE = (
    (
        ("size", "shape", "stride", "dim"),
        "a tensor's shape changes between calls: mark that dimension dynamic "
        "(torch._dynamo.mark_dynamic(x, dim)) or pad the inputs to a few fixed sizes",
    ),
    (
        ("dtype", "device", "requires_grad", "grad_mode"),
        "keep the inputs' dtype, device and requires_grad the "
        "same on every call (or compile one function per variant)",
    ),
)
_RECOMPILE_GENERIC = (
    "a Python value the function reads changed between calls (an int, a flag, a list's length): pass it as a "
    "tensor or keep it constant; TORCH_LOGS=recompiles prints every failed guard"
)


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


def _advice(reason: str, table: tuple[tuple[tuple[str, ...], str], ...], generic: str) -> str:
    low = reason.lower()
    return next((a for keys, a in table if any(k in low for k in keys)), generic)


def graph_break_findings(trace: Trace) -> list[Finding]:
    """One finding per graph break and per recompiled function (their place and first reason)."""
    out = []
    for line, reason, count in _rows(trace, "graph_breaks"):
        where = trace.lines[line]
        out.append(
            Finding(
                FindingKind.GRAPH_BREAK,
                (where,),
                None,
                f"torch.compile breaks the graph at {where} ({count}× while compiling): {reason or 'no reason given'}"
                " — the code before and after it runs as separate graphs, with Python in between every step",
                _advice(reason, _ADVICE, _GENERIC),
            )
        )
    by_function: dict[int, list[tuple[str, int]]] = {}
    for line, reason, count in _rows(trace, "recompiles"):
        by_function.setdefault(line, []).append((reason, count))
    for line, failed in by_function.items():
        where = trace.lines[line]
        guards = "; ".join(dict.fromkeys(r for r, _ in failed if r)) or "no reason given"
        out.append(
            Finding(
                FindingKind.RECOMPILE,
                (where,),
                None,
                f"torch.compile compiled the function at {where} again {sum(n for _, n in failed)}× (failed "
                f"guards: {guards}) — compile time each time, and past recompile_limit it runs uncompiled",
                _advice(guards, _RECOMPILE_ADVICE, _RECOMPILE_GENERIC),
            )
        )
    return out
