"""Findings about the GPU waiting: on the CPU issuing work (overhead, small kernels), on synchronising calls,
host-to-device copies and the DataLoader (idle/gaps.py decides each idle gap's cause and line), and on collectives.

An idle gap that a CPU-side collective covers (gloo's `gloo:all_reduce`, ...: gap_evidence.collective_marks) is
communication whatever else ran in it: the rank waits for the others and moves the data through the host.
It makes a COMMUNICATION finding (the cure: the straggler, or overlap) and none of the host's (overhead, sync,
host-to-device copies, waits, data).

The overhead and small-kernels cures (CUDA graphs, torch.compile) need static shapes: where the analysed steps
ran ops that size their output from the data (DATA_DEPENDENT_OPS), the findings name them (`DynamicShapes`)
and their advice makes those shapes static first."""

from __future__ import annotations

import numpy as np

from analyzers.arrays import distinct
from analyzers.comm.collectives import collective_kind
from analyzers.findings.context import MIN_SAVING_SHARE, Context, count_lines
from analyzers.findings.facts import (
    CollectiveWaitFacts,
    DynamicShapes,
    GapFacts,
    HostCopies,
    OverheadFacts,
    SmallKernelsFacts,
)
from analyzers.idle.gap_evidence import collective_marks, main_thread
from analyzers.idle.launch_timing import median_launch_interval_ns
from analyzers.link.links import outermost_ops, spans_at
from analyzers.results import GAP_CAUSE_CODES, REGIME_CODES, Finding, FindingKind, GapCause, Regime
from brrrtui.contract.model import NONE, GpuKind, SourceLine

OVERHEAD_SHARE = 0.20  # report overhead when idle-while-issuing is at least this share of the time
SMALL_KERNELS_PER_STEP = 50
# ops whose output's size depends on the values of their input: each waits for the GPU and gives its consumers
# a new shape, so CUDA graphs cannot capture them and torch.compile breaks the graph or recompiles there
DATA_DEPENDENT_OPS = frozenset(
    {
        "aten::nonzero",
        "aten::argwhere",
        "aten::masked_select",
        "aten::_unique2",
        "aten::unique_consecutive",
        "aten::unique_dim",
    }
)


def in_collectives(ctx: Context) -> np.ndarray:
    """Per idle gap: a CPU-side collective covers at least COVER_SHARE of it."""
    g = ctx.gaps
    comm = collective_marks(ctx.trace, ctx.links)
    if not len(g) or not len(comm):
        return np.zeros(len(g), dtype=bool)
    g0 = g.start_ns.astype(np.int64)
    covered: np.ndarray = comm.covering(g0, g0 + g.dur_ns, g.dur_ns.astype(np.float64))
    return covered


def _idle_by_cause(ctx: Context, outside: np.ndarray | None = None) -> dict[GapCause, int]:
    """Idle per cause, of the gaps `outside` marks (all of them by default)."""
    g = ctx.gaps
    if not len(g):
        return {}
    keep = np.ones(len(g), dtype=bool) if outside is None else outside
    return {c: int(g.dur_ns[keep & (g.cause == GAP_CAUSE_CODES[c])].sum()) for c in GapCause}


def _top_lines(ctx: Context, mask: np.ndarray, k: int = 3) -> list[int]:
    g = ctx.gaps
    lines = g.line[mask]
    ok = lines >= 0
    if not ok.any():
        return []
    sums = np.bincount(lines[ok], weights=g.dur_ns[mask][ok])
    return [int(i) for i in np.argsort(-sums)[:k] if sums[i] > 0]


def data_dependent_shapes(ctx: Context, within: SourceLine | None = None) -> DynamicShapes | None:
    """The ops of the analysed steps that size their output from the data (DATA_DEPENDENT_OPS), each named by
    its outermost op (`aten::where` for torch.where(mask), `aten::index` for x[mask]); None when none ran.
    `within`: only those on lines of that line's function (its file and function name)."""
    trace, links = ctx.trace, ctx.links
    ids = [i for i in (trace.sid(name) for name in sorted(DATA_DEPENDENT_OPS)) if i >= 0]
    if not ids or not len(trace.ops):
        return None
    rows = np.flatnonzero(np.isin(trace.ops.name, ids))
    if within is not None and len(rows):
        key = (within.file, within.function)
        lines = trace.lines
        in_function = [
            0 <= ln < len(lines) and (lines[ln].file, lines[ln].function) == key
            for ln in links.op_line[rows].tolist()
        ]
        rows = rows[np.array(in_function, dtype=bool)]
    if not len(rows):
        return None
    top = outermost_ops(links.op_parent, rows.astype(np.int64))
    names, counts = np.unique(trace.ops.name[top], return_counts=True)
    ops = tuple(trace.name(int(n)) for n in names[np.argsort(-counts, kind="stable")])
    return DynamicShapes(len(rows), ops, ctx.source_lines(count_lines(links.op_line[rows])))


def overhead_findings(ctx: Context) -> list[Finding]:
    """The GPU idle while the CPU issues work (plus launch-bound kernels) for OVERHEAD_SHARE of the time."""
    gpu = ctx.trace.gpu
    span = ctx.breakdown.span_ns
    if not span:
        return []
    outside = ~in_collectives(ctx)
    idle = _idle_by_cause(ctx, outside)
    host_idle = idle.get(GapCause.HOST, 0)
    ovh_code = REGIME_CODES[Regime.OVERHEAD]
    ovh_kernel_ns = int(gpu.dur_ns[ctx.roof.regime == ovh_code].sum())
    raw = (host_idle + ovh_kernel_ns) / span
    corrected = ctx.overhead.corrected_overhead_fraction
    share = min(raw, corrected) if corrected is not None else raw
    if share < OVERHEAD_SHARE:
        return []
    kernels = int((gpu.kind == GpuKind.KERNEL).sum())
    per = ctx.per
    mask = outside & (ctx.gaps.cause == GAP_CAUSE_CODES[GapCause.HOST])
    lines = ctx.source_lines(_top_lines(ctx, mask))
    saving = (host_idle + ovh_kernel_ns) / per * ctx.idle_scale
    median_k = float(np.median(gpu.dur_ns[gpu.kind == GpuKind.KERNEL])) if kernels else None
    facts = OverheadFacts(
        ctx.scale,
        raw,
        corrected,
        ctx.overhead.unprofiled_step_ns,
        host_idle,
        kernels,
        median_k,
        ctx.per_launch_ns,
        data_dependent_shapes(ctx),
    )
    return [Finding(FindingKind.OVERHEAD, lines, saving, facts)]


def small_kernel_findings(ctx: Context) -> list[Finding]:
    """Launch-bound kernels that are many per step and a good share of all kernels."""
    gpu = ctx.trace.gpu
    if not ctx.breakdown.span_ns:
        return []
    kernels = int((gpu.kind == GpuKind.KERNEL).sum())
    per = ctx.per
    lb = ctx.launch_bound
    n_lb = int(lb.sum())
    if not (n_lb / per >= SMALL_KERNELS_PER_STEP and n_lb >= 0.3 * max(kernels, 1)):
        return []
    lb_ns = int(gpu.dur_ns[lb].sum())
    lines = ctx.source_lines(count_lines(ctx.links.kernel_line[lb]))
    # what CUDA graphs would remove: the host-wait idle in front of these kernels
    g = ctx.gaps
    ended = (g.next_row >= 0) & (g.cause == GAP_CAUSE_CODES[GapCause.HOST])
    ended[ended] = lb[g.next_row[ended]]
    waited = float(g.dur_ns[ended].sum()) / per
    saving = waited * ctx.idle_scale
    lined = float((ctx.links.kernel_line[lb] >= 0).mean()) if lb.any() else 0.0
    facts = SmallKernelsFacts(
        ctx.scale,
        n_lb,
        kernels,
        lb_ns,
        median_launch_interval_ns(ctx.trace, ctx.links),
        waited,
        lined,
        data_dependent_shapes(ctx),
    )
    rows = tuple(np.nonzero(lb)[0][:64].tolist())
    return [Finding(FindingKind.SMALL_KERNELS, lines, saving, facts, kernels=rows)]


_GAP_KINDS = {
    GapCause.SYNC: FindingKind.SYNC,
    GapCause.H2D: FindingKind.H2D,
    GapCause.WAIT: FindingKind.CPU_WAIT,
    GapCause.DATA: FindingKind.DATA,
}


def gap_findings(ctx: Context) -> list[Finding]:
    """One finding per (cause, line) for SYNC, H2D, WAIT and DATA gaps."""
    out: list[Finding] = []
    g = ctx.gaps
    if not len(g):
        return out
    gpu = ctx.trace.gpu
    outside = ~in_collectives(ctx)
    for cause, kind in _GAP_KINDS.items():
        mask = outside & (g.cause == GAP_CAUSE_CODES[cause])
        if not mask.any():
            continue
        lines = g.line[mask]
        for lid in distinct(lines).tolist():
            sel = mask & (g.line == lid)
            idle = float(g.dur_ns[sel].sum()) / ctx.per
            cap = None
            if cause == GapCause.WAIT:
                # the profiler does not slow a wait, but a wait idles the GPU only where the host has no lead
                # on it: unprofiled steps whose overhead is less than the wait's idle leave it that much at most
                cap = ctx.unprofiled_overhead_ns
                cap = cap if cap is not None and cap < idle else None
                saving = idle if cap is None else cap
            else:
                saving = idle * ctx.idle_scale
            if saving < MIN_SAVING_SHARE * ctx.step_ns:
                continue
            src = ctx.source_lines([lid]) if lid >= 0 else ()
            copies = None
            if cause == GapCause.H2D:
                h2d = ctx.roof.host_copy & np.fromiter(
                    ("HtoD" in ctx.trace.name(i) for i in gpu.name.tolist()), bool, len(gpu)
                )
                if h2d.any():
                    b = float(gpu.bytes[h2d][gpu.bytes[h2d] > 0].sum())
                    secs = float(gpu.dur_ns[h2d].sum()) * 1e-9
                    pageable = any("Pageable" in ctx.trace.name(i) for i in distinct(gpu.name[h2d]).tolist())
                    copies = HostCopies(b, secs, pageable)
            facts = GapFacts(ctx.scale, int(sel.sum()), idle, copies, cap)
            out.append(Finding(kind, src, saving, facts))
    return out


def collective_wait_findings(ctx: Context) -> list[Finding]:
    """GPU idle inside CPU-side collectives (gloo, MPI, UCC), one finding per collective kind: communication,
    never a host sync, even where the collective synchronised with the GPU to copy its tensors out. Its size:
    the idle the collectives cover, of the gaps they cover at least COVER_SHARE of (those make no host
    finding)."""
    g = ctx.gaps
    inside = in_collectives(ctx)
    if not inside.any():
        return []
    comm = collective_marks(ctx.trace, ctx.links)
    g0 = g.start_ns[inside].astype(np.int64)
    g1 = g0 + g.dur_ns[inside]
    at = np.maximum(
        np.searchsorted(comm.start, g1, "left") - 1, 0
    )  # the last collective begun before its end
    op_names = [ctx.trace.name(int(n)) for n in comm.name[at].tolist()]
    lines = comm.line[at]
    lines = np.where(lines >= 0, lines, _main_thread_lines(ctx, g.window[inside], (g0 + g1) // 2))
    kinds = np.array([collective_kind(n) for n in op_names], dtype=object)
    dur = comm.union.covered(g0, g1).astype(np.float64)  # the part of each gap the collectives cover
    out: list[Finding] = []
    for kind in dict.fromkeys(kinds.tolist()):
        sel = kinds == kind
        idle = float(dur[sel].sum()) / ctx.per
        if idle < MIN_SAVING_SHARE * ctx.step_ns:
            continue
        src = ctx.source_lines(count_lines(lines[sel]))
        shown = sorted({n for n, s in zip(op_names, sel.tolist(), strict=True) if s})
        facts = CollectiveWaitFacts(ctx.scale, idle, tuple(shown))
        out.append(Finding(FindingKind.COMMUNICATION, src, idle, facts))
    return out


def _main_thread_lines(ctx: Context, window: np.ndarray, t: np.ndarray) -> np.ndarray:
    """The line of the main thread's innermost span at each time `t` (NONE outside any): where the training
    loop waited while a collective ran on a thread of its own (gloo's worker, which has no line)."""
    tid = main_thread(ctx.trace)
    if tid is None or not len(ctx.trace.spans):
        return np.full(len(t), NONE, dtype=np.int64)
    at = spans_at(ctx.trace, window, t, np.full(len(t), tid), np.int64)
    return np.where(at >= 0, ctx.trace.spans.line[np.maximum(at, 0)], NONE).astype(np.int64)
