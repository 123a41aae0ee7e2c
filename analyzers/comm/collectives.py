"""Communication: collectives as the fourth component of the breakdown, their time, bytes and bandwidth.

Which rows are collectives:

- on the GPU, NCCL kernels (`ncclKernel_*`, `ncclDevKernel_*`: `ncclDevKernel_AllReduce_Sum_bf16_RING_LL`,
  `ncclDevKernel_SendRecv`, ...). They get the regime COMMUNICATION instead of a roofline verdict: they move
  data between GPUs, and FLOPs per byte of HBM traffic say nothing about them (`classify`);
- on the CPU, the ops that span a whole collective: gloo's `gloo:all_reduce`, `gloo:all_gather`, ... (`mpi:`
  and `ucc:` alike). A run without a GPU has no GPU breakdown; these still give the time, the calls and bytes.

**Exposed and hidden** (GPU): a collective's time while no compute or memory kernel runs on another stream of
the same GPU is *exposed*: the step waits for it. The rest is *hidden* under that work. The breakdown's
communication component is the exposed time (analyzers.totals.breakdown: compute > memory > communication >
overhead); the exposed time of a rank that waits for a later rank holds that wait too (analyzers.comm.ranks tells
the straggler apart).

**Bytes** of a call (its message, what one rank puts in): the GPU row's own `bytes` when the reader found the
collective's size (Kineto's "In msg nelems" x dtype); else the nearest op that encloses the call and names a
collective with recorded shapes: `record_param_comms` (torch's c10d records it around the launch; its
arguments are the input tensor, then the output tensor, then scalars) by its first argument, the input;
`nccl:all_reduce`, `gloo:all_reduce` ... by the sum of their tensor inputs (`gloo:all_reduce [[2177]] float`:
8,708 bytes).

**Bandwidth**, nccl-tests' convention (its PERFORMANCE.md), over the calls whose size is known::

    S       = message bytes; for all_gather, n x message (the gathered output)
    algbw   = S / time
    busbw   = algbw x 2(n-1)/n  (all_reduce)   x (n-1)/n  (all_gather, reduce_scatter, all_to_all)   x 1  (others)

with n the ranks of the run (`meta["dist"]["world_size"]`: the default process group; a collective on a
sub-group is scaled as if on all ranks). Its time includes waiting for the other ranks, so a late rank lowers
it: busbw is a lower bound of what the link gave.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, replace

import numpy as np

from analyzers.arrays import length, merged
from analyzers.cost.opcost import parse_args
from analyzers.cost.roofline import Roofline
from analyzers.findings.context import Context
from analyzers.findings.facts import CommunicationFacts
from analyzers.link.links import Links
from analyzers.results import REGIME_CODES, Finding, FindingKind, Regime
from brrrtui.contract.model import NONE, GpuKind, Trace, flag_of

COMM_OP_PREFIXES = ("gloo:", "mpi:", "ucc:")  # CPU-side collectives whose op spans the whole collective
COMM_KERNEL_PREFIXES = ("nccl",)  # ncclKernel_AllReduce_..., ncclDevKernel_AllGather_...
PARAM_COMMS = "record_param_comms"  # arguments: input, output, then scalars (c10d's ParamCommsUtils)
SIZED_OP_PREFIXES = (PARAM_COMMS, "nccl:", *COMM_OP_PREFIXES)  # ops whose inputs are the message
COMM = REGIME_CODES[Regime.COMMUNICATION]
WORK = (REGIME_CODES[Regime.COMPUTE], REGIME_CODES[Regime.MEMORY])
EXPOSED_MIN_FRACTION = 0.05  # exposed collectives under this share of the span make no finding

# kind by the letters of the name (lower case, no underscores), longest first: "allreduce" before "reduce"
_KINDS = (
    ("reducescatter", "reduce_scatter"),
    ("allreduce", "all_reduce"),
    ("allgather", "all_gather"),
    ("alltoall", "all_to_all"),
    ("sendrecv", "send_recv"),
    ("broadcast", "broadcast"),
    ("barrier", "barrier"),
    ("reduce", "reduce"),
    ("gather", "gather"),
    ("scatter", "scatter"),
    ("send", "send_recv"),
    ("recv", "send_recv"),
)
_BUS_TWICE = ("all_reduce",)  # busbw = algbw x 2(n-1)/n
_BUS_ONCE = ("all_gather", "reduce_scatter", "all_to_all")  # busbw = algbw x (n-1)/n


def is_comm_op(name: str) -> bool:
    return name.startswith(COMM_OP_PREFIXES)


def is_comm_kernel(name: str) -> bool:
    return name.startswith(COMM_KERNEL_PREFIXES)


def collective_kind(name: str) -> str:
    """`ncclDevKernel_AllReduce_Sum_bf16_RING_LL` -> "all_reduce", `gloo:all_gather` -> "all_gather";
    "other" when the name says none of them."""
    body = name.partition(":")[2] if ":" in name and not name.startswith("nccl") else name
    body = body.removeprefix("ncclDevKernel_").removeprefix("ncclKernel_").lower().replace("_", "")
    body = re.split(r"[(<]", body, maxsplit=1)[0]
    return next((kind for letters, kind in _KINDS if body.startswith(letters)), "other")


def bus_factor(kind: str, n: int | None) -> float | None:
    """busbw / algbw for a collective over n ranks (None: n unknown)."""
    if n is None or n < 1:
        return None
    if kind in _BUS_TWICE:
        return 2 * (n - 1) / n
    return (n - 1) / n if kind in _BUS_ONCE else 1.0


def comm_kernels(trace: Trace) -> np.ndarray:
    """Per GPU row: it is a collective's kernel."""
    mask: np.ndarray = flag_of(trace.string_flags(is_comm_kernel), trace.gpu.name)
    mask &= trace.gpu.kind == GpuKind.KERNEL
    return mask


def classify(trace: Trace, roof: Roofline) -> Roofline:
    """The roofline with every collective kernel's regime set to COMMUNICATION and its roofline figures
    (FLOPs, bytes of HBM traffic, tensor cores, and so the achieved rates) unknown."""
    mask = comm_kernels(trace)
    if not mask.any():
        return roof
    regime = roof.regime.copy()
    regime[mask] = COMM

    def unknown(column: np.ndarray, value: float) -> np.ndarray:
        return np.where(mask, value, column).astype(column.dtype)

    return replace(
        roof,
        regime=regime,
        flops=unknown(roof.flops, np.nan),
        bytes=unknown(roof.bytes, np.nan),
        tensor_cores=unknown(roof.tensor_cores, -1),
        fits_in_l2=unknown(roof.fits_in_l2, -1),
    )


def overlap_ns(a: tuple[np.ndarray, np.ndarray], b: tuple[np.ndarray, np.ndarray]) -> int:
    """Length of the intersection of two sets of disjoint sorted intervals."""
    (s1, e1), (s2, e2) = a, b
    if not len(s1) or not len(s2):
        return 0
    # for each interval of a, the intervals of b that may overlap it: [lo, hi)
    lo = np.searchsorted(e2, s1, side="right")
    hi = np.searchsorted(s2, e1, side="left")
    total = 0
    for k in np.flatnonzero(hi > lo):
        seg = slice(lo[k], hi[k])
        total += int(np.clip(np.minimum(e2[seg], e1[k]) - np.maximum(s2[seg], s1[k]), 0, None).sum())
    return total


@dataclass(frozen=True)
class CollectiveStat:
    """One kind of collective ("all_reduce", ...) on one side ("gpu": NCCL kernels; "cpu": gloo's ops)."""

    kind: str
    side: str
    calls: int
    time_ns: int  # the calls' wall time, overlapping calls merged (waiting for the other ranks included)
    exposed_ns: int | None  # GPU: of it, the time no compute or memory kernel runs beside it; CPU: None
    bytes: float | None  # message bytes of the calls whose size is known (None: no call's)
    sized_calls: int
    algbw_bytes_per_s: float | None  # S / time over the sized calls (see the module doc)
    busbw_bytes_per_s: float | None  # None without the number of ranks


@dataclass(frozen=True)
class Communication:
    kernel_ns: int  # wall time with any collective kernel running (merged)
    exposed_ns: int  # of it, with no compute or memory kernel beside it (the breakdown's communication)
    hidden_ns: int  # kernel_ns - exposed_ns
    ranks: int | None  # ranks of the run (the bandwidth's n); None outside a distributed run
    collectives: tuple[CollectiveStat, ...]  # by time, descending


def _message_bytes(trace: Trace, links: Links, gpu_rows: np.ndarray, op_rows: np.ndarray) -> np.ndarray:
    """Bytes per call (NaN unknown): the GPU row's own bytes, else the nearest enclosing op that names the
    collective; for CPU collectives (op_rows) the op's own inputs."""
    ops = trace.ops
    sized = trace.string_flags(lambda s: s.startswith(SIZED_OP_PREFIXES))
    memo: dict[tuple[int, int, bool], float] = {}  # one parse per distinct (shapes, dtypes)

    def op_bytes(op: int) -> float:
        key = (int(ops.shapes[op]), int(ops.dtypes[op]), trace.name(int(ops.name[op])) == PARAM_COMMS)
        if key not in memo:
            args = parse_args(trace.name(key[0]), trace.name(key[1])) or []
            if key[2]:
                args = args[:1]  # the input; the output follows it
            known = [a.nbytes for a in args if a is not None]
            memo[key] = float(sum(known)) if known else np.nan
        return memo[key]

    def from_ops(op: int) -> float:
        for _ in range(64):  # the nesting is shallow; the bound only guards a cycle
            if op < 0:
                return np.nan
            if sized[ops.name[op]] if ops.name[op] >= 0 else False:
                nbytes = op_bytes(op)
                if np.isfinite(nbytes):
                    return nbytes
            op = int(links.op_parent[op])
        return np.nan

    own = trace.gpu.bytes[gpu_rows].astype(np.float64)
    gpu = np.where(own >= 0, own, np.nan)
    for k in np.flatnonzero(~np.isfinite(gpu)).tolist():
        gpu[k] = from_ops(int(links.kernel_op[gpu_rows[k]]))
    cpu = np.array([op_bytes(int(o)) for o in op_rows.tolist()], dtype=np.float64)
    return np.concatenate([gpu, cpu])


def communication(trace: Trace, links: Links, regime: np.ndarray) -> Communication | None:
    """The run's collectives, by kind, over the analysed windows (None when there are none)."""
    g, ops = trace.gpu, trace.ops
    gpu_rows = np.flatnonzero(regime == COMM)
    op_rows = np.flatnonzero(flag_of(trace.string_flags(is_comm_op), ops.name))
    if not len(gpu_rows) and not len(op_rows):
        return None
    work_rows = np.isin(regime, WORK)
    work = merged(g.start_ns[work_rows], g.start_ns[work_rows] + g.dur_ns[work_rows])
    names = [trace.name(int(i)) for i in g.name[gpu_rows].tolist()]
    names += [trace.name(int(i)) for i in ops.name[op_rows].tolist()]
    kinds = np.array([collective_kind(n) for n in names], dtype=object)
    sides = np.array(["gpu"] * len(gpu_rows) + ["cpu"] * len(op_rows), dtype=object)
    start = np.concatenate([g.start_ns[gpu_rows], ops.start_ns[op_rows]]).astype(np.int64)
    end = start + np.concatenate([g.dur_ns[gpu_rows], ops.dur_ns[op_rows]]).astype(np.int64)
    nbytes = _message_bytes(trace, links, gpu_rows, op_rows)
    n = _ranks(trace)
    stats = []
    for kind, side in dict.fromkeys(zip(kinds.tolist(), sides.tolist(), strict=True)):
        sel = (kinds == kind) & (sides == side)
        stats.append(_stat(kind, side, start[sel], end[sel], nbytes[sel], work if side == "gpu" else None, n))
    on_gpu = merged(g.start_ns[gpu_rows], g.start_ns[gpu_rows] + g.dur_ns[gpu_rows])
    total = length(on_gpu)
    exposed = total - overlap_ns(on_gpu, work)
    return Communication(
        kernel_ns=total,
        exposed_ns=exposed,
        hidden_ns=total - exposed,
        ranks=n,
        collectives=tuple(sorted(stats, key=lambda s: (-s.time_ns, s.side, s.kind))),
    )


def _ranks(trace: Trace) -> int | None:
    dist = trace.meta.get("dist")
    n = dist.get("world_size") if isinstance(dist, dict) else None
    return n if isinstance(n, int) and not isinstance(n, bool) and n > 0 else None


def _stat(
    kind: str,
    side: str,
    start: np.ndarray,
    end: np.ndarray,
    nbytes: np.ndarray,
    work: tuple[np.ndarray, np.ndarray] | None,
    n: int | None,
) -> CollectiveStat:
    span = merged(start, end)
    time_ns = length(span)
    sized = np.isfinite(nbytes)
    algbw = busbw = None
    if sized.any():
        size = float(nbytes[sized].sum()) * (n if kind == "all_gather" and n else 1)
        sized_time = length(merged(start[sized], end[sized]))
        if sized_time > 0 and (kind != "all_gather" or n is not None):
            algbw = size / (sized_time * 1e-9)
            factor = bus_factor(kind, n)
            busbw = algbw * factor if factor is not None else None
    return CollectiveStat(
        kind=kind,
        side=side,
        calls=len(start),
        time_ns=time_ns,
        exposed_ns=None if work is None else time_ns - overlap_ns(span, work),
        bytes=float(nbytes[sized].sum()) if sized.any() else None,
        sized_calls=int(sized.sum()),
        algbw_bytes_per_s=algbw,
        busbw_bytes_per_s=busbw,
    )


def comm_rows_by_line(links: Links, regime: np.ndarray, dur: np.ndarray) -> list[int]:
    """The lines that launched the collective kernels, by their kernels' time, descending."""
    rows = np.flatnonzero((regime == COMM) & (links.kernel_line >= 0))
    if not len(rows):
        return []
    ids, inv = np.unique(links.kernel_line[rows], return_inverse=True)
    ns = np.bincount(inv, weights=dur[rows].astype(np.float64))
    return [int(ids[i]) for i in np.argsort(-ns, kind="stable").tolist() if ids[i] != NONE]


def communication_findings(ctx: Context, comm: Communication | None) -> list[Finding]:
    """Exposed collectives: the step waits while the GPU only communicates. Saving: that time per step, all
    of it hidden under compute at best (a rank that waits for a later one holds that wait too)."""
    b = ctx.breakdown
    if comm is None or not b.span_ns or b.communication_ns < EXPOSED_MIN_FRACTION * b.span_ns:
        return []
    gpu = sorted((c for c in comm.collectives if c.exposed_ns), key=lambda c: -(c.exposed_ns or 0))
    if not gpu:
        return []
    facts = CommunicationFacts(
        ctx.scale,
        b.communication_ns,
        b.span_ns,
        b.communication_hidden_ns,
        tuple((c.kind, float(c.exposed_ns or 0)) for c in gpu),
    )
    regime, dur = ctx.roof.regime, ctx.trace.gpu.dur_ns
    return [
        Finding(
            kind=FindingKind.COMMUNICATION,
            lines=ctx.source_lines(comm_rows_by_line(ctx.links, regime, dur)[:3]),
            saving_ns=b.communication_ns / ctx.per,
            facts=facts,
            kernels=tuple(np.flatnonzero(regime == COMM).tolist()),
        )
    ]
