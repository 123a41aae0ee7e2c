"""The verdict sentences: one per kernel, line and idle gap, naming the roof that applies and the remedy.

The regime itself comes from the analysis; these only put its numbers into words the user can act on.
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING, TypeGuard

from analyzers.cost.gemm_shapes import narrow_load_bytes
from analyzers.results import GapCause, LineStat, Regime
from brrrtui.contract.units import fmt_bw, fmt_bytes, fmt_flops, fmt_ns, fmt_pct

if TYPE_CHECKING:  # report's import of this module does not load the UI's snapshot and lanes
    from brrrtui.present.snapshot import Snapshot


def finite(x: float | None) -> TypeGuard[float]:
    """A measured number (not missing, not NaN)."""
    return x is not None and not math.isnan(x)


def on_chip_load_bytes(regime: Regime, name: str) -> int | None:
    """Bytes per operand load of a kernel that is memory-bound on chip (a GEMM of unaligned operands:
    gemm_shapes.narrow_load_bytes), None for any other kernel or verdict."""
    return narrow_load_bytes(name) if regime is Regime.MEMORY else None


def kernel_verdict(
    snap: Snapshot,
    regime: Regime,
    flops: float | None,
    nbytes: float | None,
    dur_ns: float,
    calls: int = 1,
    tensor: bool | None = None,
    name: str = "",
) -> str:
    p = snap.analysis.peaks
    secs = dur_ns / 1e9 if dur_ns > 0 else None
    narrow = on_chip_load_bytes(regime, name)
    if narrow is not None:
        return _narrow_load_verdict(snap, narrow, flops, nbytes, secs)
    if regime is Regime.COMPUTE:
        peak = p.tensor_flops_per_s if tensor is not False else p.fp32_flops_per_s
        rate = flops / secs if finite(flops) and secs else None
        frac = f" ({fmt_pct(rate / peak)} of the roof)" if rate and peak else ""
        return (
            f"compute-bound: {fmt_flops(rate)} of {fmt_flops(peak)}{frac}; only more FLOP/s helps "
            "(tensor cores, lower precision), not fusion."
        )
    if regime is Regime.MEMORY:
        rate = nbytes / secs if finite(nbytes) and secs else None
        peak = p.bytes_per_s
        frac = f" ({fmt_pct(rate / peak)} of peak)" if rate and peak else ""
        return (
            f"memory-bound: moves {fmt_bytes(nbytes)} at {fmt_bw(rate)} of {fmt_bw(peak)}{frac}; "
            "fusing it with its neighbours saves the DRAM round trips."
        )
    if regime is Regime.COMMUNICATION:
        return (
            "communication: a collective moving data between GPUs (no roofline verdict); the step waits for it "
            "only where no compute or memory kernel runs beside it (exposed), and its time includes waiting "
            "for the other ranks."
        )
    mean = dur_ns / calls if calls else dur_ns
    return (
        f"overhead-bound: {fmt_ns(mean)} per call is too short to pay for its launch; fewer, larger kernels "
        "(CUDA graphs, torch.compile) help, faster kernels do not."
    )


def _narrow_load_verdict(
    snap: Snapshot, narrow: int, flops: float | None, nbytes: float | None, secs: float | None
) -> str:
    p = snap.analysis.peaks
    rate = flops / secs if finite(flops) and secs else None
    bw = nbytes / secs if finite(nbytes) and secs else None
    frac = f" ({fmt_pct(rate / p.tensor_flops_per_s)})" if rate and p.tensor_flops_per_s else ""
    return (
        f"memory-bound on chip: its operands are aligned to {narrow} bytes, so it loads them {narrow} bytes at "
        f"a time through L1/shared memory; {fmt_flops(rate)} of {fmt_flops(p.tensor_flops_per_s)}{frac}, "
        f"DRAM only {fmt_bw(bw)}. Pad the odd dimension to a multiple of 64 (the slow-GEMM finding names it); "
        "fusion does not help."
    )


GAP_VERDICT = {
    GapCause.HOST: "the GPU waited {d} for the CPU to issue the next kernel (Python, dispatch, launches).",
    GapCause.SYNC: "the CPU waited for the GPU (a sync such as .item() or .cpu()), then the GPU waited {d} "
    "for it to refill the queue.",
    GapCause.H2D: "a host-to-device copy kept the GPU waiting {d}.",
    GapCause.DATA: "data loading kept the GPU waiting {d}.",
    GapCause.WAIT: "the training thread waited off the CPU (a sleep, I/O, a lock or a queue) and the GPU with "
    "it, {d}.",
    GapCause.OTHER: "nothing recorded on the CPU explains these {d} of idle GPU (profiler, GC, code outside torch).",
    GapCause.COMMUNICATION: "the rank sat {d} inside a collective (gloo, MPI, UCC) waiting for the other ranks and "
    "moving the data through the host: communication, not a host sync.",
}
GAP_ADVICE = {
    GapCause.HOST: "Launch fewer kernels: torch.compile, CUDA graphs, or larger batches per launch.",
    GapCause.SYNC: "Keep values on the GPU: drop .item()/.cpu()/print of tensors from the loop, or do them "
    "every N steps.",
    GapCause.H2D: "Use pin_memory=True and .to(device, non_blocking=True), or move the data once up front.",
    GapCause.DATA: "Give the DataLoader more workers, persistent_workers=True and prefetching.",
    GapCause.WAIT: "Take the wait out of the loop or off its thread: DataLoader workers, a background thread "
    "for logging and checkpoints, no time.sleep.",
    GapCause.OTHER: "Check for garbage collection, logging or the profiler itself around this point.",
    GapCause.COMMUNICATION: "Make the straggler faster (`brrrtui report` on the run names it and its line), or "
    "overlap the collective with work: DDP's bucketing during the backward, the NCCL backend for CUDA tensors.",
}
FINDING_KINDS_BY_CAUSE = {
    GapCause.HOST: {"overhead", "small_kernels"},
    GapCause.SYNC: {"sync"},
    GapCause.H2D: {"h2d"},
    GapCause.DATA: {"data"},
    GapCause.WAIT: {"cpu_wait"},
    GapCause.OTHER: set(),
    GapCause.COMMUNICATION: {"communication"},
}


def line_verdict(stat: LineStat, communication_idle_ns: int | None = None) -> str:
    """The line's regime and its share of the line's time, its idle counted as overhead but the idle inside
    collectives (`communication_idle_ns`, part of `idle_ns`) as communication. Not given, it is all of the idle
    of a line that is communication-bound only with its idle (analyzers.totals.lines counts the idle inside
    collectives as communication), else none: a line whose collective kernels outweigh the rest with its idle
    as overhead keeps it as overhead."""
    busy = sum(stat.gpu_ns_by_regime.values()) + stat.idle_ns
    if busy <= 0:
        return "no GPU time recorded for this line."
    dom = stat.regime
    share = {r: stat.gpu_ns_by_regime.get(r, 0) for r in Regime}
    if communication_idle_ns is None:
        with_idle = share[Regime.OVERHEAD] + stat.idle_ns
        by_kernels = share[Regime.COMMUNICATION] > max(share[Regime.COMPUTE], share[Regime.MEMORY], with_idle)
        communication_idle_ns = stat.idle_ns if dom is Regime.COMMUNICATION and not by_kernels else 0
    share[Regime.OVERHEAD] += stat.idle_ns - communication_idle_ns
    share[Regime.COMMUNICATION] += communication_idle_ns
    inside = f", {fmt_ns(communication_idle_ns)} of it inside collectives" if communication_idle_ns else ""
    return f"{dom.value}-bound: {fmt_pct(share[dom] / busy)} of its time is {dom.value}" + (
        f", including {fmt_ns(stat.idle_ns)} of GPU idle it caused{inside}." if stat.idle_ns else "."
    )
