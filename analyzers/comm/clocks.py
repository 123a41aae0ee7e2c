"""Clock offsets between ranks from the collectives they share.

Ranks on one host read one clock; ranks on different hosts do not (NTP keeps them within milliseconds at
best), so their timelines can only be laid side by side after an offset is taken off. A collective ends at
the same moment on every rank it joins (an all-reduce completes once the last rank's data is in; an NCCL
kernel then ends within microseconds on every GPU), so the same collective's end on two ranks, read on
their two clocks, differs by the clocks' offset. Windows cover the same steps on every rank
(brrrtui.capture.lockstep), hence the same collectives in the same order: the i-th collective of a name in a
window on one rank is the i-th on the other. The offset is the median difference over every such pair
(robust to the odd late end); `spread_ns` (median absolute deviation) says how well the pairs agree.
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass

import numpy as np

from analyzers.comm.ranks import is_comm_kernel, is_comm_op
from brrrtui.contract.model import GpuKind, Trace, WindowMode

Group = tuple[tuple[int, int], str]  # ((first step, last step) of a window, collective name)


@dataclass(frozen=True)
class ClockOffset:
    rank: int
    offset_ns: float  # this rank's clock minus the reference rank's: subtract it to align
    matched: int  # collective ends paired with the reference rank
    spread_ns: float  # median absolute deviation of the paired differences


def collective_ends(trace: Trace) -> dict[Group, np.ndarray]:
    """End times of every collective in the step windows, by window span and name, in start order."""
    w = trace.windows
    keep = (w.mode == int(WindowMode.STEPS)) & (w.first_step >= 0)
    span_of = dict(
        zip(
            w.window[keep].tolist(),
            zip(w.first_step[keep].tolist(), w.last_step[keep].tolist(), strict=True),
            strict=True,
        )
    )
    found: dict[Group, list[tuple[int, int]]] = defaultdict(list)
    for table, test, kinds in (
        (trace.ops, is_comm_op, None),
        (trace.gpu, is_comm_kernel, int(GpuKind.KERNEL)),
    ):
        flags = trace.string_flags(test)
        sel = table.name >= 0
        if kinds is not None:
            sel &= table.kind == kinds
        sel[sel] = flags[table.name[sel]]
        for win, name, start, dur in zip(
            table.window[sel].tolist(),
            table.name[sel].tolist(),
            table.start_ns[sel].tolist(),
            table.dur_ns[sel].tolist(),
            strict=True,
        ):
            if win in span_of:
                found[(span_of[win], trace.strings[name])].append((start, start + dur))
    return {k: np.array([end for _, end in sorted(v)], dtype=np.int64) for k, v in found.items()}


def clock_offsets(traces: dict[int, Trace], reference: int | None = None) -> dict[int, ClockOffset]:
    """Every rank's clock against the reference rank's (the lowest rank by default). A rank that shares no
    collective with the reference is left out."""
    if not traces:
        return {}
    ref = min(traces) if reference is None else reference
    ref_ends = collective_ends(traces[ref])
    out = {ref: ClockOffset(ref, 0.0, sum(len(v) for v in ref_ends.values()), 0.0)}
    for rank, trace in traces.items():
        if rank == ref:
            continue
        diffs = [
            ends - ref_ends[group]
            for group, ends in collective_ends(trace).items()
            if group in ref_ends and len(ref_ends[group]) == len(ends)
        ]
        d = np.concatenate(diffs) if diffs else np.empty(0)
        if len(d):
            median = float(np.median(d))
            out[rank] = ClockOffset(rank, median, len(d), float(np.median(np.abs(d - median))))
    return out
