"""The verdicts as text (`render_text`) and as a stable JSON document (`to_json`).

JSON schema 4 (`brrrtui report --json`; docs/reference.md documents it, with what changed since schemas 1 to 3). Times in ns, rates per second, unknown numbers null; regimes are
"compute" | "memory" | "overhead" | "communication"::

    {
      "schema": 4,
      "device": {"name": str|null, "peak_flops_per_s": float|null, "peak_bytes_per_s": float|null,
                 "peaks_source": "measured" | "override" | "datasheet:<name>" | "unknown",
                 "peaks_raised_from": {field: float}},  # FLOP roofs a kernel of the run beat: what they were
      "span_ns": int,                                   # wall time of the analysed windows
      "breakdown_ns": {"compute": int, "memory": int, "communication": int, "overhead": int}|null,  # sums to span_ns
      "communication": null | {...},                    # present/comm_report.py (exposed / hidden collectives)
      "overhead": {"raw_fraction": float, "corrected_fraction": float|null,
                   "profiled_step_ns": float|null, "unprofiled_step_ns": float|null}|null,
      "lines": [{"file": str, "line": int, "function": str, "gpu_ns": int, "idle_ns": int,  # unprofiled est.
                 "idle_profiled_ns": int, "cpu_ns": int, "sampled_ns": int, "host_ns": int,
                 "regime": str|null, "flops": float|null, "bytes": float|null, "kernels": int, "display": str}],
      "kernels": [{"name": str, "calls": int, "gpu_ns": int, "regime": str,
                   "achieved_flops_per_s": float|null, "achieved_bytes_per_s": float|null,
                   "narrow_load_bytes": int|null,   # set: memory-bound on chip (unaligned GEMM operands)
                   "roof_fraction": float|null,     # achieved / its roof, at most 1
                   "capped": "l2_resident" | "over_peak" | null}],   # why a call's fraction was capped at 1
      "findings": [{"kind": str, "lines": [{"file": str, "line": int}], "saving_ns": float|null,
                    "message": str, "action": str,
                    "module": {"path": str, "class": str, "instances": int}|null,   # where its kernels run
                    "library_line": LINE|null, "knob": str|null}],   # the library's own fix, if any
      "modules": null | {"steps": int, "gpu_ns": int, "outside_gpu_ns": int, "outside_idle_ns": int,
                  "idle_ns": int, "nodes": [{"path": str, "name": str, "class": str, "depth": int,
                  "instances": int, "gpu_ns": int, "self_gpu_ns": int, "idle_ns": int, "regime": str,
                  "gpu_ns_by_regime": {...}, "kernels": int, "flops": float|null, "bytes": float|null,
                  "library_line": LINE|null, "user_line": LINE|null}]},      # present/module_report.py
                  # LINE = {"file": str, "line": int, "function": str, "display": "transformers/x.py:66"}
      "library_lines": [...],       # as "lines", for model-library lines (GPU time only; idle stays with lines)
      "stream": {"records": int, "rows_analysed": int, "folded": int, "gpu_ns": int, "idle_ns": int,
                 "matched_fraction": float, "confirmed_fraction": float,   # only with a kernel stream
                 "lines": [{"file": str, "line": int, "function": str, "gpu_ns": int, "kernels": int,
                            "idle_ns": int}]},                             # present/stream_report.py
      "phase": "steady" | "warmup" | "setup" | "unknown", "windows": [int],      # what was analysed
      "phases": {...}, "other_phases": {...}             # present/phase_report.py
    }

`cpu_ns`: time in the line's torch calls; `sampled_ns`: the main thread's time on the line, sampled (a sleep, a
Python loop included); `host_ns`: the line's CPU-side time, the larger of the two (analyzers.totals.lines).

Without GPU activity in the analysed windows there are no regimes: `breakdown_ns` and `overhead` are null,
every line's `regime` is null and its `idle_ns` 0, the lines are sorted by `host_ns`, and "other_phases" holds
for each phase its windows, span_ns, breakdown_ns (null) and its lines as "lines" has them.

`peak_flops_per_s` is the tensor-core (bf16) roof. Lines are sorted by gpu_ns + idle_ns, kernels by gpu_ns,
findings by saving_ns, all descending; `top` truncates lines and kernels (findings are never truncated).

"stream" describes the GPU activity recorded continuously between the windows (kernels, copies, memsets with
no CPU side), whose lines and regimes are inferred from the windows (analyzers.stream.lines): `records` rows in the
recording, of which `rows_analysed` were analysed (every row when the recorder folded the older ones into
aggregates, `folded` of them; else the newest); `gpu_ns`: their summed GPU time, `idle_ns` the GPU idle
between them; `matched_fraction` of those matched a kernel of a window's step, `confirmed_fraction` of those
were matched and the next window agrees. `lines`: the inferred GPU time, kernel count and idle before its
kernels per source line, by gpu_ns descending (truncated by `top`). It never changes the verdicts above.
"""

from __future__ import annotations

import math
import os
from collections.abc import Mapping
from typing import Any

from analyzers.cost.roofline import capped_names
from analyzers.phases.run_phases import Phase
from analyzers.results import GAP_CAUSE_CODES, Analysis, Finding, GapCause, KernelStat, LineStat, Regime
from analyzers.totals.lines import by_host_time
from brrrtui.contract.units import fmt_bw, fmt_bytes, fmt_flop_count, fmt_flops, fmt_ns, fmt_pct
from brrrtui.present.comm_report import comm_json, comm_text
from brrrtui.present.finding_words import action, message, words
from brrrtui.present.module_report import (
    finding_place_lines,
    library_lines_text,
    modules_json,
    modules_text,
    place_json,
)
from brrrtui.present.paths import readable_path, readable_text
from brrrtui.present.phase_report import OTHER_PHASE_LINES, phase_json, phase_line, phase_sections
from brrrtui.present.status import ROOF_NAMES, raised_roof_why
from brrrtui.present.stream_report import stream_json, stream_text
from brrrtui.present.verdicts import on_chip_load_bytes

SCHEMA = 4


def _num(x: float | int | None) -> float | int | None:
    if x is None:
        return None
    if isinstance(x, int):
        return x
    x = float(x)
    return x if math.isfinite(x) else None


def to_json(
    analysis: Analysis, top: int | None = None, others: Mapping[Phase, Analysis] | None = None
) -> dict[str, Any]:
    """`others`: the set-up / warm-up analyses shown apart (analyzers.analyze.analyze_with_other_phases)."""
    a = analysis
    b = a.breakdown
    o = a.overhead
    cwd = run_cwd(a)
    gpu = a.has_gpu
    lines = a.lines if gpu else by_host_time(a.lines)
    capped = capped_kernels(a)
    doc = {
        "schema": SCHEMA,
        "device": {
            "name": a.trace.device.name,
            "peak_flops_per_s": _num(a.peaks.tensor_flops_per_s),
            "peak_bytes_per_s": _num(a.peaks.bytes_per_s),
            "peaks_source": a.peaks.source,
            "peaks_raised_from": {f: float(v) for f, v in a.peaks.raised_from},
        },
        "span_ns": int(b.span_ns),
        "breakdown_ns": _breakdown_json(a),
        "communication": comm_json(a.communication, a.steps_analysed),
        "overhead": {
            "raw_fraction": _num(o.raw_overhead_fraction),
            "corrected_fraction": _num(o.corrected_overhead_fraction),
            "profiled_step_ns": _num(o.profiled_step_ns),
            "unprofiled_step_ns": _num(o.unprofiled_step_ns),
        }
        if gpu
        else None,
        "lines": [_line_json(s, cwd, gpu) for s in (lines if top is None else lines[:top])],
        "kernels": [_kernel_json(k, capped) for k in (a.kernels if top is None else a.kernels[:top])],
        "findings": [_finding_json(f, cwd) for f in a.findings],
        "modules": modules_json(a.modules),
        "library_lines": [
            _line_json(s, cwd) for s in (a.library_lines if top is None else a.library_lines[:top])
        ],
    } | phase_json(a, others or {})
    if not gpu:
        doc["other_phases"] = {p.value: _cpu_other_json(x, cwd) for p, x in (others or {}).items()}
    if len(a.trace.stream):
        doc["stream"] = stream_json(a, top)
    return doc


def _breakdown_json(a: Analysis) -> dict[str, int] | None:
    """The analysed span by regime; None without GPU activity (no regimes to split it into)."""
    if not a.has_gpu:
        return None
    b = a.breakdown
    return {
        "compute": int(b.compute_ns),
        "memory": int(b.memory_ns),
        "communication": int(b.communication_ns),
        "overhead": int(b.overhead_ns),
    }


def _cpu_other_json(o: Analysis, cwd: str | None) -> dict[str, Any]:
    """A set-up or warm-up phase of a run without GPU activity: its span and its lines by CPU-side time."""
    return {
        "windows": list(o.windows),
        "span_ns": int(o.breakdown.span_ns),
        "breakdown_ns": _breakdown_json(o),
        "lines": [_line_json(s, cwd, o.has_gpu) for s in by_host_time(o.lines)[:OTHER_PHASE_LINES]],
    }


def run_cwd(a: Analysis) -> str | None:
    """The folder the script ran in, as recorded (None for a foreign trace)."""
    cwd = a.trace.meta.get("cwd")
    return cwd if isinstance(cwd, str) else None


def _line_json(s: LineStat, cwd: str | None = None, gpu: bool = True) -> dict[str, Any]:
    """A line's figures; `gpu` False (a run without GPU activity): no regime."""
    return {
        "file": s.line.file,
        "line": int(s.line.line),
        "function": s.line.function,
        "gpu_ns": int(s.gpu_ns),
        "idle_ns": int(s.idle_ns),
        "idle_profiled_ns": int(s.idle_profiled_ns),
        "cpu_ns": int(s.cpu_ns),
        "sampled_ns": int(s.sampled_ns),
        "host_ns": int(s.host_ns),
        "regime": s.regime.value if gpu else None,
        "flops": _num(s.flops),
        "bytes": _num(s.bytes),
        "kernels": int(s.kernels),
        "display": f"{readable_path(s.line.file, cwd)}:{s.line.line}",
    }


def capped_kernels(a: Analysis) -> dict[str, str]:
    """Kernel name -> why a call's roof fraction was capped at 100 % (analyzers.cost.roofline.capped_names)."""
    return capped_names(
        a.trace, a.peaks, a.kernel_flops, a.kernel_bytes, a.kernel_unit_peak_flops_per_s, a.kernel_fits_in_l2
    )


# the kernel table's footnote for a capped roof fraction, by reason
CAPPED_NOTES = {
    "l2_resident": "the working set fits in L2 and moved faster than DRAM allows: served from L2 (no L2 roof known, or above it)",
    "over_peak": "a rate above the roof: the calibrated peak is below what this GPU reached",
}


def _kernel_json(k: KernelStat, capped: Mapping[str, str]) -> dict[str, Any]:
    return {
        "name": k.name,
        "calls": int(k.calls),
        "gpu_ns": int(k.gpu_ns),
        "regime": k.regime.value,
        "achieved_flops_per_s": _num(k.achieved_flops_per_s),
        "achieved_bytes_per_s": _num(k.achieved_bytes_per_s),
        "narrow_load_bytes": on_chip_load_bytes(k.regime, k.name),
        "roof_fraction": _num(k.roof_fraction),
        "capped": capped.get(k.name),
    }


def _finding_json(f: Finding, cwd: str | None = None) -> dict[str, Any]:
    return {
        "kind": f.kind,
        "lines": [
            {"file": ln.file, "line": int(ln.line), "display": f"{readable_path(ln.file, cwd)}:{ln.line}"}
            for ln in f.lines
        ],
        "saving_ns": _num(f.saving_ns),
        "message": message(f),
        "action": action(f),
    } | place_json(f.place)


def short_kernel_name(name: str, width: int = 70) -> str:
    """Demangled kernel names run to hundreds of characters; keep the recognisable head."""
    s = name.removeprefix("void ").replace("(anonymous namespace)::", "").replace("at::native::", "")
    return s if len(s) <= width else s[: width - 1] + "…"


def _bar(fraction: float, width: int = 24) -> str:
    n = max(0, min(width, round(fraction * width)))
    return "█" * n + "·" * (width - n)


def render_text(analysis: Analysis, top: int = 15, others: Mapping[Phase, Analysis] | None = None) -> str:
    a = analysis
    t = a.trace
    if not t.has_gpu:
        out = _cpu_only_text(a, top)
    else:
        out = _header_text(a)
    if a.lines and t.has_gpu:
        out.append("")
        out.append(f"top lines (GPU + idle time{', per step' if a.steps_analysed else ''})")
        per = a.steps_analysed or 1
        out += [_line_text(s, per) for s in [s for s in a.lines if s.gpu_ns or s.idle_ns][:top]]
    out += modules_text(a) + library_lines_text(a, min(top, 10))
    if a.kernels:
        out.append("")
        out.append("top kernels")
        out.append(
            f"  {'calls':>6} {'gpu time':>10}  {'regime':<8} {'FLOP/s':>12} {'bytes/s':>11} {'roof':>5}  name"
        )
        capped = capped_kernels(a)
        out += [_kernel_text(k, capped.get(k.name)) for k in a.kernels[:top]]
        reasons = sorted({capped[k.name] for k in a.kernels[:top] if k.name in capped})
        out += [f"  * roof capped at 100 %: {CAPPED_NOTES[r]} ({r})" for r in reasons]
    out += comm_text(a)
    out.append("")
    if a.findings:
        out.append("findings (estimated saving first)")
        for i, f in enumerate(a.findings, 1):
            saving = f"  ~{fmt_ns(f.saving_ns)}" if f.saving_ns else ""
            said = words(f)
            out.append(f"  {i}. [{f.kind}]{saving}  {said.message}")
            out.append(f"     → {said.action}")
            out += finding_place_lines(f)
    elif t.has_gpu:
        out.append("findings: none above the reporting thresholds")
    else:
        out.append("findings: none (the verdicts and advice need GPU activity)")
    if len(t.stream):
        out.append("")
        out.extend(stream_text(a, min(top, 10)))
    out += phase_sections(others or {}, _line_text) if t.has_gpu else _cpu_phase_sections(others or {})
    for n in a.notes:
        out.append(f"note: {n}")
    return readable_text("\n".join(out), run_cwd(a))


def _roof(a: Analysis, field: str) -> str:
    """A FLOP roof of the header: "667 TFLOP/s tensor", and why where a kernel of the run raised it."""
    why = raised_roof_why(a, field)
    return f"{fmt_flops(getattr(a.peaks, field))} {ROOF_NAMES[field]}" + (f" ({why})" if why else "")


def _header_text(a: Analysis) -> list[str]:
    """The device and its roofs, what was analysed, and where the time goes by regime."""
    t, b, p = a.trace, a.breakdown, a.peaks
    src = os.path.basename(t.source) if t.source else "trace"
    l2 = f", L2 {p.l2_bytes / 2**20:.0f} MiB" if p.l2_bytes else ""
    in_comm = a.gaps.cause == GAP_CAUSE_CODES[GapCause.COMMUNICATION] if len(a.gaps) else None
    waited = int(a.gaps.dur_ns[in_comm].sum()) if in_comm is not None else 0  # GPU idle inside collectives
    busy = b.busy_ns + (b.overhead_ns - (b.idle_ns or 0)) - waited
    nwin = len(t.windows)
    steps = f", {a.steps_analysed} step{'s' if a.steps_analysed != 1 else ''}" if a.steps_analysed else ""
    out = [
        f"brrrtui report: {src}",
        f"device   {t.device.name or 'unknown'} · peaks {p.source}: {_roof(a, 'tensor_flops_per_s')},"
        f" {_roof(a, 'fp32_flops_per_s')}, {fmt_bw(p.bytes_per_s)}{l2}",
        f"analysed {nwin} window{'s' if nwin != 1 else ''}{steps}, {fmt_ns(b.span_ns)} ({fmt_ns(busy)} GPU busy)",
        phase_line(a),
        "",
        "where the time goes",
    ]
    idle = (
        {c: int(a.gaps.dur_ns[a.gaps.cause == GAP_CAUSE_CODES[c]].sum()) for c in GapCause}
        if len(a.gaps)
        else {}
    )
    idle_txt = ", ".join(f"{c.value} {fmt_ns(v)}" for c, v in idle.items() if v and c is not GapCause.COMMUNICATION)
    with_comm = b.communication_ns or b.communication_hidden_ns
    comm = [(Regime.COMMUNICATION, b.communication_ns)] if with_comm else []
    for regime, ns in (
        (Regime.COMPUTE, b.compute_ns),
        (Regime.MEMORY, b.memory_ns),
        *comm,
        (Regime.OVERHEAD, b.overhead_ns),
    ):
        frac = b.fraction(regime)
        extra = f"  idle {fmt_ns(b.idle_ns)}: {idle_txt}" if regime == Regime.OVERHEAD and b.idle_ns else ""
        if regime is Regime.COMMUNICATION:  # the exposed part; the hidden part counts as compute/memory
            inside = f", {fmt_ns(waited)} of it GPU idle inside CPU-side collectives" if waited else ""
            extra = f"  exposed{inside}; {fmt_ns(b.communication_hidden_ns)} more hidden under compute or memory"
        out.append(f"  {_label(regime):<9}{fmt_ns(ns):>10} {fmt_pct(frac):>5}  {_bar(frac)}{extra}")
    o = a.overhead
    corr = (
        f"corrected {fmt_pct(o.corrected_overhead_fraction)} (unprofiled step {fmt_ns(o.unprofiled_step_ns)})"
        if o.corrected_overhead_fraction is not None
        else "corrected ? (no unprofiled steps to compare with)"
    )
    prof = f" · profiled step {fmt_ns(o.profiled_step_ns)}" if o.profiled_step_ns else ""
    out.append(f"  overhead share: raw {fmt_pct(o.raw_overhead_fraction)} · {corr}{prof}")
    return out


def _cpu_only_text(a: Analysis, top: int) -> list[str]:
    """Without GPU activity only the CPU is measured: each line's CPU-side time (LineStat.host_ns), the lines
    `--json` and the view list, in their order."""
    src = os.path.basename(a.trace.source) if a.trace.source else "trace"
    nwin = len(a.trace.windows)
    steps = f", {a.steps_analysed} step{'s' if a.steps_analysed != 1 else ''}" if a.steps_analysed else ""
    out = [
        f"brrrtui report: {src}",
        "device   no GPU activity recorded: no GPU regimes or verdicts; CPU-side time per line instead",
        f"analysed {nwin} window{'s' if nwin != 1 else ''}{steps}, {fmt_ns(a.breakdown.span_ns)}",
        phase_line(a),
        "",
        f"CPU time per line{', per step' if a.steps_analysed else ''}: the main thread's sampled time on it (a "
        "sleep, a Python loop), or its time in torch calls where that is more",
        f"  {'line':<40} {'CPU-side':>9}  {'in torch':>9}",
    ]
    out += _cpu_lines_text(a, top)
    return out


def _cpu_lines_text(a: Analysis, top: int) -> list[str]:
    per = a.steps_analysed or 1
    return [
        f"  {str(s.line) + ' ' + s.line.function:<40} {fmt_ns(s.host_ns / per):>9}  {fmt_ns(s.cpu_ns / per):>9}"
        for s in by_host_time(a.lines)[:top]
    ]


def _cpu_phase_sections(others: Mapping[Phase, Analysis]) -> list[str]:
    """The set-up and warm-up windows of a run without GPU activity, by CPU-side time."""
    out: list[str] = []
    for phase, o in others.items():
        wins = ", ".join(str(w) for w in o.windows)
        out += [
            "",
            f"{phase.label} (window {wins}; {fmt_ns(o.breakdown.span_ns)}) — not in the figures above",
        ]
        out += _cpu_lines_text(o, OTHER_PHASE_LINES)
    return out


def _line_text(s: LineStat, per: int) -> str:
    r = s.gpu_ns_by_regime
    parts = "/".join(fmt_ns(r[x] / per) for x in (Regime.COMPUTE, Regime.MEMORY, Regime.OVERHEAD))
    comm = r.get(Regime.COMMUNICATION, 0)
    parts += f", comm {fmt_ns(comm / per)}" if comm else ""
    return (
        f"  {str(s.line) + ' ' + s.line.function:<40} {_label(s.regime):<8}"
        f" gpu {fmt_ns(s.gpu_ns / per)} (c/m/o {parts})  idle {fmt_ns(s.idle_ns / per)}"
        f"  {s.kernels / per:.0f} kernels  {fmt_flop_count(None if s.flops is None else s.flops / per)}"
        f"  {fmt_bytes(None if s.bytes is None else s.bytes / per)}"
    )


def _label(r: Regime) -> str:
    """A regime in the report's 8-character columns."""
    return "comm" if r is Regime.COMMUNICATION else r.value


def _kernel_text(k: KernelStat, capped: str | None = None) -> str:
    on_chip = on_chip_load_bytes(k.regime, k.name) is not None
    regime = "on-chip" if on_chip else _label(k.regime)  # memory-bound in L1/shared, not DRAM
    mark = "*" if capped else " "  # a call's fraction capped at 100 %: the footnote says why
    return (
        f"  {k.calls:>6} {fmt_ns(k.gpu_ns):>10}  {regime:<8} {fmt_flops(k.achieved_flops_per_s):>12}"
        f" {fmt_bw(k.achieved_bytes_per_s):>11} {fmt_pct(k.roof_fraction):>5}{mark} {short_kernel_name(k.name)}"
    )
