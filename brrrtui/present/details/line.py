"""A source line, and the calls of one op (name and input shapes) that the line made."""

from __future__ import annotations

import numpy as np

from analyzers.arrays import distinct, unique_inverse, unique_rows
from analyzers.results import LineStat, Regime
from brrrtui.contract.units import fmt_bw, fmt_bytes, fmt_flop_count, fmt_flops, fmt_ns, fmt_pct
from brrrtui.present.details.common import Detail, cause_of, display_path, nansum, per, rate, short
from brrrtui.present.finding_words import words
from brrrtui.present.gutter import BADGES
from brrrtui.present.selection import Kind
from brrrtui.present.snapshot import Snapshot
from brrrtui.present.verdicts import line_verdict


def line(snap: Snapshot, line_id: int) -> Detail:
    s = snap.lines_by_id[line_id]
    d = Detail(display_path(snap, s.line))
    d.add((display_path(snap, s.line), "path"), (f" in {s.line.function}", "muted"))
    if snap.cpu_only:
        _cpu_line_numbers(snap, s, d)
        return d
    d.add(("verdict: ", "label"), (line_verdict(s), s.regime.value))
    _line_numbers(snap, s, d)
    _line_ops(snap, line_id, d)
    g = snap.analysis.gaps
    if len(g):
        grow = np.nonzero(g.line == line_id)[0]
        for r in grow[np.argsort(-g.dur_ns[grow])][:5].tolist():
            d.link(f"{fmt_ns(g.dur_ns[r]):>9} idle: {cause_of(int(g.cause[r])).value}", Kind.GAP, r)
    for i, f in enumerate(snap.findings):
        if s.line in f.lines:
            said = words(f)
            d.add(("advice: ", "label"), (said.action, "advice"))
            d.link(f"⚑ {said.message}", Kind.FINDING, i)
    return d


def _cpu_line_numbers(snap: Snapshot, s: LineStat, d: Detail) -> None:
    """A line of a run without GPU activity: its CPU-side time and what it is made of (no verdict)."""
    steps = max(snap.analysis.steps_analysed, 1) if snap.per_step else 1
    d.add(
        ("CPU-side time: ", "label"),
        (
            f"{fmt_ns(s.host_ns / steps)}{per(snap)}: {fmt_ns(s.sampled_ns / steps)} sampled on the line (a sleep, "
            f"a Python loop included), {fmt_ns(s.cpu_ns / steps)} in its torch calls",
            "",
        ),
    )
    d.add(("no GPU activity recorded: no regime or verdict for this line", "muted"))


def _line_numbers(snap: Snapshot, s: LineStat, d: Detail) -> None:
    t = s.per_step_gpu_ns if snap.per_step and s.per_step_gpu_ns is not None else s.gpu_ns
    share = s.gpu_ns / snap.total_gpu_ns if snap.total_gpu_ns else None
    d.add(
        (
            f"GPU {fmt_ns(t)}{per(snap)} ({fmt_pct(share)} of GPU time) · {s.kernels} kernels · "
            f"CPU {fmt_ns(s.cpu_ns)} · idle caused {fmt_ns(s.idle_ns)}",
            "",
        )
    )
    shown = [r for r in Regime if r is not Regime.COMMUNICATION or s.gpu_ns_by_regime.get(r, 0)]
    d.add(*[(f"{r.value} {fmt_ns(s.gpu_ns_by_regime.get(r, 0))}  ", r.value) for r in shown])
    streamed = snap.stream_lines.get(s.line_id)
    if streamed is not None:
        d.add((f"streamed: {streamed[0]:,} kernels, {fmt_ns(streamed[1])} (inferred)", "muted"))
    secs = s.gpu_ns / 1e9 if s.gpu_ns else None
    d.add(
        (
            f"{fmt_flop_count(s.flops)} ({fmt_flops(rate(s.flops, secs))}) · {fmt_bytes(s.bytes)} "
            f"({fmt_bw(rate(s.bytes, secs))})",
            "muted",
        )
    )


def _line_ops(snap: Snapshot, line_id: int, d: Detail) -> None:
    """The ops that launched the line's kernels, grouped by name and input shapes, heaviest first."""
    a = snap.analysis
    rows = np.nonzero(a.links.kernel_line == line_id)[0]
    op_rows = a.links.kernel_op[rows]
    ops = a.trace.ops
    known = op_rows >= 0
    if known.any():
        names, shapes_of = (ops[c][op_rows[known]].astype(np.int64) for c in ("name", "shapes"))
        # by (name, shapes), as np.unique(axis=0) orders them, without its sort of rows as records
        first, inv = unique_rows((names, shapes_of))
        gpu_ns = np.bincount(inv, weights=a.trace.gpu.dur_ns[rows[known]], minlength=len(first))
        for k in np.argsort(-gpu_ns)[:30].tolist():
            name, shapes = int(names[first[k]]), int(shapes_of[first[k]])
            label = f"{fmt_ns(gpu_ns[k]):>9} {snap.op_name(name)} {short(a.trace.name(shapes), 40)}"
            d.link(label, Kind.OP, line_id, name, shapes)
    if (~known).any():
        ns = a.trace.gpu.dur_ns[rows[~known]].sum()
        d.link(f"{fmt_ns(ns):>9} (kernels without a recorded op)", Kind.OP, line_id, -1, -1)


def op_kernel_rows(snap: Snapshot, line_id: int, name: int, shapes: int) -> np.ndarray:
    """The gpu rows a line launched through ops of one name and shapes (name -1: through no recorded op)."""
    a = snap.analysis
    rows = np.nonzero(a.links.kernel_line == line_id)[0]
    ops = a.links.kernel_op[rows]
    if name < 0:
        return rows[ops < 0]
    ok = ops >= 0
    sel = np.zeros(len(rows), dtype=bool)
    sel[ok] = (a.trace.ops.name[ops[ok]] == name) & (a.trace.ops.shapes[ops[ok]] == shapes)
    return rows[sel]


def op(snap: Snapshot, line_id: int, name: int, shapes: int) -> Detail:
    a = snap.analysis
    tr = a.trace
    rows = op_kernel_rows(snap, line_id, name, shapes)
    title = tr.name(name) if name >= 0 else "kernels without an op"
    d = Detail(title)
    op_rows = distinct(a.links.kernel_op[rows])
    op_rows = op_rows[op_rows >= 0]
    s = snap.lines_by_id.get(line_id)
    d.add(
        (title, "label"),
        (f"  {len(op_rows)} call(s) from {display_path(snap, s.line)}" if s else "", "muted"),
    )
    if shapes >= 0:
        d.add(("shapes ", "label"), (tr.name(shapes), ""))
    if len(op_rows):
        dt = int(tr.ops.dtypes[op_rows[0]])
        if dt >= 0:
            d.add(("dtypes ", "label"), (tr.name(dt), ""))
        d.add((f"CPU {fmt_ns(tr.ops.dur_ns[op_rows].sum())} inside the op", "muted"))
    f, b = nansum(a.kernel_flops[rows]), nansum(a.kernel_bytes[rows])
    gpu_ns = float(tr.gpu.dur_ns[rows].sum())
    d.add((f"GPU {fmt_ns(gpu_ns)} in {len(rows)} kernel(s) · {fmt_flop_count(f)} · {fmt_bytes(b)}", ""))
    names, inv = unique_inverse(tr.gpu.name[rows])
    ns = np.bincount(inv, weights=tr.gpu.dur_ns[rows], minlength=len(names))
    for k in np.argsort(-ns).tolist():
        nm = tr.name(int(names[k]))
        ks = snap.kernels_by_name.get(nm)
        reg = BADGES[ks.regime] if ks else "?"
        d.link(
            f"{fmt_ns(ns[k]):>9} {reg} {short(nm, 70)}",
            Kind.KERNEL_NAME,
            int(names[k]),
            line_id,
            name,
            shapes,
        )
    return d
