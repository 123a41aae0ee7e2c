"""Time per nn.Module, folded like a flame graph: `transformer.h.*.attn` holds the kernels of all twelve blocks'
attention modules, and each node holds its children's time. Repeated siblings fold by structure, not by name
(contract.modules.fold_chains): `encoder_layer_0 … encoder_layer_11` are one `encoder_layer_*` node as
`h.0 … h.11` are one `h.*`.

A kernel belongs to the modules that were on the stack when its op was called (backward kernels: those of
their forward op; links.kernel_module). Each node of the chain takes the kernel's time (inclusive), the
innermost also as its own (self). GPU idle goes to the module of the kernel whose start ended it (the work
the GPU was waiting for), as unprofiled steps would have it: the gaps the window replay leaves
(unprofiled_replay.unprofiled_gaps), else the window's scaled (lines.unprofiled_idle_scale).
Kernels outside any module (the optimizer, a loss computed in the loop) and their idle are kept apart, so

    sum over top-level nodes + outside == every kernel's time (and likewise for idle)
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

import numpy as np

from analyzers.results import GAP_CAUSE_CODES, REGIME_CODES, GapCause, Regime
from brrrtui.contract.model import SourceLine, Table
from brrrtui.contract.modules import decode, fold_chains

_REGIMES = (Regime.COMPUTE, Regime.MEMORY, Regime.OVERHEAD, Regime.COMMUNICATION)
Key = tuple[str, ...]  # the root's class, then each level's collapsed path and class (`h.*:GPT2Block`)


@dataclass(frozen=True)
class ModuleNode:
    key: Key
    path: str  # collapsed qualified name under the root (`transformer.h.*.attn`; "" for the root)
    name: str  # the part of the path below the parent node (`attn`), or the root's class
    kind: str  # the module's class
    depth: int
    instances: int  # distinct modules folded into it (12 for `h.*` of GPT-2 small)
    gpu_ns: int  # its kernels and its children's
    self_gpu_ns: int  # kernels whose innermost module it is
    gpu_ns_by_regime: dict[Regime, int]
    idle_ns: int  # GPU idle before its kernels, as an unprofiled step would have it (estimate)
    kernels: int
    flops: float | None
    bytes: float | None
    regime: Regime  # dominant, idle counting as overhead (inside collectives: as communication)
    lib_line: SourceLine | None  # the model-library line holding most of its time
    user_line: SourceLine | None  # the user's line that called it (most time)
    children: tuple[Key, ...] = ()

    @property
    def label(self) -> str:
        return self.path or self.kind


@dataclass(frozen=True)
class ModuleTree:
    nodes: tuple[ModuleNode, ...]  # depth first, siblings by time descending
    total_gpu_ns: int  # every kernel analysed
    outside_gpu_ns: int  # kernels outside any module
    outside_idle_ns: int
    idle_ns: int  # all GPU idle (the unprofiled estimate when a scale was given)
    steps: int
    by_key: dict[Key, ModuleNode] = field(default_factory=dict, repr=False)
    # module chain string id -> each level's folded path, outermost first: where a finding about kernels of
    # that chain belongs (`encoder.encoder_layer_*.attn`, the node's path)
    folded_paths: dict[int, tuple[str, ...]] = field(default_factory=dict, repr=False)

    @property
    def roots(self) -> list[ModuleNode]:
        return [n for n in self.nodes if n.depth == 0]

    def per_step(self, ns: float) -> float:
        return ns / self.steps if self.steps > 0 else ns


@dataclass
class _Acc:
    path: str  # collapsed
    kind: str
    depth: int
    instances: set[str] = field(default_factory=set)
    gpu: np.ndarray = field(default_factory=lambda: np.zeros(len(_REGIMES), np.int64))
    self_gpu: int = 0
    idle: float = 0.0
    comm_idle: float = 0.0  # the part of `idle` inside CPU-side collectives (GapCause.COMMUNICATION)
    kernels: int = 0
    flops: float = 0.0
    flops_known: int = 0
    bytes: float = 0.0
    bytes_known: int = 0
    lib: dict[int, int] = field(default_factory=dict)  # line id -> ns
    user: dict[int, int] = field(default_factory=dict)


@dataclass(frozen=True)
class KernelColumns:
    """The per-GPU-row columns the tree folds (the analysis' own)."""

    module: np.ndarray  # string id of the chain (links.kernel_module)
    lib_line: np.ndarray
    line: np.ndarray
    regime: np.ndarray
    flops: np.ndarray
    bytes: np.ndarray
    dur_ns: np.ndarray


def _chains(ids: np.ndarray, name: Callable[[int], str]) -> dict[int, list[tuple[Key, str, str, str]]]:
    """chain string id -> its levels as (node key, full path, folded path, class), outermost first; paths fold
    by structure over all the chains at once (contract.modules.fold_chains)."""
    decoded = {sid: frames for sid in np.unique(ids[ids >= 0]).tolist() if (frames := decode(name(sid)))}
    folds = fold_chains(decoded.values())
    out: dict[int, list[tuple[Key, str, str, str]]] = {}
    for sid, frames in decoded.items():
        paths = folds[tuple(f.path for f in frames)]
        levels: list[tuple[Key, str, str, str]] = []
        key: Key = (frames[0].kind,)
        for i, (f, folded) in enumerate(zip(frames, paths, strict=True)):
            if i:  # the class too: a Sequential's `0` and `1` (a conv, a norm) stay apart once collapsed
                key = (*key, f"{folded}:{f.kind}")
            levels.append((key, f.path, folded, f.kind))
        out[sid] = levels
    return out


def module_tree(
    k: KernelColumns,
    gaps: Table,
    name: Callable[[int], str],
    lines: list[SourceLine],
    steps: int,
    idle_scale: float | None = None,
) -> ModuleTree:
    chains = _chains(k.module, name)
    scale = 1.0 if idle_scale is None else idle_scale
    idle_by_row = _idle_by_next_kernel(gaps, len(k.dur_ns)) * scale
    comm_by_row = _idle_by_next_kernel(gaps, len(k.dur_ns), GapCause.COMMUNICATION) * scale
    accs: dict[Key, _Acc] = {}
    order: dict[Key, list[Key]] = {}
    outside_gpu = outside_idle = 0.0
    by_module = np.argsort(k.module, kind="stable")  # each module's rows in row order, one sort for all
    ids, firsts = np.unique(k.module[by_module], return_index=True)
    ends = [*firsts[1:].tolist(), len(by_module)] if len(ids) else []
    for sid_raw, lo, hi in zip(ids.tolist(), firsts.tolist(), ends, strict=True):
        rows = by_module[lo:hi]
        levels = chains.get(int(sid_raw))
        if not levels:
            outside_gpu += float(k.dur_ns[rows].sum())
            outside_idle += float(idle_by_row[rows].sum())
            continue
        _fold(accs, order, levels, rows, k, idle_by_row, comm_by_row)
    nodes = _nodes(accs, order, lines)
    total = int(k.dur_ns.sum())
    return ModuleTree(
        nodes=tuple(nodes),
        total_gpu_ns=total,
        outside_gpu_ns=int(outside_gpu),
        outside_idle_ns=int(round(outside_idle)),
        idle_ns=int(round(float(idle_by_row.sum()))),
        steps=steps,
        by_key={n.key: n for n in nodes},
        folded_paths={sid: tuple(level[2] for level in levels) for sid, levels in chains.items()},
    )


def _idle_by_next_kernel(gaps: Table, n_rows: int, cause: GapCause | None = None) -> np.ndarray:
    """GPU idle per gpu row: the gaps its start ended (of `cause` only, when given)."""
    out = np.zeros(n_rows, dtype=np.float64)
    if len(gaps) and n_rows:
        nxt = gaps.next_row
        ok = (nxt >= 0) & (nxt < n_rows)
        if cause is not None:
            ok &= gaps.cause == GAP_CAUSE_CODES[cause]
        np.add.at(out, nxt[ok], gaps.dur_ns[ok].astype(np.float64))
    return out


def _fold(
    accs: dict[Key, _Acc],
    order: dict[Key, list[Key]],
    levels: list[tuple[Key, str, str, str]],
    rows: np.ndarray,
    k: KernelColumns,
    idle_by_row: np.ndarray,
    comm_by_row: np.ndarray,
) -> None:
    dur = k.dur_ns[rows].astype(np.int64)
    by_regime = np.array([int(dur[k.regime[rows] == REGIME_CODES[r]].sum()) for r in _REGIMES], np.int64)
    flops, nbytes = k.flops[rows], k.bytes[rows]
    flops_sum, flops_known = float(np.nansum(flops)), int(np.isfinite(flops).sum())
    bytes_sum, bytes_known = float(np.nansum(nbytes)), int(np.isfinite(nbytes).sum())
    idle = float(idle_by_row[rows].sum())
    comm_idle = float(comm_by_row[rows].sum())
    lib = _ns_by(k.lib_line[rows], dur)
    user = _ns_by(k.line[rows], dur)
    parent: Key | None = None
    for depth, (key, path, collapsed, kind) in enumerate(levels):
        acc = accs.get(key)
        if acc is None:
            acc = accs[key] = _Acc(collapsed, kind, depth)
            order.setdefault(parent or (), []).append(key)
        acc.instances.add(path)
        acc.gpu += by_regime
        acc.idle += idle
        acc.comm_idle += comm_idle
        acc.kernels += len(rows)
        acc.flops += flops_sum
        acc.flops_known += flops_known
        acc.bytes += bytes_sum
        acc.bytes_known += bytes_known
        for src, dst in ((lib, acc.lib), (user, acc.user)):
            for line_id, ns in src.items():
                dst[line_id] = dst.get(line_id, 0) + ns
        parent = key
    accs[levels[-1][0]].self_gpu += int(dur.sum())


def _ns_by(ids: np.ndarray, dur: np.ndarray) -> dict[int, int]:
    ok = ids >= 0
    if not ok.any():
        return {}
    uniq, inv = np.unique(ids[ok], return_inverse=True)
    sums = np.bincount(inv, weights=dur[ok].astype(np.float64))
    return {int(u): int(s) for u, s in zip(uniq.tolist(), sums.tolist(), strict=True)}


def _top_line(ns_by_line: dict[int, int], lines: list[SourceLine]) -> SourceLine | None:
    if not ns_by_line:
        return None
    best = max(ns_by_line.items(), key=lambda kv: (kv[1], -kv[0]))[0]
    return lines[best] if 0 <= best < len(lines) else None


def _nodes(accs: dict[Key, _Acc], order: dict[Key, list[Key]], lines: list[SourceLine]) -> list[ModuleNode]:
    """Depth first from the roots, siblings by inclusive time (GPU + idle) descending."""

    def weight(key: Key) -> float:
        a = accs[key]
        return float(a.gpu.sum()) + a.idle

    out: list[ModuleNode] = []
    stack = sorted(order.get((), []), key=weight)
    while stack:
        key = stack.pop()
        a = accs[key]
        children = sorted(order.get(key, []), key=weight)
        path = a.path if len(key) > 1 else ""
        parent_path = accs[key[:-1]].path if len(key) > 2 else ""
        name = path.removeprefix(parent_path + ".") if parent_path else (path or a.kind)
        if len(a.instances) == 1 and "*" in name:  # one module: its own index, not `*`
            name = ".".join(next(iter(a.instances)).split(".")[-(name.count(".") + 1) :])
        per = {r: int(a.gpu[i]) for i, r in enumerate(_REGIMES)}
        # idle counts as overhead, but for the waits inside collectives: communication
        weights = [per[Regime.COMPUTE], per[Regime.MEMORY], per[Regime.OVERHEAD] + a.idle - a.comm_idle]
        weights.append(per[Regime.COMMUNICATION] + a.comm_idle)
        out.append(
            ModuleNode(
                key=key,
                path=path,
                name=name,
                kind=a.kind,
                depth=a.depth,
                instances=len(a.instances),
                gpu_ns=int(a.gpu.sum()),
                self_gpu_ns=a.self_gpu,
                gpu_ns_by_regime=per,
                idle_ns=int(round(a.idle)),
                kernels=a.kernels,
                flops=a.flops if a.flops_known else None,
                bytes=a.bytes if a.bytes_known else None,
                regime=_REGIMES[int(np.argmax(weights))] if any(weights) else Regime.OVERHEAD,
                lib_line=_top_line(a.lib, lines),
                user_line=_top_line(a.user, lines),
                children=tuple(reversed(children)),
            )
        )
        stack.extend(children)
    return out
