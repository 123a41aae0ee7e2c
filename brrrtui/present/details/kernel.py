"""A kernel: every call of one name (`kname`), and one call (`kernel`) with the idle gaps beside it."""

from __future__ import annotations

import math

import numpy as np

from analyzers.cost.rates import Rates
from analyzers.cost.roofline import CAPPED_REASONS, ceilings
from analyzers.results import REGIMES_BY_CODE, KernelStat, Regime
from brrrtui.contract.units import NA, fmt_bw, fmt_bytes, fmt_flop_count, fmt_flops, fmt_ns, fmt_pct
from brrrtui.present.details.common import Detail, cause_of, display_path, rate, rel_start, short
from brrrtui.present.details.line import op_kernel_rows
from brrrtui.present.finding_words import message
from brrrtui.present.paths import Phrase
from brrrtui.present.selection import Kind
from brrrtui.present.snapshot import Snapshot
from brrrtui.present.verdicts import finite, kernel_verdict

L2_NOTE = "working set fits in L2: bytes overstate DRAM traffic"
# why a roof fraction reads 100 %: the rate it was worked out from is above the roof (analyzers.cost.roofline)
CAPPED_NOTES = {
    "l2_resident": "roof capped at 100 %: the working set fits in L2 and moved faster than DRAM allows (no L2 roof known, or above it)",
    "over_peak": "roof capped at 100 %: a rate above the roof (the calibrated peak is below what the GPU reached)",
}


def capped_rates(snap: Snapshot, rows: np.ndarray) -> tuple[Rates, list[str]] | None:
    """The roofline's rates of gpu `rows` (the fraction capped at 100 %, L2-resident bytes against L2) and
    the notes on why any of them was capped; None without the per-row FLOP roofs."""
    a = snap.analysis
    if a.kernel_unit_peak_flops_per_s is None or not len(rows):
        return None
    fits = None if a.kernel_fits_in_l2 is None else a.kernel_fits_in_l2[rows]
    rates, over = ceilings(
        a.trace, a.peaks, a.kernel_flops[rows], a.kernel_bytes[rows], a.kernel_unit_peak_flops_per_s[rows],
        fits, rows,
    )
    codes = sorted(set(over.tolist()) & set(CAPPED_REASONS))
    return rates, [CAPPED_NOTES[CAPPED_REASONS[c]] for c in codes]


def kernel_name(snap: Snapshot, name: int, line_id: int = -2, op_name: int = -2, shapes: int = -2) -> Detail:
    """Every call of a kernel, or (line_id given) those a line made through one op."""
    tr = snap.trace
    nm = tr.name(name)
    if line_id == -2:
        rows = np.nonzero(tr.gpu.name == name)[0]
    else:
        rows = op_kernel_rows(snap, line_id, op_name, shapes)
        rows = rows[tr.gpu.name[rows] == name]
    d = Detail(short(nm, 60))
    ks = snap.kernels_by_name.get(nm)
    if ks is not None:
        _kernel_stat(snap, ks, rows, d)
    d.add((nm, "muted"))
    for r in rows[np.argsort(-tr.gpu.dur_ns[rows])][:8].tolist():
        label = f"{fmt_ns(tr.gpu.dur_ns[r]):>9} at +{fmt_ns(rel_start(snap, r))} (window {tr.gpu.window[r]})"
        d.link(label, Kind.KERNEL, r)
    mine = set(rows.tolist())
    for i, f in enumerate(snap.findings):
        if set(f.kernels) & mine:
            d.link(f"⚑ {message(f)}", Kind.FINDING, i)
    return d


def _kernel_stat(snap: Snapshot, ks: KernelStat, rows: np.ndarray, d: Detail) -> None:
    verdict = kernel_verdict(
        snap, ks.regime, ks.flops, ks.bytes, ks.gpu_ns, ks.calls, ks.uses_tensor_cores, ks.name
    )
    d.add(("verdict: ", "label"), (verdict, ks.regime.value))
    here = fmt_ns(float(snap.trace.gpu.dur_ns[rows].sum()))
    d.add(
        (
            f"{ks.calls} calls in the run, {fmt_ns(ks.gpu_ns)} ({fmt_ns(ks.gpu_ns / max(ks.calls, 1))} each); "
            f"here {len(rows)} calls, {here}",
            "",
        )
    )
    inten = ks.flops / ks.bytes if finite(ks.flops) and finite(ks.bytes) and ks.bytes else None
    p = snap.analysis.peaks
    ridge = p.tensor_flops_per_s / p.bytes_per_s if p.tensor_flops_per_s and p.bytes_per_s else None
    d.add(
        (
            f"{fmt_flop_count(ks.flops)} · {fmt_bytes(ks.bytes)} · intensity {f'{inten:.1f}' if inten else NA} "
            f"FLOP/B (ridge {f'{ridge:.0f}' if ridge else NA})",
            "",
        )
    )
    d.add(
        (
            f"achieved {fmt_flops(ks.achieved_flops_per_s)} / {fmt_flops(p.tensor_flops_per_s)} · "
            f"{fmt_bw(ks.achieved_bytes_per_s)} / {fmt_bw(p.bytes_per_s)} · roof {fmt_pct(ks.roof_fraction)}",
            "",
        )
    )
    capped = capped_rates(snap, rows)
    for note in [] if capped is None else capped[1]:
        d.add((note, "muted"))
    extra = []
    if ks.uses_tensor_cores is not None:
        extra.append("tensor cores" if ks.uses_tensor_cores else "no tensor cores")
    if ks.fits_in_l2:
        extra.append(L2_NOTE)
    if extra:
        d.add((" · ".join(extra), "muted"))


def _at(column: np.ndarray | None, row: int) -> float | None:
    """A per-kernel value of an optional analysis column (None when absent, NaN or -1 = unknown)."""
    if column is None or row >= len(column):
        return None
    v = float(column[row])
    return None if math.isnan(v) or (column.dtype.kind in "iu" and v < 0) else v


def kernel(snap: Snapshot, row: int) -> Detail:
    a = snap.analysis
    g = a.trace.gpu
    nm = snap.kernel_name(row)
    regime = REGIMES_BY_CODE.get(int(a.kernel_regime[row]), Regime.OVERHEAD)
    ks = snap.kernels_by_name.get(nm)
    tc = _at(a.kernel_tensor_cores, row)
    tensor = bool(tc) if tc is not None else (ks.uses_tensor_cores if ks else None)
    f, b, dur = float(a.kernel_flops[row]), float(a.kernel_bytes[row]), float(g.dur_ns[row])
    d = Detail(short(nm, 60))
    d.add(("verdict: ", "label"), (kernel_verdict(snap, regime, f, b, dur, 1, tensor, nm), regime.value))
    if _at(a.kernel_launch_bound, row):
        d.add(
            (
                "launch-bound: the GPU waited for this kernel, and it ran shorter than the CPU's launch interval",
                "overhead",
            )
        )
    d.add(
        (
            f"{fmt_ns(dur)} at +{fmt_ns(rel_start(snap, row))} on GPU{g.device[row]} stream {g.stream[row]}"
            f" · window {g.window[row]}",
            "",
        )
    )
    grid, block = a.trace.name(int(g.grid[row])), a.trace.name(int(g.block[row]))
    if grid or block:
        d.add((f"grid [{grid}] block [{block}]", "muted"))
    secs = dur / 1e9 if dur > 0 else None
    fk, bk = (f if finite(f) else None), (b if finite(b) else None)
    d.add(
        (
            f"{fmt_flop_count(fk)} ({fmt_flops(rate(fk, secs))}) · {fmt_bytes(bk)} ({fmt_bw(rate(bk, secs))})",
            "",
        )
    )
    _kernel_roof(snap, row, tensor, d)
    _kernel_context(snap, row, ks, d)
    return d


def _kernel_roof(snap: Snapshot, row: int, tensor: bool | None, d: Detail) -> None:
    a, p = snap.analysis, snap.analysis.peaks
    capped = capped_rates(snap, np.array([row])) if 0 <= row < len(a.trace.gpu) else None
    rates = None if capped is None else capped[0]
    ach_f, ach_b, roof = (None, None, None) if rates is None else (_at(c, 0) for c in rates)
    if ach_f is not None or ach_b is not None or roof is not None:
        peak_f = p.tensor_flops_per_s if tensor is not False else p.fp32_flops_per_s
        d.add(
            (
                f"achieved {fmt_flops(ach_f)} of {fmt_flops(peak_f)} · {fmt_bw(ach_b)} of {fmt_bw(p.bytes_per_s)}"
                f" · {fmt_pct(roof)} of its roof",
                "",
            )
        )
    for note in [] if capped is None else capped[1]:
        d.add((note, "muted"))
    extra = []
    if tensor is not None:
        extra.append("tensor cores" if tensor else "no tensor cores (SIMT)")
    if _at(a.kernel_fits_in_l2, row):
        extra.append(L2_NOTE)
    if extra:
        d.add((" · ".join(extra), "muted"))


def _kernel_context(snap: Snapshot, row: int, ks: KernelStat | None, d: Detail) -> None:
    """The kernel's op and line, its other calls, the idle gaps beside it and the findings naming it."""
    a, tr = snap.analysis, snap.trace
    op = int(a.links.kernel_op[row])
    if op >= 0:
        d.add(
            ("op ", "label"),
            (tr.name(int(tr.ops.name[op])), ""),
            (" " + tr.name(int(tr.ops.shapes[op])), "muted"),
        )
    s = snap.line_of_kernel(row)
    if s is not None:
        d.add(("line ", "label"), (display_path(snap, s.line), "path"))
        d.link(Phrase("line ", display_path(snap, s.line)), Kind.LINE, s.line_id)
    d.add((snap.kernel_name(row), "muted"))
    if ks is not None:
        d.link(f"all {ks.calls} calls of this kernel", Kind.KERNEL_NAME, int(tr.gpu.name[row]))
    gp = a.gaps
    for label, r in adjacent_gaps(snap, row):
        d.link(f"{fmt_ns(gp.dur_ns[r]):>9} {label}: {cause_of(int(gp.cause[r])).value}", Kind.GAP, r)
    for i, fd in enumerate(snap.findings):
        if row in fd.kernels:
            d.link(f"⚑ {message(fd)}", Kind.FINDING, i)


def adjacent_gaps(snap: Snapshot, row: int, slack_ns: float = 1_000) -> list[tuple[str, int]]:
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
    if 0 <= k < len(gaps) and s - slack_ns <= gaps.end[k] <= s + slack_ns:
        out.append(("idle before", int(gaps.rows[k])))
    k = int(np.searchsorted(gaps.start, e - slack_ns, "left"))
    if 0 <= k < len(gaps) and gaps.start[k] <= e + slack_ns:
        out.append(("idle after", int(gaps.rows[k])))
    return out
