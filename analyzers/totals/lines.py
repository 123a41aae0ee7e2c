"""Per source line: what its kernels cost on the GPU, how long the CPU spent in it, and the idle it caused.

A line's kernels are those launched from it (links.kernel_line: backward kernels take their forward op's
line). Its verdict is the regime holding most of its time, counting the GPU idle time attributed to it
(idle/gaps.py) as overhead, but the idle inside a CPU-side collective (COMMUNICATION gaps) as communication::

    line 41  x = self.fc(x)        gpu: compute 3.1 ms, memory 0.2 ms   idle 0.1 ms  -> compute
    line 44  loss.item()           gpu: -                               idle 2.0 ms  -> overhead
    line 50  loss.backward()       gpu: compute 29 ms   idle 34 ms inside gloo:all_reduce   -> communication

Time in torch calls (`cpu_ns`) is the union of the line's spans per thread, so a span nested in another span
of the same line (recursion, a foreign trace's nested frames of one function) is counted once. The line
sampler (`sampled_ns`) sees all of the main thread's time on the line, also where no torch call runs: a
`time.sleep`, a Python loop, a data transform. The line's CPU-side time (`host_ns`) is the larger of the two::

    line                   cpu_ns (spans)   sampled_ns (samples x interval)   host_ns
    loss = lin(x).sum()         3.8 ms           1.1 ms                        3.8 ms
    time.sleep(0.02)            0                18.6 ms                       18.6 ms

The sampler reads the main thread's frame under the GIL, so while the main thread holds it the samples come
late and fewer; the spans are exact but cover torch calls only. The larger is the better estimate of each.

A run without a GPU (no GPU activity and no GPU device recorded) has no GPU idle to attribute: every line's
idle is 0 and the lines are ordered by their CPU-side time (their `regime` then means nothing; presenters show
none).
"""

from __future__ import annotations

import numpy as np

from analyzers.arrays import lexsort, window_groups
from analyzers.results import GAP_CAUSE_CODES, REGIME_CODES, GapCause, LineStat, Regime
from brrrtui.contract.model import Table, Trace

_REGIMES = (Regime.COMPUTE, Regime.MEMORY, Regime.OVERHEAD, Regime.COMMUNICATION)


def _union_ns_by_line(spans: Table, n_lines: int) -> np.ndarray:
    """Sum over lines of the length of the union of each line's spans (per thread), window group by window
    group (spans of two profiling sessions do not overlap)."""
    out = np.zeros(n_lines, dtype=np.int64)
    for rows in window_groups((spans.window,)):
        _add_union_ns(spans.line[rows], spans.tid[rows], spans.start_ns[rows], spans.dur_ns[rows], out)
    return out


def _add_union_ns(
    line: np.ndarray, tid: np.ndarray, start: np.ndarray, dur: np.ndarray, out: np.ndarray
) -> None:
    """out[line] += the length of the union of the line's spans (per thread) among these."""
    n_lines = len(out)
    ok = (line >= 0) & (line < n_lines)
    if not ok.any():
        return
    line, tid = line[ok].astype(np.int64), tid[ok]
    s = start[ok]
    e = s + dur[ok]
    order = lexsort((s, tid, line))
    line, tid, s, e = line[order], tid[order], s[order], e[order]
    group = np.concatenate(([True], (line[1:] != line[:-1]) | (tid[1:] != tid[:-1])))
    gid = np.cumsum(group) - 1
    # running max of ends within a group: offset each group's ends so maximum.accumulate cannot cross groups
    first = np.nonzero(group)[0]
    base = np.repeat(s[first], np.diff(np.concatenate((first, [len(s)]))))
    rel_s, rel_e = s - base, e - base
    big = int(rel_e.max()) + 1
    if big * (int(gid[-1]) + 1) < 2**62:
        run = np.maximum.accumulate(rel_e + gid * big) - gid * big
    else:  # offsets would overflow: one group at a time
        run = np.concatenate([np.maximum.accumulate(rel_e[gid == g]) for g in range(int(gid[-1]) + 1)])
    prev_run = np.concatenate(([0], run[:-1]))
    prev_run[group] = rel_s[group]  # a group's first span starts fresh
    contrib = np.clip(rel_e - np.maximum(rel_s, prev_run), 0, None)
    np.add.at(out, line, contrib)


def _idle_ns_by_line(gaps: Table, n_lines: int) -> np.ndarray:
    """GPU idle time attributed to each line (gaps with no line or an unknown one are left out)."""
    idle = np.zeros(n_lines, dtype=np.int64)
    if len(gaps):
        gl = gaps.line
        g_ok = (gl >= 0) & (gl < n_lines)
        np.add.at(idle, gl[g_ok], gaps.dur_ns[g_ok])
    return idle


def _unprofiled_idle(
    idle_profiled: np.ndarray, idle_scale: float | None, unprofiled_gaps: Table | None, n_lines: int
) -> np.ndarray:
    """Per line, the idle an unprofiled step keeps: replayed gap by gap, else the window's scaled."""
    if unprofiled_gaps is not None:
        return _idle_ns_by_line(unprofiled_gaps, n_lines)
    if idle_scale is None:
        return idle_profiled
    scaled: np.ndarray = np.rint(idle_profiled * idle_scale).astype(np.int64)
    return scaled


def _sampled_ns_by_line(trace: Trace, n_lines: int) -> np.ndarray:
    """Main-thread time on each line, from the line sampler: samples x the median interval between them
    (also the lines that call no torch: `time.sleep`, a Python loop, a data transform)."""
    samples = trace.line_samples
    out = np.zeros(n_lines, dtype=np.int64)
    if len(samples) < 2:
        return out
    order = lexsort((samples.t_ns, samples.window))
    t, w = samples.t_ns[order], samples.window[order]
    steps = np.diff(t)[np.diff(w) == 0]
    period = int(np.median(steps)) if len(steps) else 0
    ok = (samples.line >= 0) & (samples.line < n_lines)
    np.add.at(out, samples.line[ok], period)
    return out


def _host_ns_by_line(cpu: np.ndarray, sampled: np.ndarray) -> np.ndarray:
    """Per line, its CPU-side time: the sampled time on it, or its time in torch calls where that is more."""
    host: np.ndarray = np.maximum(cpu, sampled)
    return host


def gpu_run(trace: Trace) -> bool:
    """The run had a GPU: GPU activity in these windows, or a GPU device recorded (a set-up window of a GPU run
    may hold no kernel, yet its GPU idles and that idle is charged to the lines that kept it waiting)."""
    return trace.has_gpu or trace.device.name is not None


def _weighted(values: np.ndarray, weight: np.ndarray | None) -> np.ndarray:
    """values x weight; `values` itself for weight None (every weight 1: the same products)."""
    return values if weight is None else values * weight


def _known_sums(
    line: np.ndarray, values: np.ndarray, weight: np.ndarray | None, n_lines: int
) -> tuple[np.ndarray, np.ndarray]:
    """Per line: the weighted sum of the known (finite) values, and how many were known."""
    known = np.isfinite(values)
    total = np.bincount(line, weights=_weighted(np.where(known, values, 0.0), weight), minlength=n_lines)
    return total, np.bincount(line, weights=known.astype(float), minlength=n_lines)


def _ns_by_regime(
    line: np.ndarray, dur: np.ndarray, regime: np.ndarray, weight: np.ndarray | None, n_lines: int
) -> np.ndarray:
    """[regime code, line] -> summed GPU ns (each kernel's share of it on that line)."""
    codes = len(REGIME_CODES)
    ok = (regime >= 0) & (regime < codes)  # every kernel has one; a row without is left out
    if not ok.all():
        line, dur, regime = line[ok], dur[ok], regime[ok]
        weight = None if weight is None else weight[ok]
    key = regime.astype(np.int64) * n_lines + line  # one bincount: each cell sums its rows in order
    sums = np.bincount(key, weights=_weighted(dur, weight), minlength=codes * n_lines)
    out: np.ndarray = np.rint(sums).astype(np.int64).reshape(codes, n_lines)
    return out


def _counted(
    kernel_line: np.ndarray,
    n_lines: int,
    rows: np.ndarray | None,
    shares: tuple[np.ndarray, np.ndarray, np.ndarray] | None,
) -> tuple[np.ndarray | slice, np.ndarray, np.ndarray | None]:
    """(gpu rows, line, weight) of the kernels line_stats counts: each on its line with weight 1 (None), or as
    `shares` splits them; only `rows` when given; only lines the trace has. The rows are a slice of every row
    when that is what is counted (every kernel on a line: the columns are taken as they are, not copied)."""
    if shares is None:
        if rows is None:
            ok = (kernel_line >= 0) & (kernel_line < n_lines)
            every = slice(None)
            return (every, kernel_line, None) if ok.all() else (np.flatnonzero(ok), kernel_line[ok], None)
        kl = kernel_line[rows]
        ok = (kl >= 0) & (kl < n_lines)
        return rows[ok], kl[ok], None
    sel, kl, weight = shares
    if rows is not None:
        keep = np.isin(sel, rows)
        sel, kl, weight = sel[keep], kl[keep], weight[keep]
    ok = (kl >= 0) & (kl < n_lines)
    return sel[ok], kl[ok], weight[ok]


def line_stats(
    trace: Trace,
    kernel_line: np.ndarray,
    regime: np.ndarray,
    flops: np.ndarray,
    nbytes: np.ndarray,
    gaps: Table,
    steps: int,
    rows: np.ndarray | None = None,
    idle_scale: float | None = None,
    shares: tuple[np.ndarray, np.ndarray, np.ndarray] | None = None,
    unprofiled_gaps: Table | None = None,
) -> list[LineStat]:
    """One LineStat per line with any kernel, CPU span, line sample or idle time, by GPU + idle time
    descending (in a run without a GPU: by CPU-side time, and no idle).
    `idle_scale` (see `unprofiled_idle_scale`) turns the idle measured inside windows into the unprofiled
    estimate the verdicts use, unless `unprofiled_gaps` (unprofiled_replay.unprofiled_gaps: the same gaps with
    the idle a replay of the window at unprofiled speed leaves) give it gap by gap; the measured figure stays
    in `idle_profiled_ns`. `shares`: (gpu row, line, weight) triples (analyzers.link.compiled.kernel_line_shares)
    when a kernel counts on several lines; `rows` limits the kernels counted."""
    n_lines = len(trace.lines)
    if n_lines == 0:
        return []
    sel, kl, weight = _counted(kernel_line, n_lines, rows, shares)
    dur = trace.gpu.dur_ns[sel].astype(np.float64)
    by_regime = _ns_by_regime(kl, dur, regime[sel], weight, n_lines)
    kernels = np.rint(np.bincount(kl, weights=weight, minlength=n_lines)).astype(np.int64)
    f_sum, f_cnt = _known_sums(kl, flops[sel], weight, n_lines)
    b_sum, b_cnt = _known_sums(kl, nbytes[sel], weight, n_lines)
    sampled = _sampled_ns_by_line(trace, n_lines)
    with_gpu = gpu_run(trace)
    idle_profiled, idle = _line_idle(gaps, idle_scale, unprofiled_gaps, n_lines, with_gpu)
    comm_idle = _communication_idle(gaps, idle_profiled, idle, n_lines) if with_gpu else None
    cpu = _union_ns_by_line(trace.spans, n_lines)
    host = _host_ns_by_line(cpu, sampled)
    gpu_ns = by_regime.sum(axis=0)
    present = (kernels > 0) | (gpu_ns > 0) | (cpu > 0) | (idle_profiled > 0) | (sampled > 0)
    stats: list[LineStat] = []
    for i in np.nonzero(present)[0].tolist():
        per = {r: int(by_regime[REGIME_CODES[r], i]) for r in _REGIMES}
        stats.append(
            LineStat(
                line=trace.lines[i],
                line_id=i,
                gpu_ns=int(gpu_ns[i]),
                gpu_ns_by_regime=per,
                cpu_ns=int(cpu[i]),
                idle_ns=int(idle[i]),
                idle_profiled_ns=int(idle_profiled[i]),
                sampled_ns=int(sampled[i]),
                flops=float(f_sum[i]) if f_cnt[i] else None,
                bytes=float(b_sum[i]) if b_cnt[i] else None,
                kernels=int(kernels[i]),
                regime=_dominant(per, int(idle[i]), int(comm_idle[i]) if comm_idle is not None else 0),
                per_step_gpu_ns=float(gpu_ns[i]) / steps if steps > 0 else None,
                host_ns=int(host[i]),
                per_step_host_ns=float(host[i]) / steps if steps > 0 else None,
            )
        )
    stats.sort(key=_gpu_order if with_gpu else _host_order)
    return stats


def _line_idle(
    gaps: Table, idle_scale: float | None, unprofiled_gaps: Table | None, n_lines: int, with_gpu: bool
) -> tuple[np.ndarray, np.ndarray]:
    """Per line, the GPU idle measured inside the windows and the unprofiled estimate (line_stats); none in a
    run without a GPU (no GPU idle for a line to cause)."""
    if not with_gpu:
        none = np.zeros(n_lines, dtype=np.int64)
        return none, none
    idle_profiled = _idle_ns_by_line(gaps, n_lines)
    return idle_profiled, _unprofiled_idle(idle_profiled, idle_scale, unprofiled_gaps, n_lines)


def _communication_idle(
    gaps: Table, idle_profiled: np.ndarray, idle: np.ndarray, n_lines: int
) -> np.ndarray | None:
    """Per line, the part of its `idle` spent inside CPU-side collectives (COMMUNICATION gaps): the share of
    its measured idle those gaps hold, of the unprofiled figure; None when no gap is one."""
    comm = gaps.cause == GAP_CAUSE_CODES[GapCause.COMMUNICATION] if len(gaps) else None
    if comm is None or not comm.any():
        return None
    measured = _idle_ns_by_line(gaps.take(np.flatnonzero(comm)), n_lines)
    share = np.divide(measured, idle_profiled, out=np.zeros(n_lines), where=idle_profiled > 0)
    part: np.ndarray = np.rint(idle * share).astype(np.int64)
    return part


def _dominant(per: dict[Regime, int], idle: int, comm_idle: int = 0) -> Regime:
    """The regime holding most of a line's time, its idle counted as overhead, but the idle inside collectives
    (`comm_idle`, part of `idle`) as communication (overhead when it has none)."""
    weights = [
        per[Regime.COMPUTE],
        per[Regime.MEMORY],
        per[Regime.OVERHEAD] + idle - comm_idle,
        per[Regime.COMMUNICATION] + comm_idle,
    ]
    return _REGIMES[int(np.argmax(weights))] if any(weights) else Regime.OVERHEAD


def _gpu_order(s: LineStat) -> tuple[int, int, int]:
    return -(s.gpu_ns + s.idle_ns), -s.cpu_ns, s.line_id


def _host_order(s: LineStat) -> tuple[int, int]:
    return -s.host_ns, s.line_id


def by_host_time(stats: list[LineStat]) -> list[LineStat]:
    """The lines with CPU-side time, most first: what a run without GPU activity lists (report and view)."""
    return sorted((s for s in stats if s.host_ns > 0), key=_host_order)


def unprofiled_idle_scale(
    idle_ns: int, busy_ns: int, steps: int, unprofiled_step_ns: float | None
) -> float | None:
    """How much of the GPU idle measured inside windows an unprofiled step keeps.

    The profiler slows the CPU (every op is recorded, every torch call tagged), so a window's steps show more
    GPU idle than the same steps without it; the GPU work itself is not slowed. Per step, unprofiled idle is
    the unprofiled step time (the recorder times every step) less the GPU busy time the window measured::

        profiled step    |busy|idle.......|busy|idle....|      idle_ns / steps
        unprofiled step  |busy|idle|busy|i|                    unprofiled_step - busy_ns / steps

    Each line keeps its share of the idle, scaled by the ratio (at most 1). None without steps or an
    unprofiled step time to compare with.
    """
    if steps <= 0 or not unprofiled_step_ns or idle_ns <= 0:
        return None
    unprofiled_idle = max(0.0, unprofiled_step_ns - busy_ns / steps) * steps
    return min(1.0, unprofiled_idle / idle_ns)
