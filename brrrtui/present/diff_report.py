"""`brrrtui diff` as text and as one JSON object (analyzers.diff.compare computes it).

JSON (schema 2; times in ns per `unit`, "step" or "s"; unknown numbers null)::

    {"schema": 2, "unit": "step" | "s", "measure": "GPU" | "CPU", "noise_ns": float|null,
     "before": {"file", "steps", "step_ns", "sigma_ns"}, "after": {...},
     "run":     [{"what", "before", "after", "change", "relative", "beyond_noise"}],
     "lines":   [{"before": {"file", "line", "function"}|null, "after": {...}|null, "matched_by": "text"|"line"|null,
                  "gpu_ns": {"before", "after"}, "idle_ns": {"before", "after"},     # measure "GPU"
                  "host_ns": {"before", "after"},                                    # measure "CPU", instead
                  "change_ns", "beyond_noise", "regime": {"before", "after"}}],
     "kernels": [{"name", "calls": {"before", "after"}, "gpu_ns": {"before", "after"}, "change_ns",
                  "beyond_noise", "regime": {"before", "after"}}],
     "notes":   [str]}

Measure "CPU" (neither run has GPU activity): a line's `host_ns` is its CPU-side time (the main thread's sampled
time on the line, a sleep or a Python loop included, or its time in torch calls where that is more), its regimes
null. Schema 1 gave that comparison, then of the time in torch calls only, in `gpu_ns` (with `idle_ns` 0).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from analyzers.diff.compare import Change, KernelChange, LineChange, RunDiff, StepTimes
from analyzers.results import Regime
from brrrtui.contract.model import SourceLine
from brrrtui.contract.units import fmt_ns, fmt_pct

SCHEMA = 2
MARK = "*"  # beyond the noise


def _signed(ns: float | None) -> str:
    if ns is None:
        return "?"
    return ("+" if ns > 0 else "-" if ns < 0 else "±") + fmt_ns(abs(ns))


def _mark(c: Change) -> str:
    return MARK if c.beyond_noise else " "


MIN_LISTED_SHARE = 0.001  # a line or kernel whose change is under this share of the step is not listed


def _listed(delta: float | None, d: RunDiff) -> bool:
    """Worth a row: a change of at least MIN_LISTED_SHARE of the step (each run's replayed idle moves an
    unchanged line by microseconds), any change when the step time is unknown."""
    step = d.run[0].before if d.run else None
    return bool(delta) and (not step or abs(delta or 0.0) >= MIN_LISTED_SHARE * step)


def _rel(c: Change) -> str:
    r = c.relative
    return "" if r is None else f"({'+' if r > 0 else ''}{fmt_pct(r)})"


def _where(ln: SourceLine | None) -> str:
    return "-" if ln is None else f"{ln}"


def _regime(r: Regime | None) -> str:
    return "-" if r is None else r.value


def _header(d: RunDiff, before: str, after: str) -> list[str]:
    step = d.run[0]
    out = [f"brrrtui diff: {before} -> {after}"]
    if step.before is not None and step.after is not None:
        noise = f"noise ±{fmt_ns(d.noise_ns)}" if d.noise_ns is not None else "noise unknown"
        verdict = "beyond the noise" if step.beyond_noise else "within the noise"
        out.append(
            f"step time (median of {d.before_steps.steps} / {d.after_steps.steps} steady unprofiled steps): "
            f"{fmt_ns(step.before)} -> {fmt_ns(step.after)}  {_signed(step.delta)} {_rel(step)}  {verdict} "
            f"({noise})"
        )
    return out


def render_text(d: RunDiff, before: str, after: str, top: int = 15) -> str:
    out = _header(d, before, after)
    unit = f"per {d.unit}"
    if len(d.run) > 1:
        out += ["", f"{unit:<22}{'before':>10}{'after':>10}{'change':>11}"]
    for c in d.run[1:]:
        out.append(
            f"  {c.what:<20}{fmt_ns(c.before):>10}{fmt_ns(c.after):>10}{_signed(c.delta):>11} {_mark(c)}"
        )
    what = "GPU + idle" if d.measure == "GPU" else "CPU-side time: sampled, or in torch calls where more,"
    out += ["", f"lines ({what} {unit}, largest change first):"]
    for lc in [x for x in d.lines if _listed(x.total.delta, d)][:top]:
        out.append(_line_text(lc))
    if d.measure == "GPU":
        out += ["", f"kernels (GPU time {unit}, largest change first):"]
        for kc in [x for x in d.kernels if _listed(x.gpu.delta, d)][:top]:
            out.append(_kernel_text(kc))
    legend = f"{MARK} beyond the noise: the change exceeds 2 x the step times' combined spread"
    out += ["", legend if d.noise_ns is not None else "no step times: changes are not judged against noise"]
    out += [f"note: {n}" for n in d.notes]
    return "\n".join(out)


def _line_where(lc: LineChange) -> str:
    if lc.before is not None and lc.after is not None:
        same = lc.before.line == lc.after.line and lc.before.file == lc.after.file
        return f"{lc.after}" if same else f"{lc.before} -> :{lc.after.line}"
    return f"{_where(lc.after)} (new)" if lc.before is None else f"{lc.before} (gone)"


def _line_text(lc: LineChange) -> str:
    t = lc.total
    where = _line_where(lc)
    func = (lc.after or lc.before or SourceLine("", 0, "")).function
    no_regime = lc.regime_before is None and lc.regime_after is None
    regimes = "" if no_regime else f"  [{_regime(lc.regime_before)} -> {_regime(lc.regime_after)}]"
    return (
        f"  {_signed(t.delta):>10} {_mark(lc.time)} {fmt_ns(t.before):>9} -> {fmt_ns(t.after):<9} "
        f"{where}  {func}{regimes}"
    )


def _kernel_text(kc: KernelChange) -> str:
    c = kc.gpu
    calls = f"{kc.calls_before or 0:g} -> {kc.calls_after or 0:g} calls"
    name = kc.name if len(kc.name) <= 70 else kc.name[:69] + "…"
    return (
        f"  {_signed(c.delta):>10} {_mark(c)} {fmt_ns(c.before):>9} -> {fmt_ns(c.after):<9} {name}  ({calls})"
    )


def _steps_json(path: str, s: StepTimes) -> dict[str, Any]:
    return {"file": path, "steps": s.steps, "step_ns": s.median_ns, "sigma_ns": s.sigma_ns}


def _change_json(c: Change) -> dict[str, Any]:
    return {
        "what": c.what,
        "before": c.before,
        "after": c.after,
        "change": c.delta,
        "relative": c.relative,
        "beyond_noise": c.beyond_noise,
    }


def _line_json(ln: SourceLine | None) -> dict[str, Any] | None:
    return None if ln is None else {"file": ln.file, "line": ln.line, "function": ln.function}


def to_json(d: RunDiff, before: str, after: str) -> dict[str, Any]:
    return {
        "schema": SCHEMA,
        "unit": d.unit,
        "measure": d.measure,
        "noise_ns": d.noise_ns,
        "before": _steps_json(before, d.before_steps),
        "after": _steps_json(after, d.after_steps),
        "run": [_change_json(c) for c in d.run],
        "lines": [_line_change_json(lc, d.measure) for lc in d.lines],
        "kernels": [
            {
                "name": kc.name,
                "calls": {"before": kc.calls_before, "after": kc.calls_after},
                "gpu_ns": {"before": kc.gpu.before, "after": kc.gpu.after},
                "change_ns": kc.gpu.delta,
                "beyond_noise": kc.gpu.beyond_noise,
                "regime": {"before": _regime_json(kc.regime_before), "after": _regime_json(kc.regime_after)},
            }
            for kc in d.kernels
        ],
        "notes": list(d.notes),
    }


def _line_change_json(lc: LineChange, measure: str) -> dict[str, Any]:
    """One line's change: GPU time and idle (measure "GPU"), or CPU-side time (measure "CPU")."""
    times: dict[str, Any] = (
        {
            "gpu_ns": {"before": lc.time.before, "after": lc.time.after},
            "idle_ns": {"before": lc.idle.before, "after": lc.idle.after},
        }
        if measure == "GPU"
        else {"host_ns": {"before": lc.time.before, "after": lc.time.after}}
    )
    return {
        "before": _line_json(lc.before),
        "after": _line_json(lc.after),
        "matched_by": lc.matched_by.value if lc.matched_by else None,
        **times,
        "change_ns": lc.total.delta,
        "beyond_noise": lc.time.beyond_noise,
        "regime": {"before": _regime_json(lc.regime_before), "after": _regime_json(lc.regime_after)},
    }


def _regime_json(r: Regime | None) -> str | None:
    return None if r is None else r.value


@dataclass(frozen=True)
class DiffRow:
    """One row of a diff table: its cells (text) and its role: "better", "worse" (beyond the noise) or "same"."""

    cells: tuple[str, ...]
    role: str


def _role(c: Change) -> str:
    if not c.beyond_noise or not c.delta:
        return "same"
    return "better" if c.delta < 0 else "worse"


def table_rows(d: RunDiff, top: int = 50) -> dict[str, list[DiffRow]]:
    """The diff as three tables for the UI: "run", "lines" and "kernels" (changed rows, largest first)."""
    run = [
        DiffRow((c.what, fmt_ns(c.before), fmt_ns(c.after), _signed(c.delta), _rel(c), _mark(c)), _role(c))
        for c in d.run
    ]
    lines = []
    for lc in [x for x in d.lines if _listed(x.total.delta, d)][:top]:
        t = lc.total
        where = _line_where(lc)
        func = (lc.after or lc.before or SourceLine("", 0, "")).function
        regimes = f"{_regime(lc.regime_before)} -> {_regime(lc.regime_after)}"
        cells = (_signed(t.delta), _mark(lc.time), fmt_ns(t.before), fmt_ns(t.after), where, func, regimes)
        lines.append(DiffRow(cells, _role(Change("line", t.before, t.after, lc.time.beyond_noise))))
    kernels = [
        DiffRow(
            (
                _signed(k.gpu.delta),
                _mark(k.gpu),
                fmt_ns(k.gpu.before),
                fmt_ns(k.gpu.after),
                f"{k.calls_before or 0:g} -> {k.calls_after or 0:g}",
                k.name,
            ),
            _role(k.gpu),
        )
        for k in [x for x in d.kernels if _listed(x.gpu.delta, d)][:top]
    ]
    return {"run": run, "lines": lines, "kernels": kernels}


def header_text(d: RunDiff, before: str, after: str) -> str:
    return "\n".join(_header(d, before, after) + [f"note: {n}" for n in d.notes])
