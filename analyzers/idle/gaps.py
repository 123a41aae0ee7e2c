"""GPU idle gaps, why the GPU was idle, and which source line kept it waiting.

A gap is time inside a capture window when no GPU work runs: device-wide (no kernel, memset or device copy on
any stream: what the breakdown counts as idle). Host<->device copies do not make the GPU busy:
they move data over PCIe, not HBM, and the time they take is the overhead the user can remove (pinned memory,
non_blocking). Each gap gets one cause (GapCause), checked in this order:

COMMUNICATION: a CPU-side collective (gloo's `gloo:all_reduce`, MPI's, UCC's: gap_evidence.collective_marks)
covers at least half of the gap, whatever else ran in it: the rank waits for the other ranks and moves the data
through the host, and the device-to-host copy and stream synchronize gloo runs for a CUDA tensor are the
collective's own, not a host sync. Charged to the collective's line, else to the line the main thread was in at
the gap's middle (gloo's worker thread has no line; the training loop waits inside `loss.backward()`)::

    CPU   backward ........................................................| opt.step | launch
    CPU'      [gloo:all_reduce: DtoH, synchronize, wait for the ranks .....]
    GPU   [k1]                                                                               [k2]
              <------------------------- gap: COMMUNICATION, the backward's line ----------->

DATA: a DataLoader `__next__` covers at least half of the gap::

    CPU   ...| enumerate(DataLoader)#_SingleProcessDataLoaderIter.__next__ |  launch
    GPU   [k1]                                                                  [k2]
               <------------------------- gap: DATA --------------------------->

H2D: host-to-device copies (the GPU row, or the CPU's memcpy call) cover at least half of the gap::

    CPU      x.to("cuda") | cudaMemcpyAsync ........ |  launch
    GPU   [k1]   [Memcpy HtoD (Pageable -> Device)...]       [k2]
             <------------------ gap: H2D ------------------->

WAIT: the main thread waited off the CPU outside torch for at least half of the gap (cpu_waits: a
`time.sleep`, I/O, a lock, a queue), charged to the line it waited on::

    CPU   launch k1 | time.sleep(0.02) (off the CPU) ........... | launch k2
    GPU      [k1]                                                      [k2]
                <------------------ gap: WAIT, the sleep's line ------->

SYNC: a synchronising call (cudaStreamSynchronize, cudaDeviceSynchronize, cudaEventSynchronize, blocking
cudaMemcpy, aten::item / _local_scalar_dense / nonzero ...) returns inside the gap: the CPU sat waiting for
the GPU to drain, so nothing was queued behind the last kernel, and the GPU idles until the CPU refills it::

    CPU   loss.item() | cudaStreamSynchronize ..... | python ... | launch
    GPU   [k1 ..................]                                     [k2]
                                 <---------- gap: SYNC ------------->   attributed to the .item() line

HOST: the launch of the kernel that ends the gap started after the GPU went idle (HTA's "host wait": the CPU,
in Python, dispatch or launch calls, was not issuing work fast enough)::

    CPU   launch k1 | python, dispatch ........... | launch k2
    GPU       [k1]                                        [k2]
                  <-------------- gap: HOST ------------->      attributed to k2's line

One-time warm-up outside a collective is OTHER and charged to no line: a gap in which CUDA loads a kernel module
for a first call (Kineto's `Lazy Function Loading` marker) is a set-up cost of the run's first steps, not the
line's per-step cost, and it would otherwise make every line of a warm-up window look overhead-bound (unless the
main thread waited off the CPU for half the gap or more: then the wait, a per-step cost, is its cause)::

    CPU   x * 1.5 (first call: 13 ms) ...................| Lazy Function Loading | launch
    GPU   [k1]                                                                         [k2]
              <---------------------- gap: OTHER, no line ------------------------->

OTHER: none of the above: the next kernel was already queued when the GPU went idle (cross-stream waits,
launch latency: HTA's "kernel wait"), or the CPU recorded nothing at all (profiler, GC, outside any op).

Leading and trailing gaps (window start to the first kernel, last kernel to window end) have no next launch:
HOST when CPU operators and runtime calls cover half of them, else OTHER (DATA and H2D apply as above; SYNC
only when synchronising calls cover half of such a gap).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from analyzers import arrays
from analyzers.arrays import distinct, lexsort, window_groups
from analyzers.idle.cpu_waits import Waits
from analyzers.idle.gap_evidence import COVER_SHARE, GapEvidence, in_collectives
from analyzers.link.links import Links, spans_at
from analyzers.link.sampled_lines import by_time, lines_sampled_in
from analyzers.results import GAP_CAUSE_CODES, GapCause
from brrrtui.contract.model import NONE, Table, Trace

SYNC_TOLERANCE_NS = 1_000  # CPU and GPU timestamps are aligned to ~1 us

GAP_SCHEMA = {
    "window": np.int32,
    "stream": np.int32,
    "start_ns": np.int64,
    "dur_ns": np.int64,
    "cause": np.int8,
    "line": np.int32,
    "next_row": np.int32,
}
"""stream: NONE (a device-wide gap belongs to no one stream); line: line id or NONE; next_row: the gpu row
whose start ends the gap (int32 like links.Links: a recording's line ids are int32, and a table past 2**31
rows does not fit in memory)."""


def busy_mask(trace: Trace, host_copy: np.ndarray) -> np.ndarray:
    """GPU rows that keep the GPU busy: kernels, memsets and device-side copies (not host<->device copies)."""
    return ~host_copy


def _window_bounds(trace: Trace) -> dict[int, tuple[int, int]]:
    w = trace.windows
    return {
        int(i): (int(s), int(e))
        for i, s, e in zip(w.window.tolist(), w.start_ns.tolist(), w.end_ns.tolist(), strict=True)
    }


def find_gaps(trace: Trace, busy: np.ndarray) -> Table:
    """The device-wide idle intervals of the busy rows inside each window (every stream idle), with the
    leading (window start -> first row) and trailing (last row end -> window end) idle time, so gaps + busy
    time tile the window exactly. `stream` is NONE: no one stream owns such a gap. Window group by window
    group (arrays.window_groups): a window's gaps need only its own rows."""
    gpu = trace.gpu
    bounds = _window_bounds(trace)
    out: dict[str, list[np.ndarray]] = {k: [] for k in ("window", "stream", "start_ns", "dur_ns", "next_row")}
    windows_seen: set[int] = set()
    for (group,) in window_groups((gpu.window,)):
        rows = np.nonzero(busy[group])[0] + group.start
        windows_seen |= set(distinct(gpu.window[rows]).tolist())
        _add_window_gaps(gpu, rows, bounds, out)
    for win, (lo, hi) in bounds.items():  # windows with no GPU work at all are one idle gap
        if win not in windows_seen and hi > lo:
            whole = {"window": win, "stream": NONE, "start_ns": lo, "dur_ns": hi - lo, "next_row": NONE}
            for k, v in whole.items():
                out[k].append(np.array([v]))
    cols = {
        k: (np.concatenate(v) if v else np.empty(0)).astype(GAP_SCHEMA[k], copy=False) for k, v in out.items()
    }
    n = len(cols["window"])
    cols["cause"] = np.full(n, GAP_CAUSE_CODES[GapCause.OTHER], np.int8)
    cols["line"] = np.full(n, NONE, GAP_SCHEMA["line"])
    return Table({k: cols[k] for k in GAP_SCHEMA})


def _add_window_gaps(
    gpu: Table, rows: np.ndarray, bounds: dict[int, tuple[int, int]], out: dict[str, list[np.ndarray]]
) -> None:
    """Append to `out` the gaps of the windows of busy `rows`: sorted by (window, start), one window at a time."""
    group_key = gpu.window[rows].astype(np.int64)
    order = lexsort((gpu.start_ns[rows], group_key))
    rows, group_key = rows[order], group_key[order]
    cuts = np.nonzero(np.diff(group_key))[0] + 1
    for seg in np.split(np.arange(len(rows)), cuts) if len(rows) else []:
        r = rows[seg]
        win = int(gpu.window[r[0]])
        lo, hi = bounds.get(win, (int(gpu.start_ns[r].min()), int((gpu.start_ns[r] + gpu.dur_ns[r]).max())))
        start = np.clip(gpu.start_ns[r], lo, hi)
        end = np.clip(gpu.start_ns[r] + gpu.dur_ns[r], lo, hi)
        run_end = np.maximum.accumulate(end)
        g0 = np.concatenate(([lo], run_end[:-1], [run_end[-1]]))
        g1 = np.concatenate(([start[0]], start[1:], [hi]))
        nxt = np.concatenate(([r[0]], r[1:], [NONE]))
        keep = g1 > g0
        out["window"].append(np.full(int(keep.sum()), win, np.int32))
        out["stream"].append(np.full(int(keep.sum()), NONE, np.int32))
        out["start_ns"].append(g0[keep])
        out["dur_ns"].append((g1 - g0)[keep])
        out["next_row"].append(nxt[keep])


@dataclass
class _Verdicts:
    """The cause and line of each gap as the rules decide them; `decided` gaps are left to no later rule."""

    cause: np.ndarray
    line: np.ndarray
    decided: np.ndarray
    warmup: np.ndarray  # first-call module loading: OTHER, charged to no line

    def mark(self, hit: np.ndarray, cause: GapCause, line: np.ndarray) -> None:
        self.cause[hit] = GAP_CAUSE_CODES[cause]
        self.line[hit] = line
        self.decided |= hit


def _ending_launch(trace: Trace, links: Links, nxt: np.ndarray) -> np.ndarray:
    """The launch (runtime row) of the row that ends each gap (`nxt`: their next_row); NONE for a window's
    trailing gap."""
    if not len(trace.gpu):
        return np.full(len(nxt), NONE)
    launch: np.ndarray = np.where(nxt >= 0, links.kernel_launch[np.maximum(nxt, 0)], NONE)
    return launch


def _warmup(ev: GapEvidence, g0: np.ndarray, g1: np.ndarray) -> np.ndarray:
    """Gaps holding first-call module loading: warm-up, charged to no line."""
    if not len(ev.lazy_start):
        return np.zeros(len(g0), dtype=bool)
    inside: np.ndarray = np.searchsorted(ev.lazy_start, g1, "left") > np.searchsorted(
        ev.lazy_start, g0, "left"
    )
    return inside


def _mark_communication(
    ev: GapEvidence, at_end: _SpansAtEnd, g0: np.ndarray, g1: np.ndarray, window: np.ndarray, v: _Verdicts
) -> None:
    """COMMUNICATION: CPU-side collectives cover at least COVER_SHARE of the gap (warm-up inside one too)."""
    if not len(ev.comm):
        return
    hit = in_collectives(ev.comm.union, g0, g1)
    if not hit.any():
        return
    line = ev.comm.line_at(g0[hit], g1[hit])
    missing = line < 0
    if missing.any():
        mid = (g0[hit][missing] + g1[hit][missing]) // 2
        found = at_end.lines(mid, window[hit][missing])
        if found is not None:
            line[missing] = found
    v.warmup &= ~hit
    v.mark(hit, GapCause.COMMUNICATION, line)


def _mark_sync(
    ev: GapEvidence, g0: np.ndarray, g1: np.ndarray, dur: np.ndarray, has_launch: np.ndarray, v: _Verdicts
) -> None:
    """SYNC: a synchronising call returns inside the gap."""
    if not len(ev.sync_end):
        return
    i = np.searchsorted(ev.sync_end, g0 - SYNC_TOLERANCE_NS, "left")
    ok = i < len(ev.sync_end)
    ic = np.minimum(i, len(ev.sync_end) - 1)
    returns = ok & (ev.sync_end[ic] <= g1) & (ev.sync_start[ic] < g1)
    # with no launch ending the gap, a sync only explains it if syncs fill most of it (a trailing gap
    # after a synchronize is usually the profiler stopping, not the CPU refilling the GPU)
    hit = ~v.decided & returns
    filled = hit & ~has_launch  # only these need the syncs' cover
    filled[filled] = ev.sync_union.covered(g0[filled], g1[filled]) >= COVER_SHARE * dur[filled]
    hit &= has_launch | filled
    # several syncs can return in one gap (.item() inside cudaStreamSynchronize): prefer a known line
    v.mark(hit, GapCause.SYNC, _first_known_line(ev.sync_end, ev.sync_line, ic, g1, hit)[hit])


def _mark_host(
    trace: Trace,
    links: Links,
    launch: np.ndarray,
    g0: np.ndarray,
    dur: np.ndarray,
    cpu_cover: np.ndarray,
    v: _Verdicts,
) -> None:
    """HOST / OTHER from the launch of the kernel that ends the gap; the undecided gaps take its line.
    `cpu_cover`: how much of each gap no launch ends the CPU's calls cover, in order."""
    rt = trace.runtime
    has_launch = launch >= 0
    launch_start = np.where(has_launch, rt.start_ns[np.maximum(launch, 0)] if len(rt) else 0, 0)
    late = has_launch & (launch_start >= g0 - SYNC_TOLERANCE_NS)
    busy_cpu = ~has_launch  # gaps no launch ends (a window's trailing one): was the CPU busy through them?
    busy_cpu[busy_cpu] = cpu_cover >= COVER_SHARE * dur[busy_cpu]
    host = ~v.decided & (late | busy_cpu)
    v.cause[host] = GAP_CAUSE_CODES[GapCause.HOST]
    rest = ~v.decided
    if len(rt):
        v.line[rest] = np.where(has_launch[rest], links.launch_line[np.maximum(launch[rest], 0)], NONE)


class _SpansAtEnd:
    """The main thread's innermost span at given times of given windows (links.spans_at)."""

    def __init__(self, trace: Trace, main_tid: int | None):
        self.trace, self.main_tid = trace, main_tid

    def lines(self, t: np.ndarray, window: np.ndarray) -> np.ndarray | None:
        """The line of the main thread's innermost span at each time `t` in its `window` (NONE outside any);
        None when there is no span or no main thread."""
        sp = self.trace.spans
        if not len(sp) or self.main_tid is None:
            return None
        at = spans_at(self.trace, window, t, np.full(len(t), self.main_tid), np.int64)
        return np.where(at >= 0, sp.line[np.maximum(at, 0)], NONE)


def _span_lines_at_end(
    at_end: _SpansAtEnd, g0: np.ndarray, g1: np.ndarray, window: np.ndarray, v: _Verdicts
) -> None:
    """Gaps still without a line take the span the main thread was in when the gap ended. Not SYNC gaps, whose
    cause is the synchronising call (one outside any traced line, like torch.cuda.synchronize(), stays
    unattributed rather than landing on whatever line launched next), nor COMMUNICATION gaps (their line is
    the collective's, found where they were marked), nor warm-up."""
    own = np.isin(v.cause, [GAP_CAUSE_CODES[GapCause.SYNC], GAP_CAUSE_CODES[GapCause.COMMUNICATION]])
    missing = np.nonzero((v.line < 0) & ~own & ~v.warmup)[0]
    if len(missing):
        found = at_end.lines(np.maximum(g1[missing] - 1, g0[missing]), window[missing])
        if found is not None:
            v.line[missing] = found


def classify_gaps(
    trace: Trace,
    links: Links,
    gaps: Table,
    host_copy: np.ndarray,
    evidence: GapEvidence | None = None,
    waits: Waits | None = None,
) -> Table:
    """Fill `cause` and `line` of `gaps` (see the module docstring for the rules); `waits`: the main thread's
    waits off the CPU (cpu_waits.main_thread_waits), none when not given.

    Every rule looks at one gap and the evidence, so the gaps are taken GROUP_ROWS at a time: the rules'
    temporaries are a chunk's, not a column of every gap each (a million gaps held ~50 MB of them)."""
    n = len(gaps)
    if not n:
        return gaps
    ev = evidence or GapEvidence(trace, links, host_copy)
    launch = _ending_launch(trace, links, gaps.next_row)
    unlaunched = np.flatnonzero(launch < 0)
    u0 = gaps.start_ns[unlaunched].astype(np.int64)
    once = _Once(
        ev,
        waits,
        _SpansAtEnd(trace, ev.main_tid),
        by_time(trace.line_samples),
        launch,
        unlaunched,
        ev.cpu_covered(u0, u0 + gaps.dur_ns[unlaunched]),  # one pass over the CPU's calls, not one a chunk
    )
    cause = np.empty(n, np.int8)
    line = np.empty(n, GAP_SCHEMA["line"])
    for lo in range(0, n, arrays.GROUP_ROWS):
        rows = slice(lo, min(n, lo + arrays.GROUP_ROWS))
        cause[rows], line[rows] = _classify(trace, links, gaps, rows, once)
    cols = dict(gaps.columns)
    cols["cause"], cols["line"] = cause, line
    return Table(cols)


@dataclass
class _Once:
    """What every chunk of gaps reads, worked out once for all of them."""

    ev: GapEvidence
    waits: Waits | None
    at_end: _SpansAtEnd
    samples: tuple[np.ndarray, np.ndarray]  # the line samples by time (sampled_lines.by_time)
    launch: np.ndarray  # per gap, the launch (runtime row) of the row that ends it; NONE for none
    unlaunched: np.ndarray  # the gaps no launch ends, in order ...
    cpu_cover: np.ndarray  # ... and how much of each the CPU's operators and runtime calls cover


def _classify(
    trace: Trace, links: Links, gaps: Table, rows: slice, once: _Once
) -> tuple[np.ndarray, np.ndarray]:
    """The cause and line of the gaps `rows`, by the rules in the module docstring, in their order."""
    ev, waits = once.ev, once.waits
    g0 = gaps.start_ns[rows].astype(np.int64)
    g1 = g0 + gaps.dur_ns[rows]
    dur = gaps.dur_ns[rows].astype(np.float64)
    launch = once.launch[rows]
    warmup = _warmup(ev, g0, g1)
    if waits is not None and len(waits) and warmup.any():  # a sleep beside the module loading: it waited
        warmup &= waits.waited(g0, g1) < COVER_SHARE * dur
    n = len(g0)
    other = np.full(n, GAP_CAUSE_CODES[GapCause.OTHER], np.int8)
    v = _Verdicts(
        cause=other, line=np.full(n, NONE, GAP_SCHEMA["line"]), decided=warmup.copy(), warmup=warmup
    )

    _mark_communication(ev, once.at_end, g0, g1, gaps.window[rows], v)
    for marks, c in ((ev.data, GapCause.DATA), (ev.h2d, GapCause.H2D)):
        if len(marks):
            hit = ~v.decided & marks.covering(g0, g1, dur)
            v.mark(hit, c, marks.line_at(g0[hit], g1[hit]))
    if waits is not None and len(waits):
        hit = ~v.decided & (waits.waited(g0, g1) >= COVER_SHARE * dur)
        # the line waited on at the gap's middle; the one sampled most inside it, where samples fall, below
        v.mark(hit, GapCause.WAIT, waits.line_at((g0[hit] + g1[hit]) // 2))
    _mark_sync(ev, g0, g1, dur, launch >= 0, v)
    cover = once.cpu_cover[slice(*np.searchsorted(once.unlaunched, [rows.start, rows.stop]).tolist())]
    _mark_host(trace, links, launch, g0, dur, cover, v)
    _span_lines_at_end(once.at_end, g0, g1, gaps.window[rows], v)

    # HOST, WAIT and OTHER gaps: where brrrtui sampled the main thread, the line it was executing most inside
    # the gap is the line that kept the GPU waiting (a `time.sleep` or a Python loop between torch calls).
    hostish = np.isin(v.cause, [GAP_CAUSE_CODES[c] for c in (GapCause.HOST, GapCause.WAIT, GapCause.OTHER)])
    sampled = lines_sampled_in(*once.samples, g0, g1, hostish & ~warmup)
    return v.cause, np.where(sampled >= 0, sampled, v.line).astype(GAP_SCHEMA["line"])


def _first_known_line(
    ends: np.ndarray, lines: np.ndarray, first: np.ndarray, g1: np.ndarray, hit: np.ndarray
) -> np.ndarray:
    """Line of the first sync returning in the gap; if unknown, of a later one returning in the same gap."""
    out = np.where(hit, lines[first], NONE)
    for step in range(1, 4):
        need = hit & (out < 0)
        if not need.any():
            break
        j = np.minimum(first + step, len(ends) - 1)
        ok = need & (first + step < len(ends)) & (ends[j] <= g1)
        out[ok] = lines[j[ok]]
    return out
