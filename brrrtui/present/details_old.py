"""The details pane's drill-down, as data: summary -> line -> ops -> kernels -> kernel -> gap -> advice; a
streamed kernel (between windows) -> the window kernel it was matched to and its inferred line.

`describe(snapshot, node)` returns a title, body lines of (text, role) spans and the children one can drill
into with Enter. Everything is computed on demand from the snapshot's columns (numpy masks over at most the
kernels of one line), so a drill step stays well under a frame at a million kernels.
"""

from __future__ import annotations

import math
import os
from collections.abc import Callable
from dataclasses import dataclass, field

import numpy as np

from analyzers.model import SourceLine
from analyzers.results import (
    GAP_CAUSE_CODES,
    REGIMES_BY_CODE,
    Finding,
    GapCause,
    KernelStat,
    LineStat,
    Regime,
)
from brrrtui.present.snapshot import Snapshot
from brrrtui.present.units import (
    NA,
    fmt_byte_rate,
    fmt_bytes,
    fmt_flop_rate,
    fmt_flops,
    fmt_ns,
    fmt_pct,
)
from brrrtui.present.verdicts import (
    FINDING_KINDS_BY_CAUSE,
    GAP_ADVICE,
    GAP_VERDICT,
    finite,
    kernel_verdict,
    line_verdict,
)

Span = tuple[str, str]
CAUSES_BY_CODE = {v: k for k, v in GAP_CAUSE_CODES.items()}


@dataclass(frozen=True)
class Node:
    kind: str  # summary | line | op | kname | kernel | gap | finding | streamed (key: the stream's rowid)
    key: tuple = ()


SUMMARY = Node("summary")


@dataclass
class Detail:
    title: str
    body: list[list[Span]] = field(default_factory=list)
    children: list[tuple[str, Node]] = field(default_factory=list)

    def text(self) -> str:
        """Plain text (tests, screenshots' alt text)."""
        return "\n".join("".join(t for t, _ in line) for line in self.body)


def display_path(snap: Snapshot, line: SourceLine) -> str:
    """`file:line` as a terminal can open it: relative to the cwd when the file is below it, else absolute,
    else as recorded (the file is not on this machine)."""
    path = snap.resolve(line.file)
    if path is None:
        return f"{line.file}:{line.line}"
    rel = os.path.relpath(path)
    return f"{rel if not rel.startswith('..') else os.path.abspath(path)}:{line.line}"


def _per(snap: Snapshot) -> str:
    return "/step" if snap.per_step else "/window"


def _steps(snap: Snapshot) -> int:
    return max(snap.analysis.steps_analysed, 1) if snap.per_step else 1


# ---------------------------------------------------------------- nodes


def describe(snap: Snapshot, node: Node) -> Detail:
    fn = _DESCRIBE.get(node.kind)
    if fn is None:
        return Detail(f"unknown item {node.kind}")
    try:
        return fn(snap, *node.key)
    except (IndexError, KeyError):
        return Detail("gone", [[("This item is not in the current snapshot.", "muted")]])


def _summary(snap: Snapshot) -> Detail:
    a = snap.analysis
    b = a.breakdown
    d = Detail("summary")
    dev = a.trace.device.name or "unknown GPU"
    d.body.append([(f"{dev}", "label"), (f"  ·  {len(snap.windows)} window(s), {a.steps_analysed} step(s) "
                                         f"analysed, {fmt_ns(b.span_ns)} of wall time", "")])  # fmt: skip
    d.body.append(
        [
            ("compute ", "compute"),
            (fmt_pct(b.fraction(Regime.COMPUTE)), "compute"),
            ("  memory ", "memory"),
            (fmt_pct(b.fraction(Regime.MEMORY)), "memory"),
            ("  overhead ", "overhead"),
            (fmt_pct(b.fraction(Regime.OVERHEAD)), "overhead"),
        ]  # fmt: skip
    )
    oc = a.overhead
    if oc.corrected_overhead_fraction is not None:
        d.body.append([(f"overhead without the profiler's slowdown: {fmt_pct(oc.corrected_overhead_fraction)} "
                        f"(profiled step {fmt_ns(oc.profiled_step_ns)}, unprofiled {fmt_ns(oc.unprofiled_step_ns)})",
                        "muted")])  # fmt: skip
    p = a.peaks
    d.body.append([(f"roofs: {fmt_flop_rate(p.tensor_flops_per_s)} tensor, {fmt_flop_rate(p.fp32_flops_per_s)} "
                    f"fp32, {fmt_byte_rate(p.bytes_per_s)} ({p.source})", "muted")])  # fmt: skip
    for note in a.notes:
        d.body.append([("note: " + note, "muted")])
    for i, f in enumerate(snap.findings[:20]):
        d.children.append((f"⚑ {_saving(snap, f)} {f.message}", Node("finding", (i,))))
    for s in snap.hot_lines[:20]:
        d.children.append((_line_label(snap, s), Node("line", (s.line_id,))))
    return d


def _saving(snap: Snapshot, f: Finding) -> str:
    return f"-{fmt_ns(f.saving_ns)}{_per(snap)}" if f.saving_ns else ""


def _line_label(snap: Snapshot, s: LineStat) -> str:
    t = s.per_step_gpu_ns if snap.per_step and s.per_step_gpu_ns is not None else s.gpu_ns
    return f"{fmt_ns(t):>9} {s.regime.value[0].upper()} {display_path(snap, s.line)} {s.line.function}"


def _line(snap: Snapshot, line_id: int) -> Detail:
    s = snap.lines_by_id[line_id]
    a = snap.analysis
    d = Detail(display_path(snap, s.line))
    d.body.append([(display_path(snap, s.line), "path"), (f" in {s.line.function}", "muted")])
    d.body.append([("verdict: ", "label"), (line_verdict(s), s.regime.value)])
    t = s.per_step_gpu_ns if snap.per_step and s.per_step_gpu_ns is not None else s.gpu_ns
    share = s.gpu_ns / snap.total_gpu_ns if snap.total_gpu_ns else None
    d.body.append([(f"GPU {fmt_ns(t)}{_per(snap)} ({fmt_pct(share)} of GPU time) · {s.kernels} kernels · "
                    f"CPU {fmt_ns(s.cpu_ns)} · idle caused {fmt_ns(s.idle_ns)}", "")])  # fmt: skip
    d.body.append([(f"{r.value} {fmt_ns(s.gpu_ns_by_regime.get(r, 0))}  ", r.value) for r in Regime])
    streamed = snap.stream_lines.get(line_id)
    if streamed is not None:
        d.body.append([(f"streamed: {streamed[0]:,} kernels, {fmt_ns(streamed[1])} (inferred)", "muted")])
    secs = s.gpu_ns / 1e9 if s.gpu_ns else None
    d.body.append([(f"{fmt_flops(s.flops)} ({fmt_flop_rate(s.flops / secs if finite(s.flops) and secs else None)})"
                    f" · {fmt_bytes(s.bytes)} ({fmt_byte_rate(s.bytes / secs if finite(s.bytes) and secs else None)})",
                    "muted")])  # fmt: skip
    # ops that launched this line's kernels, grouped by name and input shapes
    rows = np.nonzero(a.links.kernel_line == line_id)[0]
    op_rows = a.links.kernel_op[rows]
    ops = a.trace.ops
    known = op_rows >= 0
    if known.any():
        keys = np.stack(
            [ops.name[op_rows[known]].astype(np.int64), ops.shapes[op_rows[known]].astype(np.int64)], 1
        )
        uniq, inv = np.unique(keys, axis=0, return_inverse=True)
        gpu_ns = np.bincount(inv.ravel(), weights=a.trace.gpu.dur_ns[rows[known]], minlength=len(uniq))
        for k in np.argsort(-gpu_ns)[:30].tolist():
            name, shapes = int(uniq[k, 0]), int(uniq[k, 1])
            label = f"{fmt_ns(gpu_ns[k]):>9} {a.trace.name(name)} {_short(a.trace.name(shapes), 40)}"
            d.children.append((label, Node("op", (line_id, name, shapes))))
    if (~known).any():
        d.children.append((f"{fmt_ns(a.trace.gpu.dur_ns[rows[~known]].sum()):>9} (kernels without a recorded op)",
                           Node("op", (line_id, -1, -1))))  # fmt: skip
    g = a.gaps
    if len(g):
        grow = np.nonzero(g.line == line_id)[0]
        for r in grow[np.argsort(-g.dur_ns[grow])][:5].tolist():
            cause = CAUSES_BY_CODE.get(int(g.cause[r]), GapCause.OTHER)
            d.children.append((f"{fmt_ns(g.dur_ns[r]):>9} idle: {cause.value}", Node("gap", (r,))))
    for i, f in enumerate(snap.findings):
        if s.line in f.lines:
            d.body.append([("advice: ", "label"), (f.action, "advice")])
            d.children.append((f"⚑ {f.message}", Node("finding", (i,))))
    return d


def _short(s: str, n: int) -> str:
    return s if len(s) <= n else s[: n - 1] + "…"


def _op_kernel_rows(snap: Snapshot, line_id: int, name: int, shapes: int) -> np.ndarray:
    a = snap.analysis
    rows = np.nonzero(a.links.kernel_line == line_id)[0]
    ops = a.links.kernel_op[rows]
    if name < 0:
        return rows[ops < 0]
    ok = ops >= 0
    sel = np.zeros(len(rows), dtype=bool)
    sel[ok] = (a.trace.ops.name[ops[ok]] == name) & (a.trace.ops.shapes[ops[ok]] == shapes)
    return rows[sel]


def _op(snap: Snapshot, line_id: int, name: int, shapes: int) -> Detail:
    a = snap.analysis
    tr = a.trace
    rows = _op_kernel_rows(snap, line_id, name, shapes)
    title = tr.name(name) if name >= 0 else "kernels without an op"
    d = Detail(title)
    op_rows = np.unique(a.links.kernel_op[rows])
    op_rows = op_rows[op_rows >= 0]
    d.body.append([(title, "label"), (f"  {len(op_rows)} call(s) from {display_path(snap, snap.lines_by_id[line_id].line)}"
                                      if line_id in snap.lines_by_id else "", "muted")])  # fmt: skip
    if shapes >= 0:
        d.body.append([("shapes ", "label"), (tr.name(shapes), "")])
    if len(op_rows):
        dt = int(tr.ops.dtypes[op_rows[0]])
        if dt >= 0:
            d.body.append([("dtypes ", "label"), (tr.name(dt), "")])
        cpu = tr.ops.dur_ns[op_rows].sum()
        d.body.append([(f"CPU {fmt_ns(cpu)} inside the op", "muted")])
    f, b = _nansum(a.kernel_flops[rows]), _nansum(a.kernel_bytes[rows])
    gpu_ns = float(tr.gpu.dur_ns[rows].sum())
    d.body.append([(f"GPU {fmt_ns(gpu_ns)} in {len(rows)} kernel(s) · {fmt_flops(f)} · {fmt_bytes(b)}", "")])
    names, inv = np.unique(tr.gpu.name[rows], return_inverse=True)
    per = np.bincount(inv.ravel(), weights=tr.gpu.dur_ns[rows], minlength=len(names))
    for k in np.argsort(-per).tolist():
        nm = tr.name(int(names[k]))
        ks = snap.kernels_by_name.get(nm)
        reg = ks.regime.value[0].upper() if ks else "?"
        d.children.append(
            (
                f"{fmt_ns(per[k]):>9} {reg} {_short(nm, 70)}",
                Node("kname", (int(names[k]), line_id, name, shapes)),
            )
        )
    return d


def _nansum(x: np.ndarray) -> float | None:
    return float(np.nansum(x)) if len(x) and np.isfinite(x).any() else None


def _kname(snap: Snapshot, name: int, line_id: int = -2, op_name: int = -2, shapes: int = -2) -> Detail:
    a = snap.analysis
    tr = a.trace
    nm = tr.name(name)
    ks: KernelStat | None = snap.kernels_by_name.get(nm)
    if line_id == -2:
        rows = np.nonzero(tr.gpu.name == name)[0]
    else:
        rows = _op_kernel_rows(snap, line_id, op_name, shapes)
        rows = rows[tr.gpu.name[rows] == name]
    d = Detail(_short(nm, 60))
    gpu_ns = float(tr.gpu.dur_ns[rows].sum())
    if ks is not None:
        d.body.append([("verdict: ", "label"), (kernel_verdict(snap, ks.regime, ks.flops, ks.bytes, ks.gpu_ns,
                                                               ks.calls, ks.uses_tensor_cores), ks.regime.value)])  # fmt: skip
        d.body.append([(f"{ks.calls} calls in the run, {fmt_ns(ks.gpu_ns)} ({fmt_ns(ks.gpu_ns / max(ks.calls, 1))} "
                        f"each); here {len(rows)} calls, {fmt_ns(gpu_ns)}", "")])  # fmt: skip
        inten = ks.flops / ks.bytes if finite(ks.flops) and finite(ks.bytes) and ks.bytes else None
        p = a.peaks
        ridge = p.tensor_flops_per_s / p.bytes_per_s if p.tensor_flops_per_s and p.bytes_per_s else None
        d.body.append([(f"{fmt_flops(ks.flops)} · {fmt_bytes(ks.bytes)} · intensity "
                        f"{f'{inten:.1f}' if inten else NA} FLOP/B (ridge {f'{ridge:.0f}' if ridge else NA})", "")])  # fmt: skip
        d.body.append([(f"achieved {fmt_flop_rate(ks.achieved_flops_per_s)} / {fmt_flop_rate(p.tensor_flops_per_s)}"
                        f" · {fmt_byte_rate(ks.achieved_bytes_per_s)} / {fmt_byte_rate(p.bytes_per_s)} · roof "
                        f"{fmt_pct(ks.roof_fraction)}", "")])  # fmt: skip
        extra = []
        if ks.uses_tensor_cores is not None:
            extra.append("tensor cores" if ks.uses_tensor_cores else "no tensor cores")
        if ks.fits_in_l2:
            extra.append("working set fits in L2: bytes overstate DRAM traffic")
        if extra:
            d.body.append([(" · ".join(extra), "muted")])
    d.body.append([(nm, "muted")])
    order = rows[np.argsort(-tr.gpu.dur_ns[rows])][:8]
    for r in order.tolist():
        d.children.append((f"{fmt_ns(tr.gpu.dur_ns[r]):>9} at +{fmt_ns(_rel_start(snap, r))} "
                           f"(window {tr.gpu.window[r]})", Node("kernel", (r,))))  # fmt: skip
    for i, f in enumerate(snap.findings):
        if set(f.kernels) & set(rows.tolist()):
            d.children.append((f"⚑ {f.message}", Node("finding", (i,))))
    return d


def _rel_start(snap: Snapshot, row: int) -> float:
    tr = snap.trace
    wl = snap.lanes.get(int(tr.gpu.window[row]))
    return float(tr.gpu.start_ns[row] - (wl.start_ns if wl else 0))


def _row_value(a: object, column: str, row: int) -> float | None:
    """A per-kernel column the analysis may provide (None when absent, NaN or -1 = unknown)."""
    arr = getattr(a, column, None)
    if arr is None or row >= len(arr):
        return None
    v = float(arr[row])
    return None if math.isnan(v) or (arr.dtype.kind in "iu" and v < 0) else v


def _kernel(snap: Snapshot, row: int) -> Detail:
    a = snap.analysis
    tr = a.trace
    g = tr.gpu
    nm = tr.name(int(g.name[row]))
    regime = REGIMES_BY_CODE.get(int(a.kernel_regime[row]), Regime.OVERHEAD)
    ks = snap.kernels_by_name.get(nm)
    f, b = float(a.kernel_flops[row]), float(a.kernel_bytes[row])
    dur = float(g.dur_ns[row])
    tc = _row_value(a, "kernel_tensor_cores", row)
    tensor = bool(tc) if tc is not None else (ks.uses_tensor_cores if ks else None)
    d = Detail(_short(nm, 60))
    d.body.append(
        [("verdict: ", "label"), (kernel_verdict(snap, regime, f, b, dur, 1, tensor), regime.value)]
    )
    if _row_value(a, "kernel_launch_bound", row):
        d.body.append([("launch-bound: the GPU waited for this kernel, and it ran shorter than the CPU's "
                        "launch interval", "overhead")])  # fmt: skip
    d.body.append([(f"{fmt_ns(dur)} at +{fmt_ns(_rel_start(snap, row))} on GPU{g.device[row]} stream {g.stream[row]}"
                    f" · window {g.window[row]}", "")])  # fmt: skip
    grid, block = tr.name(int(g.grid[row])), tr.name(int(g.block[row]))
    if grid or block:
        d.body.append([(f"grid [{grid}] block [{block}]", "muted")])
    secs = dur / 1e9 if dur > 0 else None
    d.body.append([(f"{fmt_flops(f if finite(f) else None)} ({fmt_flop_rate(f / secs if finite(f) and secs else None)})"
                    f" · {fmt_bytes(b if finite(b) else None)} ({fmt_byte_rate(b / secs if finite(b) and secs else None)})",
                    "")])  # fmt: skip
    p = a.peaks
    ach_f = _row_value(a, "kernel_achieved_flops_per_s", row)
    ach_b = _row_value(a, "kernel_achieved_bytes_per_s", row)
    roof = _row_value(a, "kernel_roof_fraction", row)
    if ach_f is not None or ach_b is not None or roof is not None:
        peak_f = p.tensor_flops_per_s if tensor is not False else p.fp32_flops_per_s
        d.body.append([(f"achieved {fmt_flop_rate(ach_f)} of {fmt_flop_rate(peak_f)} · {fmt_byte_rate(ach_b)} of "
                        f"{fmt_byte_rate(p.bytes_per_s)} · {fmt_pct(roof)} of its roof", "")])  # fmt: skip
    extra = []
    if tensor is not None:
        extra.append("tensor cores" if tensor else "no tensor cores (SIMT)")
    if _row_value(a, "kernel_fits_in_l2", row):
        extra.append("working set fits in L2: bytes overstate DRAM traffic")
    if extra:
        d.body.append([(" · ".join(extra), "muted")])
    op = int(a.links.kernel_op[row])
    if op >= 0:
        d.body.append([("op ", "label"), (tr.name(int(tr.ops.name[op])), ""),
                       (" " + tr.name(int(tr.ops.shapes[op])), "muted")])  # fmt: skip
    s = snap.line_of_kernel(row)
    if s is not None:
        d.body.append([("line ", "label"), (display_path(snap, s.line), "path")])
        d.children.append((f"line {display_path(snap, s.line)}", Node("line", (s.line_id,))))
    d.body.append([(nm, "muted")])
    if ks is not None:
        d.children.append((f"all {ks.calls} calls of this kernel", Node("kname", (int(g.name[row]),))))
    # the idle gaps just before and after it on its stream
    gp = a.gaps
    for label, r in _adjacent_gaps(snap, row):
        cause = CAUSES_BY_CODE.get(int(gp.cause[r]), GapCause.OTHER)
        d.children.append((f"{fmt_ns(gp.dur_ns[r]):>9} {label}: {cause.value}", Node("gap", (r,))))
    for i, fd in enumerate(snap.findings):
        if row in fd.kernels:
            d.children.append((f"⚑ {fd.message}", Node("finding", (i,))))
    return d


def _adjacent_gaps(snap: Snapshot, row: int, slack_ns: float = 1_000) -> list[tuple[str, int]]:
    """The idle gaps that end where the kernel starts and start where it ends (within slack), found by
    binary search in its lane's sorted gaps: O(log n), not a scan of every gap."""
    g = snap.trace.gpu
    wl = snap.lanes.get(int(g.window[row]))
    if wl is None:
        return []
    key = f"gpu:{int(g.device[row])}:{int(g.stream[row])}"
    lane = next((ln for ln in wl.lanes if ln.key == key), None)
    if lane is None or not len(lane.gaps):
        return []
    s = float(g.start_ns[row] - wl.start_ns)
    e = s + float(g.dur_ns[row])
    gaps = lane.gaps
    out = []
    k = int(np.searchsorted(gaps.b_end, s + slack_ns, "right")) - 1
    if 0 <= k < len(gaps) and gaps.end[k] >= s - slack_ns and gaps.end[k] <= s + slack_ns:
        out.append(("idle before", int(gaps.rows[k])))
    k = int(np.searchsorted(gaps.start, e - slack_ns, "left"))
    if 0 <= k < len(gaps) and gaps.start[k] <= e + slack_ns:
        out.append(("idle after", int(gaps.rows[k])))
    return out


def _gap(snap: Snapshot, row: int) -> Detail:
    a = snap.analysis
    g = a.gaps
    cause = CAUSES_BY_CODE.get(int(g.cause[row]), GapCause.OTHER)
    dur = float(g.dur_ns[row])
    d = Detail(f"GPU idle {fmt_ns(dur)}: {cause.value}")
    d.body.append([("verdict: ", "label"), (GAP_VERDICT[cause].format(d=fmt_ns(dur)), f"gap-{cause.value}")])
    wl = snap.lanes.get(int(g.window[row]))
    rel = float(g.start_ns[row] - (wl.start_ns if wl else 0))
    where = f"stream {g.stream[row]}" if int(g.stream[row]) >= 0 else "the whole GPU (no stream busy)"
    d.body.append([(f"from +{fmt_ns(rel)} to +{fmt_ns(rel + dur)} on {where}, window {g.window[row]}", "")])
    lid = int(g.line[row])
    s = snap.lines_by_id.get(lid)
    if s is not None:
        d.body.append([("caused at ", "label"), (display_path(snap, s.line), "path")])
    matched = [
        (i, f) for i, f in enumerate(snap.findings)
        if f.kind in FINDING_KINDS_BY_CAUSE[cause] and (s is None or not f.lines or s.line in f.lines)
    ]  # fmt: skip
    if matched:
        for i, f in matched:
            d.body.append([("advice: ", "label"), (f.action, "advice")])
            d.children.append((f"⚑ {f.message}", Node("finding", (i,))))
    else:
        d.body.append([("advice: ", "label"), (GAP_ADVICE[cause], "advice")])
    if s is not None:
        d.children.append((f"line {display_path(snap, s.line)}", Node("line", (s.line_id,))))
    return d


def _streamed(snap: Snapshot, rowid: int) -> Detail:
    """A kernel streamed between windows: what CUPTI recorded, and the line and regime inferred for it."""
    row = snap.stream_row(rowid)
    if row is None or snap.stream is None:
        raise KeyError(rowid)
    view = snap.stream
    st = view.stream
    nm = snap.stream_name(int(st.name[row]))
    d = Detail(_short(nm, 60))
    wl = snap.stream_lanes.get(int(st.after_window[row]))
    rel = float(st.start_ns[row] - (wl.start_ns if wl else 0))
    after = int(st.after_window[row])
    where = f"streamed after window {after}" if after >= 0 else "streamed before the first window"
    t = int(view.template_row[row])
    regime = REGIMES_BY_CODE.get(int(view.regime[row]))
    if t < 0:
        d.body.append([("inferred: ", "label"), ("no window has seen this kernel", "streamed")])
    else:
        how = "confirmed by the next window" if view.confirmed[row] else "not confirmed by a later window"
        d.body.append([("inferred: ", "label"), (regime.value if regime else "?", f"{regime.value}-inferred"
                       if regime else "streamed"), (f" like window {int(snap.trace.gpu.window[t])}'s kernel ({how})",
                       "")])  # fmt: skip
    d.body.append([(f"{fmt_ns(float(st.dur_ns[row]))} at +{fmt_ns(rel)} on GPU{st.device[row]} stream "
                    f"{st.stream[row]} · {where}", "")])  # fmt: skip
    grid, block = snap.stream_name(int(st.grid[row])), snap.stream_name(int(st.block[row]))
    if int(st.grid[row]) >= 0 or int(st.block[row]) >= 0:
        d.body.append([(f"grid [{grid}] block [{block}]", "muted")])
    if int(st.bytes[row]) > 0:
        d.body.append([(f"{fmt_bytes(float(st.bytes[row]))} moved", "muted")])
    lid = int(view.line[row])
    line = snap.lines_by_id[lid].line if lid in snap.lines_by_id else None
    if line is None and 0 <= lid < len(snap.trace.lines):
        line = snap.trace.lines[lid]
    if line is not None:
        d.body.append([("line ", "label"), (display_path(snap, line), "path"), (" (inferred)", "muted")])
        if lid in snap.lines_by_id:
            d.children.append((f"line {display_path(snap, line)} (inferred)", Node("line", (lid,))))
    elif t >= 0:
        d.body.append([("line: ", "label"), ("the matched window kernel has no line", "muted")])
    d.body.append([(nm, "muted")])
    if t >= 0:
        d.children.append((f"matched window kernel: {_short(snap.kernel_name(t), 60)}", Node("kernel", (t,))))
    return d


def _finding(snap: Snapshot, index: int) -> Detail:
    f = snap.findings[index]
    d = Detail(f"finding: {f.kind}")
    d.body.append([("verdict: ", "label"), (f.message, "")])
    d.body.append([("advice: ", "label"), (f.action, "advice")])
    if f.saving_ns:
        d.body.append([(f"estimated saving {fmt_ns(f.saving_ns)}{_per(snap)}", "label")])
    for ln in f.lines:
        s = snap.lines_by_source.get(ln)
        d.body.append([("at ", "muted"), (display_path(snap, ln), "path")])
        if s is not None:
            d.children.append((f"line {display_path(snap, ln)}", Node("line", (s.line_id,))))
    for r in f.kernels[:10]:
        if 0 <= r < len(snap.trace.gpu):
            d.children.append((f"{fmt_ns(snap.trace.gpu.dur_ns[r]):>9} {_short(snap.kernel_name(r), 60)}",
                               Node("kernel", (r,))))  # fmt: skip
    return d


_DESCRIBE: dict[str, Callable[..., Detail]] = {
    "summary": _summary,
    "line": _line,
    "op": _op,
    "kname": _kname,
    "kernel": _kernel,
    "gap": _gap,
    "finding": _finding,
    "streamed": _streamed,
}
