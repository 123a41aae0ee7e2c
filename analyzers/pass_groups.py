"""The analysis's passes in the groups that run at the same time (brrrtui.runtime.parallel): each group needs only
what the groups before it produced.

    link_calls (the op nesting ‖ each op's span)
      -> link_lines -> gaps_and_waits ‖ roofline (needs only the calls)
      -> unprofiled replay ‖ launch_timing ‖ window breakdowns ‖ side_passes (kernel stats, library lines,
         collectives) ‖ fusable pairs
      -> (analyze) fusion ‖ per-line figures ‖ module tree
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any, NamedTuple

import numpy as np

from analyzers.comm import collectives as cm
from analyzers.cost.peaks import fixed_fields, resolve_peaks
from analyzers.cost.roofline import Roofline, host_copies, reached_roofline
from analyzers.fusion.chains import FusablePairs, fusable_pairs
from analyzers.idle import gaps as gp, launch_timing as lt
from analyzers.idle.cpu_waits import Waits, main_thread_waits
from analyzers.idle.gap_evidence import GapEvidence
from analyzers.idle.unprofiled_replay import unprofiled_gaps
from analyzers.link.links import Links, link_calls, link_lines
from analyzers.results import Breakdown, KernelStat, LineStat
from analyzers.totals import breakdown as bd
from analyzers.totals.kernel_stats import kernel_stats
from analyzers.totals.lines import line_stats
from brrrtui.contract.model import Peaks, Table, Trace, empty_table
from brrrtui.runtime.parallel import concurrently


class GapsAndWaits(NamedTuple):
    busy: np.ndarray  # per GPU row: counts as GPU work (host copies do not)
    gaps: Table  # device-wide idle gaps, with cause and line
    waits: Waits  # the main thread's waits off the CPU


def links_roofline_gaps(
    trace: Trace, peaks_override: str | dict[str, Any] | Peaks | None
) -> tuple[Links, Peaks, Roofline, GapsAndWaits]:
    """The links; then the roofline (it needs only the calls) beside the lines' join and the gaps (they need
    only the lines and which rows are host copies). The peaks are resolved, then each FLOP roof the override
    does not set is raised to the rate a matmul or convolution of `trace` reached (cost/roofline.py:
    reached_roofline): the Peaks returned are the ones the roofline was judged against. A complete Peaks is
    used as is."""
    calls, span_rows = link_calls(trace)
    peaks = peaks_override if isinstance(peaks_override, Peaks) else resolve_peaks(trace, peaks_override)
    fixed = fixed_fields(peaks_override)
    host_copy = host_copies(trace)

    def lines_then_gaps() -> tuple[Links, GapsAndWaits]:
        links = link_lines(trace, calls, span_rows)
        return links, gaps_and_waits(trace, links, host_copy)

    def roof_and_peaks() -> tuple[Roofline, Peaks]:
        roof, reached = reached_roofline(trace, calls, peaks, fixed)
        return cm.classify(trace, roof), reached

    (links, gaps), (roof, peaks) = concurrently(lines_then_gaps, roof_and_peaks)
    return links, peaks, roof, gaps


class SidePasses(NamedTuple):
    """The passes that need only the links and the roofline, run beside the gaps."""

    kernels: list[KernelStat]
    library_lines: list[LineStat]
    comm: cm.Communication | None


def side_passes(trace: Trace, links: Links, roof: Roofline, steps: int) -> SidePasses:
    return SidePasses(
        kernel_stats(trace, roof),
        library_line_stats(trace, links, roof, steps),
        cm.communication(trace, links, roof.regime),
    )


class IdlePasses(NamedTuple):
    """What is worked out from the GPU's idle gaps, with the passes run beside them."""

    side: SidePasses
    fusable: FusablePairs | None  # fusion's pairs: all of it that needs no launch cost
    steps: int
    unprofiled: float | None
    replayed: Table | None
    launch_gaps: np.ndarray | None
    per_launch: float | None
    launch_bound: np.ndarray
    per_window: dict[int, Breakdown]


def idle_passes(trace: Trace, links: Links, roof: Roofline, g: GapsAndWaits) -> IdlePasses:
    steps, unprofiled = bd.steps_analysed(trace), bd.unprofiled_step_ns(trace)
    replayed, (launch_gaps, per_launch, launch_bound), per_window, side, fusable = concurrently(
        lambda: unprofiled_gaps(trace, links, g.gaps, g.busy, unprofiled, g.waits),
        lambda: launch_timing(trace, links, g.busy),
        lambda: bd.window_breakdowns(trace, g.busy, roof.regime, g.gaps),
        lambda: side_passes(trace, links, roof, steps),
        lambda: fusable_pairs(trace, links, roof),
    )
    return IdlePasses(
        side, fusable, steps, unprofiled, replayed, launch_gaps, per_launch, launch_bound, per_window
    )


def launch_timing(
    trace: Trace, links: Links, busy: np.ndarray
) -> tuple[np.ndarray | None, float | None, np.ndarray]:
    """The idle gaps between a stream's kernels, their median (what one more launch costs in the window) and
    the launch-bound kernels."""
    ordered = lt.stream_order(trace, busy)
    gaps = lt.same_stream_gaps(trace, busy, ordered)
    return gaps, lt.per_launch_ns(gaps), lt.launch_bound(trace, links, busy, ordered)


def library_line_stats(trace: Trace, links: Links, roof: Roofline, steps: int) -> list[LineStat]:
    """GPU time per model-library line (`transformers/activations.py:66`): what the module tree's library lines
    hold, for the source view's gutter on a library file. Idle and CPU time stay with the user's lines."""
    libs = links.kernel_lib_line
    if not (libs >= 0).any():
        return []
    no_gaps = empty_table(gp.GAP_SCHEMA)
    stats = line_stats(trace, libs, roof.regime, roof.flops, roof.bytes, no_gaps, steps)
    held = set(np.unique(libs[libs >= 0]).tolist())
    return [replace(s, cpu_ns=0, sampled_ns=0) for s in stats if s.line_id in held]


def gaps_and_waits(trace: Trace, links: Links, host_copy: np.ndarray) -> GapsAndWaits:
    """The busy mask, then the GPU's idle gaps (every stream idle), each with its cause and line, and the
    main thread's waits off the CPU they were classified with."""
    busy = gp.busy_mask(trace, host_copy)
    evidence = GapEvidence(trace, links, host_copy)
    waits = main_thread_waits(trace, evidence.sync_union)
    gaps = gp.classify_gaps(trace, links, gp.find_gaps(trace, busy), host_copy, evidence, waits)
    return GapsAndWaits(busy, gaps, waits)
