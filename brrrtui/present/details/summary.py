"""The summary (the root of the drill-down) and a finding."""

from __future__ import annotations

from analyzers.results import Finding, LineStat, Regime
from brrrtui.contract.units import fmt_bw, fmt_flops, fmt_ns, fmt_pct
from brrrtui.present.details.common import Detail, display_path, message_parts, per, short
from brrrtui.present.finding_words import action, message
from brrrtui.present.gutter import BADGES, line_host_ns
from brrrtui.present.paths import Location, Phrase
from brrrtui.present.selection import Kind
from brrrtui.present.snapshot import Snapshot


def summary(snap: Snapshot) -> Detail:
    if snap.cpu_only:
        return _cpu_summary(snap)
    a = snap.analysis
    b = a.breakdown
    d = Detail("summary")
    dev = a.trace.device.name or "unknown GPU"
    where = f"{len(snap.windows)} window(s), {a.steps_analysed} step(s) analysed, {fmt_ns(b.span_ns)} of wall time"
    d.add((dev, "label"), (f"  ·  {where}", ""))
    spans: list[tuple[str, str]] = []
    for r in (Regime.COMPUTE, Regime.MEMORY, Regime.COMMUNICATION, Regime.OVERHEAD):
        if r is Regime.COMMUNICATION and not (b.communication_ns or b.communication_hidden_ns):
            continue  # a run without collectives
        spans += [(f"  {r.value} " if spans else f"{r.value} ", r.value), (fmt_pct(b.fraction(r)), r.value)]
    d.add(*spans)
    oc = a.overhead
    if oc.corrected_overhead_fraction is not None:
        d.add(
            (
                f"overhead without the profiler's slowdown: {fmt_pct(oc.corrected_overhead_fraction)} (profiled "
                f"step {fmt_ns(oc.profiled_step_ns)}, unprofiled {fmt_ns(oc.unprofiled_step_ns)})",
                "muted",
            )
        )
    p = a.peaks
    d.add(
        (
            f"roofs: {fmt_flops(p.tensor_flops_per_s)} tensor, {fmt_flops(p.fp32_flops_per_s)} fp32, "
            f"{fmt_bw(p.bytes_per_s)} ({p.source})",
            "muted",
        )
    )
    for note in a.notes:
        d.add(("note: " + note, "muted"))
    for i, f in enumerate(snap.findings[:20]):
        d.link(Phrase(f"⚑ {_saving(snap, f)} ", *message_parts(snap, message(f))), Kind.FINDING, i)
    for s in snap.hot_lines[:20]:
        d.link(_line_label(snap, s), Kind.LINE, s.line_id)
    return d


def _cpu_summary(snap: Snapshot) -> Detail:
    """A run without GPU activity: what was analysed, that there are no regimes, and the lines by CPU-side time."""
    a = snap.analysis
    d = Detail("summary")
    where = f"{len(snap.windows)} window(s), {a.steps_analysed} step(s) analysed, {fmt_ns(a.breakdown.span_ns)} of wall time"
    d.add(("no GPU activity", "label"), (f"  ·  {where}", ""))
    d.add(
        (
            f"no regimes, verdicts or advice: each line shows its CPU-side time{per(snap)} (the main thread's "
            "sampled time on it, or its time in torch calls where that is more)",
            "muted",
        )
    )
    for note in a.notes:
        d.add(("note: " + note, "muted"))
    for s in snap.hot_lines[:20]:
        t = line_host_ns(s, snap.per_step)
        d.link(
            Phrase(f"{fmt_ns(t):>9}   ", display_path(snap, s.line), f" {s.line.function}"),
            Kind.LINE,
            s.line_id,
        )
    return d


def _saving(snap: Snapshot, f: Finding) -> str:
    return f"-{fmt_ns(f.saving_ns)}{per(snap)}" if f.saving_ns else ""


def _line_label(snap: Snapshot, s: LineStat) -> Phrase:
    t = s.per_step_gpu_ns if snap.per_step and s.per_step_gpu_ns is not None else s.gpu_ns
    return Phrase(f"{fmt_ns(t):>9} {BADGES[s.regime]} ", display_path(snap, s.line), f" {s.line.function}")


def finding(snap: Snapshot, index: int) -> Detail:
    f = snap.findings[index]
    d = Detail(f"finding: {f.kind}")
    d.add(
        ("verdict: ", "label"),
        *((p, "path" if isinstance(p, Location) else "") for p in message_parts(snap, message(f))),
    )
    d.add(("advice: ", "label"), (action(f), "advice"))
    if f.saving_ns:
        d.add((f"estimated saving {fmt_ns(f.saving_ns)}{per(snap)}", "label"))
    for ln in f.lines:
        s = snap.lines_by_source.get(ln)
        d.add(("at ", "muted"), (display_path(snap, ln), "path"))
        if s is not None:
            d.link(Phrase("line ", display_path(snap, ln)), Kind.LINE, s.line_id)
    for r in f.kernels[:10]:
        if 0 <= r < len(snap.trace.gpu):
            d.link(f"{fmt_ns(snap.trace.gpu.dur_ns[r]):>9} {short(snap.kernel_name(r), 60)}", Kind.KERNEL, r)
    return d
