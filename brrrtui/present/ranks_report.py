"""The ranks of a distributed run side by side in the report (text and the JSON member "ranks"): per-rank step
times, time in collectives, the straggler and its line (analyzers.comm.ranks)."""

from __future__ import annotations

import os
from typing import Any

from analyzers.comm.clocks import ClockOffset
from analyzers.comm.ranks import RankComparison, Straggler
from brrrtui.contract.units import fmt_ns, fmt_pct

CLOCK_SHOWN_NS = 10_000_000  # offsets below this are the noise of one host's collectives, not two clocks


def _where(c: RankComparison) -> str:
    if not c.common_windows:
        return "no window was recorded on every rank"
    first, last = c.common_windows[0][0], c.common_windows[-1][1]
    n = len(c.common_windows)
    return f"{n} window{'s' if n > 1 else ''} on the same steps on every rank, steps {first}–{last}"


_STRAGGLER_CURE = {
    "line": "the other ranks wait while this rank runs its line: take that work out of the step or spread it "
    "evenly over the ranks (a data loader: more workers or pin_memory on that rank; uneven batches: even them)",
    "gpu": "this rank runs the same kernels slower: look at that GPU's clocks and temperature "
    "(nvidia-smi -q -d PERFORMANCE,TEMPERATURE) and what else runs on it",
    "unknown": "neither one line nor its kernels explain the wait: compare this rank's own report "
    "(brrrtui report on its file) with another rank's",
}
EXPOSED_SHOWN = 0.10  # exposed communication worth a cure: this share of the median step or more


def _exposed_text(c: RankComparison) -> list[str]:
    r = c.exposed
    if r is None or r.exposed_comm_ns_per_step is None or not c.median_step_ns:
        return []
    share = r.exposed_comm_ns_per_step / c.median_step_ns
    if share < EXPOSED_SHOWN:
        return []
    return [
        f"Exposed communication: {fmt_ns(r.exposed_comm_ns_per_step)} per step on rank {r.rank} "
        f"({fmt_pct(share)} of a step, the least of any rank) with no kernel overlapping it",
        "  → overlap it with the backward: DDP(..., bucket_cap_mb=N (smaller buckets start reducing earlier), "
        "gradient_as_bucket_view=True, static_graph=True); FSDP2: module.set_modules_to_forward_prefetch / "
        "set_modules_to_backward_prefetch, reshard_after_forward=False (FSDP1: forward_prefetch=True, "
        "backward_prefetch=BackwardPrefetch.BACKWARD_PRE)",
    ]


def _straggler_text(s: Straggler | None) -> list[str]:
    if s is None:
        return ["Straggler: none (every rank within 5 % of a step of the others)"]
    why = (
        "the other ranks wait for it in collectives"
        if s.basis == "communication"
        else "its median step is the slowest (no collective recorded)"
    )
    out = [f"Straggler: rank {s.rank}, late by {fmt_ns(s.late_ns)} per step ({why})"]
    if s.line is not None:
        out.append(
            f"  its line: {os.path.basename(s.line.file)}:{s.line.line} ({s.line.function}) takes "
            f"{fmt_ns(s.line_extra_ns)} more per step than on the other ranks   {s.line}"
        )
    if s.kernel is not None:
        out.append(f"  its kernel: {s.kernel} takes {fmt_ns(s.kernel_extra_ns)} more GPU time per step")
    out.append(f"  → {_STRAGGLER_CURE[s.cause]}")
    return out


def ranks_text(c: RankComparison, shown: int, notes: list[str], clocks: dict[int, ClockOffset]) -> str:
    out = [f"Ranks: {len(c.ranks)} ({_where(c)})"]
    if c.unaligned_windows:
        out.append(f"  {c.unaligned_windows} step windows are not on every rank (left out of the comparison)")
    exposed = any(r.exposed_comm_ns_per_step is not None for r in c.ranks)  # NCCL kernels recorded
    rows: list[tuple[str, ...]] = [
        ("rank", "steps", "median step", "p90 step", "in collectives/step", "busy/step")
    ]
    rows[0] += ("exposed comm/step",) if exposed else ()
    for r in c.ranks:
        row: tuple[str, ...] = (
            f"{r.rank}{' *' if r.rank == shown else ''}",
            str(r.steps),
            fmt_ns(r.step_ns),
            fmt_ns(r.step_p90_ns),
            fmt_ns(r.comm_ns_per_step) if r.comm_ns_per_step is not None else "—",
            fmt_ns(r.busy_ns_per_step),
        )
        if exposed:
            row += (fmt_ns(r.exposed_comm_ns_per_step) if r.exposed_comm_ns_per_step is not None else "—",)
        rows.append(row)
    widths = [max(len(row[i]) for row in rows) for i in range(len(rows[0]))]
    out += [
        "  " + "  ".join(cell.ljust(w) for cell, w in zip(row, widths, strict=True)).rstrip() for row in rows
    ]
    out.append(
        "  (* the rank analysed below; step times outside windows, the rest inside the common windows)"
    )
    out += _straggler_text(c.straggler)
    out += _exposed_text(c)
    if c.imbalance is not None:
        out.append(
            f"Load imbalance: the busiest rank's busy time per step is {fmt_pct(c.imbalance)} over the mean"
        )
    ref = min(clocks) if clocks else 0
    for o in clocks.values():
        if abs(o.offset_ns) >= CLOCK_SHOWN_NS:  # another host's clock; one host's ranks share a clock
            ahead = "ahead of" if o.offset_ns > 0 else "behind"
            out.append(
                f"Clock: rank {o.rank} reads {fmt_ns(abs(o.offset_ns))} {ahead} rank {ref} (from {o.matched} "
                f"collective ends, spread {fmt_ns(o.spread_ns)})"
            )
    out += [f"note: {n}" for n in notes]
    return "\n".join(out)


def ranks_json(
    c: RankComparison, shown: int, notes: list[str], clocks: dict[int, ClockOffset]
) -> dict[str, Any]:
    """The report's "ranks" member (added to schema 2; absent for a single-process recording)."""
    s = c.straggler
    return {
        "shown": shown,
        "ranks": [
            {
                "rank": r.rank,
                "steps": r.steps,
                "step_ns": r.step_ns,
                "step_p90_ns": r.step_p90_ns,
                "windows": r.windows,
                "comm_ns_per_step": r.comm_ns_per_step,
                "exposed_comm_ns_per_step": r.exposed_comm_ns_per_step,
                "busy_ns_per_step": r.busy_ns_per_step,
            }
            for r in c.ranks
        ],
        "common_windows": [list(w) for w in c.common_windows],
        "unaligned_windows": c.unaligned_windows,
        "median_step_ns": c.median_step_ns,
        "imbalance": c.imbalance,
        "straggler": None
        if s is None
        else {
            "rank": s.rank,
            "late_ns": s.late_ns,
            "basis": s.basis,
            "line": None
            if s.line is None
            else {"file": s.line.file, "line": s.line.line, "function": s.line.function},
            "line_extra_ns": s.line_extra_ns,
            "kernel": s.kernel,
            "kernel_extra_ns": s.kernel_extra_ns,
            "cause": s.cause,
        },
        "clock_offsets": [
            {"rank": o.rank, "offset_ns": o.offset_ns, "matched": o.matched, "spread_ns": o.spread_ns}
            for o in clocks.values()
        ],
        "notes": notes,
    }


def rank_choices(meta: dict[str, Any]) -> tuple[list[tuple[int, str]], int | None]:
    """The rank picker's rows for a trace of a distributed run (meta `rank_set`): (rank, `rank 1 ·
    run.rank1.brrr`) by rank, and the rank on screen; ([], None) for any other trace."""
    rank_set = meta.get("rank_set")
    files = rank_set.get("files") if isinstance(rank_set, dict) else None
    if not isinstance(rank_set, dict) or not isinstance(files, dict) or len(files) < 2:
        return [], None
    shown = rank_set.get("shown")
    rows = [
        (r, f"rank {r} · {os.path.basename(str(p))}" + ("  (on screen)" if r == shown else ""))
        for r, p in sorted(files.items())
    ]
    return rows, shown if isinstance(shown, int) else None
