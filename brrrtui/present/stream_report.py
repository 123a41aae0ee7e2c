"""The report's kernel-stream section, as text and as the JSON member "stream" (brrrtui.present.report).

Figures are the stream of the whole run as far as the recording holds it: the raw rows a load keeps plus the
rows the recorder folded into aggregates (analyzers.stream.lines.stream_figures); a recording from before folding
keeps every row raw and a load analyses the newest of them (`rows_analysed` < `records`).
"""

from __future__ import annotations

from typing import Any

from analyzers.results import Analysis
from analyzers.stream.lines import StreamFigures, stream_figures, stream_view
from brrrtui.contract.units import fmt_ns, fmt_pct


def figures(a: Analysis) -> StreamFigures:
    return stream_figures(stream_view(a))


def stream_json(a: Analysis, top: int | None) -> dict[str, Any]:
    f, tr = figures(a), a.trace
    n = max(f.analysed, 1)
    return {
        "records": f.records,
        "rows_analysed": f.analysed,
        "folded": f.folded,
        "gpu_ns": f.gpu_ns,
        "idle_ns": f.idle_ns,
        "matched_fraction": f.matched / n,
        "confirmed_fraction": f.confirmed / n,
        "lines": [
            {
                "file": tr.lines[s.line].file,
                "line": int(tr.lines[s.line].line),
                "function": tr.lines[s.line].function,
                "gpu_ns": s.gpu_ns,
                "kernels": s.kernels,
                "idle_ns": s.idle_ns,
            }
            for s in (f.lines if top is None else f.lines[:top])
        ],
    }


def stream_text(a: Analysis, top: int) -> list[str]:
    f = figures(a)
    n = max(f.analysed, 1)
    held = f"{f.records:,} recorded" + (
        f", the newest {f.analysed:,} analysed" if f.analysed < f.records else ""
    )
    if f.folded:
        held += f" ({f.folded:,} folded into aggregates)"
    out = [
        "kernel stream (GPU activity between windows; lines inferred from the windows)",
        f"  {held} · {fmt_ns(float(f.gpu_ns))} GPU · {fmt_ns(float(f.idle_ns))} idle between its kernels · "
        f"{fmt_pct(f.matched / n)} matched to a window's kernel · {fmt_pct(f.confirmed / n)} confirmed by the "
        "next window",
    ]
    for s in f.lines[:top]:
        ln = a.trace.lines[s.line]
        out.append(
            f"  {str(ln) + ' ' + ln.function:<40} gpu {fmt_ns(float(s.gpu_ns))}  idle {fmt_ns(float(s.idle_ns))}"
            f"  {s.kernels:,} kernels (inferred)"
        )
    return out
