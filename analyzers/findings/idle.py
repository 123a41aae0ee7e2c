"""Findings about the GPU waiting: on the CPU issuing work (overhead, small kernels), on synchronising calls,
host-to-device copies and the DataLoader (idle/gaps.py decides each idle gap's cause and line), and on collectives.

An idle gap that a CPU-side collective covers (gloo's `gloo:all_reduce`, ...: gap_evidence.collective_marks) is
communication whatever else ran in it: the rank waits for the others and moves the data through the host.
It makes a COMMUNICATION finding (the cure: the straggler, or overlap) and none of the host's (overhead, sync,
host-to-device copies, waits, data)."""

from __future__ import annotations

import numpy as np

from analyzers.arrays import distinct
from analyzers.comm.collectives import collective_kind
from analyzers.findings.context import MIN_SAVING_SHARE, Context, count_lines, where
from analyzers.idle.gap_evidence import collective_marks, main_thread
from analyzers.idle.launch_timing import median_launch_interval_ns
from analyzers.link.links import spans_at
from analyzers.results import GAP_CAUSE_CODES, REGIME_CODES, Finding, FindingKind, GapCause, Regime
from brrrtui.contract.model import NONE, GpuKind, SourceLine
from brrrtui.contract.units import fmt_bw, fmt_bytes, fmt_ns, fmt_pct

OVERHEAD_SHARE = 0.20  # report overhead when idle-while-issuing is at least this share of the time
SMALL_KERNELS_PER_STEP = 50


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
    corr = (
        f" (corrected for the profiler with unprofiled steps of {fmt_ns(ctx.overhead.unprofiled_step_ns)}:"
        f" {fmt_pct(corrected)})"
        if corrected is not None
        else ""
    )
    msg = (
        f"the GPU waits on the CPU {fmt_pct(raw)} of the profiled time{corr}: {fmt_ns(host_idle / per)} idle"
        f" per {ctx.unit}{ctx.unprofiled(host_idle / per)} while Python, dispatch and launches issue"
        f" {kernels / per:.0f} kernels"
        f" (median {fmt_ns(median_k)}, {fmt_ns(ctx.per_launch_ns)} between kernels); most idle after"
        f" {where(lines)}"
    )
    action = (
        'capture the step with CUDA graphs (torch.compile(mode="reduce-overhead") or torch.cuda.graphs), '
        "torch.compile to cut Python and launches, or a bigger batch to give each launch more work"
    )
    return [Finding(FindingKind.OVERHEAD, lines, saving, msg, action)]


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
    msg = (
        f"{n_lb / per:.0f} kernels per {ctx.unit} ({fmt_pct(n_lb / max(kernels, 1))} of all) finish before"
        f" the CPU launches the next: {fmt_ns(lb_ns / n_lb)} each on the GPU while the CPU issues one every"
        f" {fmt_ns(median_launch_interval_ns(ctx.trace, ctx.links))}; the GPU waits {fmt_ns(waited)}"
        f" per {ctx.unit}{ctx.unprofiled(waited)} in front of them; {_from_where(ctx, lb, lines)}"
    )
    action = (
        "batch the work into fewer, larger ops (vectorise loops over tensors), or remove launches with CUDA"
        ' graphs / torch.compile(mode="reduce-overhead")'
    )
    rows = tuple(np.nonzero(lb)[0][:64].tolist())
    return [Finding(FindingKind.SMALL_KERNELS, lines, saving, msg, action, kernels=rows)]


def _from_where(ctx: Context, marked: np.ndarray, lines: tuple[SourceLine, ...]) -> str:
    """Where most of the kernels `marked` come from, or how many have no line when most have none."""
    lined = float((ctx.links.kernel_line[marked] >= 0).mean()) if marked.any() else 0.0
    if lined >= 0.5 or not lines:
        return f"most from {where(lines)}"
    return f"{fmt_pct(1 - lined)} of them from no known line, the others from {where(lines)}"


_GAP_TEXT = {
    GapCause.SYNC: (
        FindingKind.SYNC,
        "{where} synchronises with the GPU {n} per {unit} (.item(), .cpu(), .tolist(), print(tensor) or an"
        " explicit synchronize): the queue drains and the GPU idles {idle} per {unit} ({share} of it) until the"
        " CPU refills it",
        "keep the value on the GPU (accumulate losses in a tensor and call .item() every N steps), move"
        " .cpu()/.tolist()/print out of the loop, and drop torch.cuda.synchronize() outside timing code",
    ),
    GapCause.H2D: (
        FindingKind.H2D,
        "host-to-device copies from {where} leave the GPU idle {idle} per {unit} ({share}){detail}",
        "DataLoader(pin_memory=True) and tensor.to(device, non_blocking=True), or keep the data on the GPU",
    ),
    GapCause.WAIT: (
        FindingKind.CPU_WAIT,
        "the training thread waits off the CPU on {where} (a sleep, I/O, a lock or a queue: not Python, which"
        " runs on it) while the GPU idles {idle} per {unit} ({share}); the profiler does not slow a wait, so"
        " unprofiled steps lose the same",
        "take the wait out of the training loop or off its thread: prefetch data in DataLoader workers, write"
        " logs and checkpoints from a background thread, drop time.sleep; or give the GPU work to overlap it",
    ),
    GapCause.DATA: (
        FindingKind.DATA,
        "the GPU idles {idle} per {unit} ({share}) while the DataLoader produces the next batch on {where}",
        "DataLoader(num_workers=N, pin_memory=True, persistent_workers=True) so batches are ready before"
        " they are needed",
    ),
}


def gap_findings(ctx: Context) -> list[Finding]:
    """One finding per (cause, line) for SYNC, H2D, WAIT and DATA gaps."""
    out: list[Finding] = []
    g = ctx.gaps
    if not len(g):
        return out
    gpu = ctx.trace.gpu
    outside = ~in_collectives(ctx)
    for cause, (kind, template, action) in _GAP_TEXT.items():
        mask = outside & (g.cause == GAP_CAUSE_CODES[cause])
        if not mask.any():
            continue
        lines = g.line[mask]
        scale = 1.0 if cause == GapCause.WAIT else ctx.idle_scale  # the profiler does not slow a wait
        for lid in distinct(lines).tolist():
            sel = mask & (g.line == lid)
            idle = float(g.dur_ns[sel].sum()) / ctx.per
            if idle * scale < MIN_SAVING_SHARE * ctx.step_ns:
                continue
            src = ctx.source_lines([lid]) if lid >= 0 else ()
            detail = ""
            if cause == GapCause.H2D:
                h2d = ctx.roof.host_copy & np.fromiter(
                    ("HtoD" in ctx.trace.name(i) for i in gpu.name.tolist()), bool, len(gpu)
                )
                if h2d.any():
                    b = float(gpu.bytes[h2d][gpu.bytes[h2d] > 0].sum())
                    secs = float(gpu.dur_ns[h2d].sum()) * 1e-9
                    pageable = any("Pageable" in ctx.trace.name(i) for i in distinct(gpu.name[h2d]).tolist())
                    detail = (
                        f": {fmt_bytes(b / ctx.per)} per {ctx.unit} at {fmt_bw(b / secs if secs else None)}"
                        f"{' from pageable memory' if pageable else ''}"
                    )
            msg = template.format(
                where=where(src),
                n=_times(int(sel.sum()) / ctx.per),
                unit=ctx.unit,
                idle=fmt_ns(idle),
                share=fmt_pct(idle / ctx.step_ns if ctx.step_ns else None),
                detail=detail,
            ) + ("" if cause == GapCause.WAIT else ctx.unprofiled(idle))
            out.append(Finding(kind, src, idle * scale, msg, action))
    return out


COLLECTIVE_WAIT_ACTION = (
    "the cure is the straggler, not this rank's host code: make the slowest rank faster (`brrrtui report` on"
    " the run sets the ranks side by side and names the straggler and its line), or overlap the collective"
    " with work: DDP(model, bucket_cap_mb=...) starts reducing during the backward, and the NCCL backend"
    " keeps CUDA tensors on the GPU where gloo copies every bucket through host memory"
)


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
        share = fmt_pct(idle / ctx.step_ns if ctx.step_ns else None)
        msg = (
            f"the GPU idles {fmt_ns(idle)} per {ctx.unit} ({share}) while this rank is inside {', '.join(shown)}"
            f"{f' from {where(src)}' if src else ''}: time in the collective (waiting for the other ranks and"
            " moving the data through the host, its device-to-host copies included), not a host sync"
        )
        out.append(Finding(FindingKind.COMMUNICATION, src, idle, msg, COLLECTIVE_WAIT_ACTION))
    return out


def _main_thread_lines(ctx: Context, window: np.ndarray, t: np.ndarray) -> np.ndarray:
    """The line of the main thread's innermost span at each time `t` (NONE outside any): where the training
    loop waited while a collective ran on a thread of its own (gloo's worker, which has no line)."""
    tid = main_thread(ctx.trace)
    if tid is None or not len(ctx.trace.spans):
        return np.full(len(t), NONE, dtype=np.int64)
    at = spans_at(ctx.trace, window, t, np.full(len(t), tid), np.int64)
    return np.where(at >= 0, ctx.trace.spans.line[np.maximum(at, 0)], NONE).astype(np.int64)


def _times(x: float) -> str:
    return "once" if x == 1 else f"{x:.3g}×"
