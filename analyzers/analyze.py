"""`analyze(trace) -> Analysis`: every pass, in order, over the chosen capture windows.

    links (kernel -> launch -> op -> line)
      -> peaks (override > measured > datasheet; a FLOP roof the override does not set raised to the rate a
         matmul or convolution of the analysed windows reached)
      -> roofline (FLOPs, bytes, regime per GPU row; collectives: communication, no roofline)
      -> gaps (the GPU idle, with cause and line) + launch-bound kernels
      -> breakdown (compute / memory / communication / overhead per window) + profiler correction
      -> per-kernel-name, per-line and per-module statistics
      -> fusion chains -> findings

Independent passes run at the same time on threads (analyzers.pass_groups says which).
Pure: no UI, no torch. A million kernels take seconds (see benchmarks/bench_analyze.py).
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import replace
from typing import Any

import numpy as np

from analyzers.arrays import window_rows
from analyzers.comm import collectives as cm
from analyzers.cost.peaks import parse_override
from analyzers.cost.roofline import Roofline
from analyzers.findings.compile import graph_break_findings
from analyzers.findings.context import Context
from analyzers.findings.finders import all_findings
from analyzers.findings.places import place_findings
from analyzers.fusion.chains import FusionChain, fusion_chains
from analyzers.idle import launch_timing as lt
from analyzers.link.compiled import kernel_line_shares
from analyzers.link.links import Links
from analyzers.link.unplaced import unplaced_note
from analyzers.pass_groups import idle_passes, links_roofline_gaps
from analyzers.phases.run_phases import SETTLE_STEPS, Phase, TracePhases, trace_phases
from analyzers.phases.slow_steps import SlowSteps, slow_steps, slow_steps_finding
from analyzers.phases.window_edges import id_ranges, tail_notes, trim_close_stalls
from analyzers.results import (
    Analysis,
    Breakdown,
    Finding,
    LineStat,
    OverheadCorrection,
)
from analyzers.totals import breakdown as bd
from analyzers.totals.lines import gpu_run, line_stats, unprofiled_idle_scale
from analyzers.totals.modules import KernelColumns, ModuleTree, module_tree
from brrrtui.contract.model import Peaks, Table, Trace, WindowMode
from brrrtui.runtime.allocator import tune_for_analysis
from brrrtui.runtime.parallel import concurrently

NO_GPU_NOTE = (
    "no GPU activity in this recording: no GPU verdicts or advice; each line shows its CPU-side time (the main "
    "thread's sampled time on it, a sleep or a Python loop included, or its time in torch calls where that is "
    "more)"
)


def select_windows(trace: Trace, windows: Iterable[int]) -> Trace:
    """The same trace restricted to some capture windows (steps and telemetry of the whole run are kept).
    A table whose rows come window by window (as recordings store them) is cut into views of its columns,
    without copying them, when the chosen windows' rows are one stretch."""
    keep = np.asarray(sorted(set(int(w) for w in windows)), dtype=np.int64)

    def cut(table: Table) -> Table:
        rows = window_rows(table.window, keep)
        if isinstance(rows, slice):
            return Table({k: v[rows] for k, v in table.columns.items()})
        return table.take(rows)

    return replace(
        trace,
        gpu=cut(trace.gpu),
        runtime=cut(trace.runtime),
        ops=cut(trace.ops),
        spans=cut(trace.spans),
        windows=cut(trace.windows),
        line_samples=cut(trace.line_samples),
        _ids=None,
    )


def phases_of(trace: Trace) -> TracePhases:
    w = trace.windows
    return trace_phases(trace.steps.t_ns, w.window, w.start_ns, w.end_ns, w.first_step)


def analyze(
    trace: Trace,
    peaks_override: str | dict[str, Any] | Peaks | None = None,
    windows: Iterable[int] | None = None,
    phase: Phase | None = None,
) -> Analysis:
    """Analyse `trace`: the windows of the phase it leads with (the steady state when the run reached one),
    or only `windows`, or only the windows of `phase`. `peaks_override`: "flops=800e12,bw=4.2e12", a dict
    with those keys, or a complete Peaks used as is (no roof raised: analyzers.pass_groups.links_roofline_gaps)."""
    tune_for_analysis()
    phases = phases_of(trace)
    lead, chosen = choose_windows(phases, windows, phase)
    steps = slow_steps(trace, phases.run) if lead is phases.lead()[0] else None
    run_found = _run_findings(trace, steps)
    trace, trim_notes = trim_close_stalls(select_windows(trace, chosen))
    # the passes in one concurrently(...) need only what came before it (brrrtui.runtime.parallel)
    links, peaks, roof, gw = links_roofline_gaps(trace, peaks_override)
    g = idle_passes(trace, links, roof, gw)
    unprofiled, replayed = g.unprofiled, g.replayed
    if steps is not None and steps.host_ahead:
        # the host runs ahead of a GPU-bound loop (phases/slow_steps.py): the median step only queued its work,
        # and the replay, fitted to it, starts each window's GPU with an empty queue where the loop's carries
        # the host's lead; the real step is the mean, and its idle is that step less the GPU's work
        unprofiled, replayed = steps.real_step_ns, None
    total = bd.total(g.per_window)
    overhead = bd.overhead_correction(total, bd.profiled_step_ns(trace), unprofiled, g.steps, _idle(replayed))
    idle_scale = _idle_scale(total, g.steps, overhead)
    chains, lines, modules = concurrently(
        lambda: fusion_chains(
            trace, links, roof, peaks, lt.unprofiled_launch_ns(g.launch_gaps, idle_scale), g.fusable
        ),
        lambda: _line_stats(trace, links, roof, gw.gaps, g.steps, idle_scale, replayed),
        lambda: _module_tree(trace, links, roof, gw.gaps, g.steps, idle_scale, replayed),
    )
    ctx = Context(trace, links, roof, peaks, gw.gaps, total, overhead, g.steps, g.per_launch, g.launch_bound)
    return Analysis(
        trace=trace,
        links=links,
        peaks=peaks,
        kernel_regime=roof.regime,
        kernel_flops=roof.flops,
        kernel_bytes=roof.bytes,
        gaps=gw.gaps,
        kernels=g.side.kernels,
        lines=lines,
        library_lines=g.side.library_lines,
        modules=modules,
        findings=_findings(ctx, chains, modules, g.side.comm, run_found) + graph_break_findings(trace),
        breakdown=total,
        window_breakdowns=g.per_window,
        overhead=overhead,
        steps_analysed=g.steps,
        notes=[
            *_phase_notes(phases, lead, trace.windows),
            *_notes(trace, links, peaks),
            *trim_notes,
            *(tail_notes(trace, gw.gaps) if gpu_run(trace) else []),  # GPU idle at a window's end
        ],
        **_kernel_details(roof, g.launch_bound),
        per_launch_ns=g.per_launch,
        windows=tuple(int(w) for w in trace.windows.window.tolist()),
        phase=lead,
        phases=phases,
        communication=g.side.comm,
        slow_steps=steps,
    )


def _run_findings(trace: Trace, steps: SlowSteps | None) -> list[Finding]:
    """The whole run's own findings (its slow steps, from every step): `steps` is None outside the analysis
    of the phase the run leads with, so the set-up and warm-up analyses shown apart do not repeat them."""
    slow = slow_steps_finding(steps, trace.stream_total > 0)
    return [slow] if slow else []


def _findings(
    ctx: Context,
    chains: list[FusionChain],
    modules: ModuleTree | None,
    comm: cm.Communication | None,
    run: list[Finding],
) -> list[Finding]:
    """The GPU findings and the `run`'s own (its slow steps), by saving, placed in the module tree (none
    without GPU activity)."""
    if not ctx.trace.has_gpu:
        return []
    found = all_findings(ctx, chains) + cm.communication_findings(ctx, comm) + run
    found.sort(key=lambda f: -(f.saving_ns or 0.0))
    return place_findings(ctx.trace, ctx.links, modules, found)


def _line_stats(
    trace: Trace,
    links: Links,
    roof: Roofline,
    gaps: Table,
    steps: int,
    scale: float | None,
    replayed: Table | None,
) -> list[LineStat]:
    shares = None  # no compiled kernel: each kernel on its own line, weight 1 (line_stats needs no copies)
    if links.compiled is not None:
        shares = kernel_line_shares(
            trace, links.kernel_op, links.kernel_line, links.op_compiled, links.compiled
        )
    k = links.kernel_line
    return line_stats(
        trace, k, roof.regime, roof.flops, roof.bytes, gaps, steps, None, scale, shares, replayed
    )


def _module_tree(
    trace: Trace,
    links: Links,
    roof: Roofline,
    gaps: Table,
    steps: int,
    idle_scale: float | None,
    replayed: Table | None,
) -> ModuleTree | None:
    """None when no kernel ran inside an nn.Module (foreign traces, compiled graphs, CPU-only runs). Idle as
    the replay leaves it (`replayed`), else the window's scaled by `idle_scale`."""
    if not (links.kernel_module >= 0).any():
        return None
    columns = KernelColumns(
        links.kernel_module,
        links.kernel_lib_line,
        links.kernel_line,
        roof.regime,
        roof.flops,
        roof.bytes,
        trace.gpu.dur_ns,
    )
    if replayed is not None:
        return module_tree(columns, replayed, trace.name, trace.lines, steps, None)
    return module_tree(columns, gaps, trace.name, trace.lines, steps, idle_scale)


def _kernel_details(roof: Roofline, launch_bound: np.ndarray) -> dict[str, np.ndarray]:
    """The per-GPU-row columns the details pane shows."""
    return {
        "kernel_tensor_cores": roof.tensor_cores,
        "kernel_unit_peak_flops_per_s": roof.unit_peak_flops_per_s,
        "kernel_fits_in_l2": roof.fits_in_l2,
        "kernel_launch_bound": launch_bound,
    }


def _idle(replayed: Table | None) -> float | None:
    return float(replayed.dur_ns.sum()) if replayed is not None else None


def _idle_scale(total: Breakdown, steps: int, overhead: OverheadCorrection) -> float | None:
    busy = total.busy_ns
    return unprofiled_idle_scale(total.idle_ns or 0, busy, steps, overhead.unprofiled_step_ns)


def choose_windows(
    phases: TracePhases, windows: Iterable[int] | None, phase: Phase | None
) -> tuple[Phase, list[int]]:
    """The windows `analyze()` takes, and their phase: `windows` as given (their phase if they share one), else
    those of `phase`, else those of the phase the run leads with."""
    if windows is not None:
        chosen = list(windows)
        found = {phases.windows.get(w, Phase.UNKNOWN) for w in chosen}
        return (found.pop() if len(found) == 1 else Phase.UNKNOWN), chosen
    if phase is not None:
        return phase, phases.windows_in(phase)
    return phases.lead()


def _phase_notes(phases: TracePhases, lead: Phase, windows: Table) -> list[str]:
    """Say which phase the figures come from when it is not the steady state of a training run, which steps
    the analysed `windows` cover, and which of them caught only the end of a step."""
    run = phases.run
    if run.steps == 0:
        return []
    partial = _partial_steps(windows, phases)
    if lead is Phase.STEADY:
        assert run.steady_from_step is not None
        others = ", ".join(
            f"{len(phases.windows_in(p))} {p.value}" for p in (Phase.SETUP, Phase.WARMUP) if phases.windows_in(p)
        )
        aside = f"; {others} window(s) reported apart" if others else ""
        return [f"steady state from step {run.steady_from_step} of {run.steps}{aside}", *partial]
    if run.steps < SETTLE_STEPS + 2:
        why = f"{run.steps} step(s) are too few to tell warm-up from the steady state"
    elif not run.reached:
        why = f"no steady state in {run.steps} steps (the step times never settled)"
    else:
        why = f"no window was recorded in it (steady from step {run.steady_from_step} of {run.steps})"
    covered = _steps_text(windows)
    source = f"{covered} of the {lead.label} phase" if covered else f"the {lead.label} phase"
    merged = f", {len(windows)} windows merged" if len(windows) > 1 else ""
    first_calls = (
        " (first calls, allocator growth and library set-up may be in them)" if lead is Phase.WARMUP else ""
    )
    return [f"no steady-state window: {why}; these figures come from {source}{merged}{first_calls}", *partial]


def _window_steps(windows: Table) -> list[int]:
    """The optimizer steps the windows hold, in order."""
    steps: set[int] = set()
    for a, b in zip(windows.first_step.tolist(), windows.last_step.tolist(), strict=True):
        if a >= 0:
            steps.update(range(a, max(a, b) + 1))
    return sorted(steps)


def _steps_text(windows: Table) -> str:
    """`step 0`, `steps 2–5`, `steps 10, 15 and 20`: the steps the windows hold ('' for none)."""
    steps = _window_steps(windows)
    if not steps:
        return ""
    parts = id_ranges(steps)
    words = parts[0] if len(parts) == 1 else ", ".join(parts[:-1]) + " and " + parts[-1]
    return f"step {words}" if len(steps) == 1 else f"steps {words}"


def _partial_steps(windows: Table, phases: TracePhases) -> list[str]:
    """A time window that a step ended in opened partway through that step: what the step ran before it
    opened (its first lines) is not in the window."""
    out = []
    for w, mode, first in zip(
        windows.window.tolist(), windows.mode.tolist(), windows.first_step.tolist(), strict=True
    ):
        if mode == WindowMode.TIME and first >= 0 and phases.windows.get(w) is not Phase.SETUP:
            out.append(
                f"window {w} opened partway through step {first} (a time window, not on a step's end): the lines "
                f"that step ran before it opened are not in these figures"
            )
    return out


def _notes(trace: Trace, links: Links, peaks: Peaks) -> list[str]:
    if not trace.has_gpu:
        return [NO_GPU_NOTE]
    notes: list[str] = []
    if peaks.source == "unknown":
        notes.append(
            f"no peaks for device {trace.device.name or '(unknown)'}: regimes come from kernel names; "
            "give --peaks flops=...,bw=..."
        )
    unplaced = unplaced_note(trace, links)  # every kernel on a line, or counted here with why
    if unplaced:
        notes.append(unplaced)
    return notes


def _phases_apart(phases: TracePhases, lead: Phase) -> list[Phase]:
    """The set-up and warm-up phases a report shows apart from the phase it leads with, where they have windows."""
    return [p for p in (Phase.SETUP, Phase.WARMUP) if p is not lead and phases.windows_in(p)]


def analyze_with_other_phases(
    trace: Trace, peaks_override: str | dict[str, Any] | None = None
) -> tuple[Analysis, dict[Phase, Analysis]]:
    """analyze(trace, peaks_override), and the set-up and warm-up windows a report shows apart from the phase
    it leads with, each analysed on its own beside the lead (their passes fill the cores where the lead's run
    one at a time): the same resolved ceilings, each raised only by the rates its own windows' kernels reached,
    so that the lead is analyze(trace, peaks_override) whatever else the run holds."""
    if peaks_override is not None:
        parse_override(peaks_override)  # a bad override fails before any pass runs
    phases = phases_of(trace)
    apart = _phases_apart(phases, phases.lead()[0])
    lead, *others = concurrently(
        lambda: analyze(trace, peaks_override),
        *(lambda p=p: analyze(trace, peaks_override, phase=p) for p in apart),
    )
    return lead, dict(zip(apart, others, strict=True))
