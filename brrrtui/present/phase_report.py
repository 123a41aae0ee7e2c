"""The run's phases in the report: which phase the verdicts come from, and the set-up and warm-up windows
shown apart (text and JSON)."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from analyzers.phases.run_phases import Phase
from analyzers.results import Analysis, LineStat, Regime
from brrrtui.contract.units import fmt_ns, fmt_pct

OTHER_PHASE_LINES = 5  # lines listed per set-up / warm-up section
_WHAT = {
    Phase.SETUP: "before the first optimizer step: model construction, data, .to(device)",
    Phase.WARMUP: "steps before their durations settled: allocator growth, library heuristics, compilation",
}


def phase_json(a: Analysis, others: Mapping[Phase, Analysis]) -> dict[str, Any]:
    """The "phase", "windows", "phases" and "other_phases" members of the report (schema 2)."""
    doc: dict[str, Any] = {"phase": a.phase.value, "windows": list(a.windows)}
    if a.phases is not None:
        run = a.phases.run
        doc["phases"] = {
            "steps": run.steps,
            "steady_from_step": run.steady_from_step,
            "steady_step_ns": run.steady_step_ns,
            "reached": run.reached,
            # the steady step's real time: the median, or the mean where the host runs ahead of the GPU
            "real_step_ns": a.real_step_ns,
            "host_ahead": a.host_ahead,
            "windows": {p.value: a.phases.windows_in(p) for p in Phase if a.phases.windows_in(p)},
        }
    doc["other_phases"] = {p.value: _other_json(o) for p, o in others.items()}
    return doc


def _other_json(o: Analysis) -> dict[str, Any]:
    b = o.breakdown
    return {
        "windows": list(o.windows),
        "span_ns": int(b.span_ns),
        "breakdown_ns": {
            "compute": int(b.compute_ns),
            "memory": int(b.memory_ns),
            "communication": int(b.communication_ns),
            "overhead": int(b.overhead_ns),
        },
        "lines": [
            {
                "file": s.line.file,
                "line": int(s.line.line),
                "function": s.line.function,
                "gpu_ns": int(s.gpu_ns),
                "idle_ns": int(s.idle_ns),
                "regime": s.regime.value,
            }
            for s in _top(o)
        ],
    }


def _top(o: Analysis) -> list[LineStat]:
    return [s for s in o.lines if s.gpu_ns or s.idle_ns][:OTHER_PHASE_LINES]


def phase_line(a: Analysis) -> str:
    """One header line: the phase the verdicts come from."""
    if a.phases is None or a.phases.run.steps == 0:
        return "phase    no optimizer steps: every window analysed"
    run = a.phases.run
    apart = [
        f"{len(a.phases.windows_in(p))} {p.label}"
        for p in (Phase.SETUP, Phase.WARMUP)
        if p is not a.phase and a.phases.windows_in(p)
    ]
    aside = f" · shown apart below: {', '.join(apart)} window(s)" if apart else ""
    if a.phase is Phase.STEADY:
        return f"phase    steady state, from step {run.steady_from_step} of {run.steps}{step_words(a)}{aside}"
    return f"phase    {a.phase.label} only: no steady-state window (see the note){aside}"


def step_words(a: Analysis) -> str:
    """ " (58 ms a step)": the median steady step; the mean where the host runs ahead of a GPU-bound loop (its
    median step only queued work): " (11 ms a step: the mean; the host runs ahead of the GPU, and the 7.5 ms
    median step only queues work)"."""
    s, step = a.slow_steps, a.real_step_ns
    if s is not None and a.host_ahead:
        return (
            f" ({fmt_ns(step)} a step: the mean; the host runs ahead of the GPU, and the"
            f" {fmt_ns(s.median_ns)} median step only queues work)"
        )
    return f" ({fmt_ns(step)} a step)" if step else ""


def phase_sections(others: Mapping[Phase, Analysis], line_text: Callable[[LineStat, int], str]) -> list[str]:
    out: list[str] = []
    for phase, o in others.items():
        b = o.breakdown
        wins = ", ".join(str(w) for w in o.windows)
        out += [
            "",
            f"{phase.label} (window {wins}; {_WHAT[phase]}) — not in the figures above",
            f"  {fmt_ns(b.span_ns)}: compute {fmt_pct(b.fraction(Regime.COMPUTE))}, memory "
            f"{fmt_pct(b.fraction(Regime.MEMORY))}, overhead {fmt_pct(b.fraction(Regime.OVERHEAD))}",
        ]
        out += [line_text(s, o.steps_analysed or 1) for s in _top(o)]
    return out
