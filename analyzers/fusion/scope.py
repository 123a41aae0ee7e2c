"""What compiling a function fuses: every run of fusable kernels in its scope, not only the chain found.

A fusion chain whose advice is "torch.compile the function F" (no named fused op matches it) stands for what
compiling F buys, and Inductor fuses far more than that chain: all the memory-bound work between the matmul
and attention kernels F runs (those stay cuBLAS/cuDNN calls) — norms and the casts to the matmul's dtype,
residual adds, dropout, activations, bias-gradient sums — forward and backward. On the H200, compiling GPT-2's
`Block` saved 4.24 ms a step where its two layer-norm-backward chains predicted 1.21 ms. So a function's
chains become one estimate over its scope:

- kernels on F's lines (same file and function), forward and the backward kernels that take those lines;
- with module chains recorded (the spans' `module`), every kernel run inside the module whose `forward` F is
  (the common module frames of the chain's kernels: a Block's attention and MLP included), unless that module
  is the root: compiling a whole model is not a fusion estimate, so F's own lines are its scope then.

Within the scope, each maximal run of consecutive fusable kernels on one stream (fusion/chains.py's candidates; small
fills and memsets skipped; any other kernel ends a run) becomes one kernel. Every input of an op of the run
that an earlier op of the run produced (same shape and dtype, "as far as shapes allow") is not re-read, and
that producer's output is not written (counted once per production):

    saved(run)  = sum of those inputs' sizes + sum of those producers' output sizes, at most the run's bytes
                  less its external ones (the inputs from outside the run and the last output: fusion/scope_runs.py)
    rate(run)   = the run's bytes / its kernels' time, at most the peak bandwidth (the peak if its bytes are unknown)
    saving(run) = saved / rate + (kernels - 1) x per-launch cost (unprofiled, as in fusion/chains.py),
                  capped at the run's wall time less its fused bytes / rate

The rate is the run's own: the fused kernel streams what is left at the bandwidth these kernels reached, so
kernels far under the memory roof (strided copies, ATen's channels-last batch-norm statistics, a max-pool)
save in proportion to their time. On the H200, compiling GPT-2's `Block` cut its kernels' time by 5.5 ms a step; the
Inductor kernels that replaced them ran at ~3.3 TB/s of a 4.2 TB/s peak, and the Block's eager kernels at
2.6 TB/s.

The scope's saving is the sum over its runs. Chains of one scope become one chain; a scope inside another
(MLP.forward inside Block.forward) is dropped, being part of what compiling the outer function fuses. Named
fused ops (fusion/patterns.py) stay their own chains and their kernels are left out of every scope.
"""

from __future__ import annotations

from dataclasses import replace

import numpy as np

from analyzers.arrays import distinct, unique_rows
from analyzers.cost.roofline import Roofline
from analyzers.fusion.candidate import FusionChain
from analyzers.fusion.scope_runs import ScopeTotals, StreamOrder, scope_totals
from analyzers.link.links import Links
from brrrtui.contract.model import NONE, Trace, flag_of
from brrrtui.contract.modules import ModuleFrame, collapse, decode, encode

FUNCTION_GAP = 8  # without module chains: recorded lines of one name this far apart are two functions


def _frames(module: str) -> tuple[ModuleFrame, ...]:
    """A span's module string as frames with collapsed paths (`h.3` -> `h.*`: the twelve blocks are one)."""
    return tuple(ModuleFrame(collapse(f.path), f.kind) for f in decode(module))


def _module_prefix(trace: Trace, links: Links, rows: list[int]) -> str:
    """The collapsed common module frames of `rows` (`=GPT;h.*=Block`); "" when unknown or only the root."""
    mods = links.kernel_module[rows] if len(links.kernel_module) else np.full(len(rows), NONE)
    chains = [_frames(trace.name(int(m))) for m in mods if m >= 0]
    if not chains or any(not c for c in chains):
        return ""
    common = _common(chains)
    if len(common) < 2:
        return ""
    return encode([(f.path, f.kind) for f in common])


class ModuleChains:
    """The collapsed chain of every module id the kernels ran in, worked out once for all of an analysis's
    scopes (each scope asked again cost a pass over every GPU row and a decode of every chain)."""

    def __init__(self, trace: Trace, links: Links):
        self.mods = links.kernel_module
        ids = distinct(self.mods[self.mods >= 0]) if len(self.mods) else np.empty(0, np.int64)
        self.chains = {
            int(i): encode([(f.path, f.kind) for f in _frames(trace.name(int(i)))]) for i in ids.tolist()
        }
        self.strings = len(trace.strings)

    def rows_under(self, prefix: str) -> np.ndarray:
        """Per GPU row: it ran inside a module whose collapsed chain starts with `prefix`."""
        if not prefix or not len(self.mods):
            return np.zeros(len(self.mods), dtype=bool)
        flags = np.zeros(self.strings, dtype=bool)
        flags[[i for i, chain in self.chains.items() if _under(chain, prefix)]] = True
        return flag_of(flags, self.mods)


def _under(module: str, prefix: str) -> bool:
    return module == prefix or module.startswith(prefix + ";")


def _common(chains: list[tuple[ModuleFrame, ...]]) -> tuple[ModuleFrame, ...]:
    common = chains[0] if chains else ()
    for c in chains[1:]:
        n = 0
        while n < min(len(common), len(c)) and common[n] == c[n]:
            n += 1
        common = common[:n]
    return common


def function_keys(trace: Trace, links: Links) -> np.ndarray:
    """Per line id, an id of the function it is in. A line names only its function's name, and every module's
    method is `forward`: with module chains recorded, a line's function is (file, name, the class of the
    innermost module all its kernels ran in); without, lines of one name in one file more than FUNCTION_GAP
    lines apart from the next recorded one start another function."""
    n = len(trace.lines)
    owner = [""] * n
    mods = links.kernel_module if len(links.kernel_module) else np.full(len(trace.gpu), NONE)
    ok = (links.kernel_line >= 0) & (mods >= 0)
    if ok.any():
        cols = (links.kernel_line[ok].astype(np.int64), mods[ok].astype(np.int64))
        first = unique_rows(cols)[0]  # the distinct (line, module) pairs, in order
        per_line: dict[int, list[tuple[ModuleFrame, ...]]] = {}
        for ln, m in zip(cols[0][first].tolist(), cols[1][first].tolist(), strict=True):
            per_line.setdefault(ln, []).append(_frames(trace.name(m)))
        for ln, chains in per_line.items():
            common = _common(chains)
            owner[ln] = common[-1].kind if common else ""
    keys: dict[tuple[str, str, str, int], int] = {}
    out = np.zeros(n, dtype=np.int64)
    by_name: dict[tuple[str, str, str], list[int]] = {}
    for i, ln in enumerate(trace.lines):
        by_name.setdefault((ln.file, ln.function, owner[i]), []).append(i)
    for (file, func, cls), ids in by_name.items():
        ids.sort(key=lambda i: trace.lines[i].line)
        part, prev = 0, None
        for i in ids:
            num = trace.lines[i].line
            if prev is not None and not ok.any() and num - prev > FUNCTION_GAP:
                part += 1
            prev = num
            out[i] = keys.setdefault((file, func, cls, part), len(keys))
    return out


def scope_mask(
    trace: Trace,
    links: Links,
    chain: FusionChain,
    order: StreamOrder,
    funcs: np.ndarray,
    modules: ModuleChains,
) -> np.ndarray:
    """The fusable GPU rows compiling the function of `chain`'s first line would cover."""
    same_func = np.append(funcs == funcs[chain.line_ids[0]], False)
    kline = links.kernel_line
    mask: np.ndarray = same_func[np.where(kline >= 0, kline, len(trace.lines))]
    if len(modules.mods):
        mask |= modules.rows_under(_module_prefix(trace, links, chain.rows))
    mask &= order.cand
    return mask


def _calls(trace: Trace, links: Links, lead: FusionChain, rows: np.ndarray) -> int:
    """How many times the scope ran: its kernels like the lead chain's first (name and line), over how many
    of those one occurrence of the chain holds."""
    r0 = lead.rows[0]
    name, line = trace.gpu.name[r0], links.kernel_line[r0]
    per = sum(1 for r in lead.rows if trace.gpu.name[r] == name and links.kernel_line[r] == line)
    n = int(((trace.gpu.name[rows] == name) & (links.kernel_line[rows] == line)).sum())
    return max(1, round(n / max(per, 1)))


def _first_per_name(trace: Trace, kernel_ops: np.ndarray) -> list[int]:
    """The first op of each op name among `kernel_ops` (NONE skipped), in the order they appear."""
    ops = kernel_ops[kernel_ops >= 0]
    first = np.sort(np.unique(trace.ops.name[ops], return_index=True)[1])
    return [int(o) for o in ops[first].tolist()]


def _chain(trace: Trace, links: Links, seeds: list[FusionChain], t: ScopeTotals) -> FusionChain:
    lead = max(seeds, key=lambda c: c.saving_ns)
    occ = _calls(trace, links, lead, t.rows)
    by_time = t.rows[np.argsort(trace.gpu.start_ns[t.rows], kind="stable")]
    first = by_time[: max(1, round(len(by_time) / occ))]
    first = first[np.argsort(trace.gpu.start_ns[first], kind="stable")]
    ops = _first_per_name(trace, links.kernel_op[by_time])  # every op the scope's kernels run, once per name
    kline = links.kernel_line[t.rows]
    kline = kline[kline >= 0]
    firsts = kline[np.sort(np.unique(kline, return_index=True)[1])]
    line_ids = list(dict.fromkeys([*lead.line_ids, *firsts.tolist()]))
    return replace(
        lead,
        rows=[int(r) for r in first],
        ops=ops,
        op_names=[trace.name(int(trace.ops.name[o])) for o in ops],
        line_ids=line_ids,
        kernel_names=[trace.name(int(trace.gpu.name[r])) for r in first],
        occurrences=occ,
        bytes_now=t.bytes_now,
        bytes_saved=t.saved,
        kernel_ns=t.kernel_ns,
        saving_ns=t.saving_ns,
        all_rows=t.rows,
        windows={int(w) for w in np.unique(trace.gpu.window[t.rows])},
        chain_ops=[],
        scope=True,
        launches=t.launches,
    )


def compile_scopes(
    trace: Trace,
    links: Links,
    roof: Roofline,
    order: StreamOrder,
    chains: list[FusionChain],
    bw: float | None,
    per_launch_ns: float | None,
) -> list[FusionChain]:
    """`chains` with every chain whose advice is to compile its function replaced by that function's scope
    (one chain per scope; scopes inside another dropped), by saving descending."""
    seeds = [c for c in chains if c.pattern is None and c.line_ids and c.rows]
    named = [c for c in chains if not (c.pattern is None and c.line_ids and c.rows)]
    if not seeds:
        return chains
    excluded = np.zeros(len(trace.gpu), dtype=bool)
    for c in named:
        excluded[c.all_rows] = True
    groups: dict[bytes, tuple[np.ndarray, list[FusionChain]]] = {}
    funcs, modules = function_keys(trace, links), ModuleChains(trace, links)
    for c in seeds:
        mask = scope_mask(trace, links, c, order, funcs, modules) & ~excluded
        k = np.packbits(mask).tobytes()
        groups.setdefault(k, (mask, []))[1].append(c)
    kept: list[tuple[np.ndarray, list[FusionChain]]] = []
    for mask, members in sorted(groups.values(), key=lambda g: -int(g[0].sum())):
        outer = next((g for g in kept if not (mask & ~g[0]).any()), None)
        if outer is None:
            kept.append((mask, list(members)))
        else:
            outer[1].extend(members)
    out = list(named)
    for mask, members in kept:
        totals = scope_totals(trace, roof, order, mask, bw, per_launch_ns or 0.0)
        out.append(_chain(trace, links, members, totals) if len(totals.rows) else members[0])
    return sorted(out, key=lambda c: -c.saving_ns)
