"""The analysis's passes in the groups that run at the same time (analyzers.parallel): each group needs only
what the groups before it produced.

    link_calls ─┬─ link_lines                          (lines, modules)
                └─ roofline                            (needs only the calls)
    gaps_and_waits (device-wide ‖ per stream) ‖ side_passes (kernel stats, library lines, queue depth, comm)
    unprofiled replay ‖ launch_timing ‖ window breakdowns
"""

from __future__ import annotations

from dataclasses import replace
from functools import partial
from typing import Any, NamedTuple

import numpy as np

from analyzers import breakdown as bd, communication as cm, gaps as gp, launch_timing as lt
from analyzers.cpu_waits import Waits, main_thread_waits
from analyzers.gap_evidence import GapEvidence
from analyzers.kernel_stats import kernel_stats
from analyzers.lines import line_stats
from analyzers.links import Links, link_calls, link_lines
from analyzers.model import Peaks, Table, Trace, empty_table
from analyzers.parallel import concurrently
from analyzers.peaks import resolve_peaks
from analyzers.results import Breakdown, KernelStat, LineStat
from analyzers.roofline import Roofline, roofline
from analyzers.unprofiled_replay import unprofiled_gaps


def links_and_roofline(
    trace: Trace, peaks_override: str | dict[str, Any] | Peaks | None
) -> tuple[Links, Peaks, Roofline]:
    """The links, and beside the join of their source lines the roofline, which needs only the calls."""
    calls, span_rows = link_calls(trace)
    peaks = peaks_override if isinstance(peaks_override, Peaks) else resolve_peaks(trace, peaks_override)
    links, roof = concurrently(
        partial(link_lines, trace, calls, span_rows),
        lambda: cm.classify(trace, roofline(trace, calls, peaks)),
    )
    return links, peaks, roof


class SidePasses(NamedTuple):
    """The passes that need only the links and the roofline, run beside the gaps."""

    kernels: list[KernelStat]
    library_lines: list[LineStat]
    queue_depth: Table
    comm: cm.Communication | None


def side_passes(trace: Trace, links: Links, roof: Roofline) -> SidePasses:
    return SidePasses(
        kernel_stats(trace, roof),
        library_line_stats(trace, links, roof, bd.steps_analysed(trace)),
        lt.queue_depth(trace, links),
        cm.communication(trace, links, roof.regime),
    )


class IdlePasses(NamedTuple):
    """The GPU's idle gaps and what is worked out from them, with the passes run beside them."""

    busy: np.ndarray
    gaps: Table
    stream_gaps: Table
    waits: Waits
    side: SidePasses
    steps: int
    unprofiled: float | None
    replayed: Table | None
    launch_gaps: np.ndarray | None
    per_launch: float | None
    launch_bound: np.ndarray
    per_window: dict[int, Breakdown]


def idle_passes(trace: Trace, links: Links, roof: Roofline) -> IdlePasses:
    (busy, gaps, stream_gaps, waits), side = concurrently(
        lambda: gaps_and_waits(trace, links, roof), lambda: side_passes(trace, links, roof)
    )
    steps, unprofiled = bd.steps_analysed(trace), bd.unprofiled_step_ns(trace)
    replayed, (launch_gaps, per_launch, launch_bound), per_window = concurrently(
        lambda: unprofiled_gaps(trace, links, gaps, busy, unprofiled, waits),
        lambda: launch_timing(trace, links, busy),
        lambda: bd.window_breakdowns(trace, busy, roof.regime),
    )
    return IdlePasses(
        busy,
        gaps,
        stream_gaps,
        waits,
        side,
        steps,
        unprofiled,
        replayed,
        launch_gaps,
        per_launch,
        launch_bound,
        per_window,
    )


def launch_timing(
    trace: Trace, links: Links, busy: np.ndarray
) -> tuple[np.ndarray | None, float | None, np.ndarray]:
    """The idle gaps between a stream's kernels, their median (what one more launch costs in the window) and
    the launch-bound kernels."""
    gaps = lt.same_stream_gaps(trace, busy)
    return gaps, lt.per_launch_ns(gaps), lt.launch_bound(trace, links, busy)


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


def gaps_and_waits(trace: Trace, links: Links, roof: Roofline) -> tuple[np.ndarray, Table, Table, Waits]:
    """The busy mask, then GPU idle gaps device-wide and per stream, each with its cause and line, and the
    main thread's waits off the CPU they were classified with."""
    busy = gp.busy_mask(trace, roof.host_copy)
    evidence = GapEvidence(trace, links, roof.host_copy)
    waits = main_thread_waits(trace, evidence.sync_union)
    gaps, stream_gaps = concurrently(
        *(
            lambda per_stream=per_stream: gp.classify_gaps(
                trace, links, gp.find_gaps(trace, busy, per_stream), roof.host_copy, evidence, waits
            )
            for per_stream in (False, True)
        )
    )
    return busy, gaps, stream_gaps, waits
