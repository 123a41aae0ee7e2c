"""Fusion savings: several estimates of what compiling a function saves, against every measured fusion fix.

    python validation/holdout/fusion_estimates.py              # the table
    python validation/holdout/fusion_estimates.py --kernels    # and each case's kernels, by name
    python validation/holdout/fusion_estimates.py --pairs      # and the H200 before/after fixtures' kernel time

`--pairs`: GPT-2 eager recorded on the H200 before and after each of its two fixes (tests/fixtures/
h200_gpt2_*.brrr.gz): the drop in GPU kernel time per step against each estimate from the `before` recording,
a check of the kernels alone, without the step time's noise.

Each case is a fusion finding of a committed recording whose advised fix (torch.compile of the function the
finding names) was timed: the hold-out workloads on an H100 (validation/holdout/SAVINGS.md) and GPT-2 eager on
an H200 (docs/validation.md, validation/results/savings_table_h200.md). The recording is analysed as
`brrrtui report` does (analyzers.analyze); the fusion chain of the case's function (the one holding the
case's line) is taken as the analysis found it: its GPU rows (`all_rows`, the scope compiling that function
fuses) are split into runs of consecutive fusable kernels on one stream, as fusion/scope_runs.py does, and
each estimate is worked out per run and summed over the runs, per step.

Per run: n kernels, T their summed time, W its wall time (first start to last end: T plus the GPU idle inside
the run), B the bytes they move, S the intermediate bytes fusing removes (fusion/scope_runs._saved_bytes,
at most B), F = B - S the fused kernel's bytes, P the peak bandwidth, L the per-launch cost
(fusion/chains.py), R = B / T the run's achieved bandwidth, Bmax the best bandwidth any kernel of the run
achieved (at most P). Estimates:

    peak      min(S/P + (n-1) L, W - F/P)       the intermediates at peak bandwidth
    achieved  min(S/R + (n-1) L, W - F/R)       the intermediates at the run's own achieved bandwidth
    time-P    T - F/P                           every kernel's time less the fused kernel's at peak
    time-best T - F/Bmax                        ... at the best bandwidth a kernel of the run achieved
    wall-P    W - F/P                           time-P, the idle gaps inside the run counted
    wall-best W - F/Bmax

each floored at 0; `this checkout` is the chain's saving as analyzers/fusion works it out (achieved/ext).
Variants (suffix): `/fb` splits a run where it crosses from forward to backward kernels
(AOTAutograd compiles the forward and the backward as two graphs, so no fused kernel spans both, and the
backward re-reads what the forward saved); `/ext` keeps F at least the run's external bytes (the inputs of
its ops that no earlier op of the run produced, plus its last op's output: a fused kernel still reads the
former and writes the latter). Nothing here is fitted: P, L and every byte count come from the analysis.
"""

from __future__ import annotations

import argparse
import collections
import os
import sys
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
if ROOT not in sys.path:
    sys.path.insert(0, ROOT)

import analyzers.analyze as analyze_mod  # noqa: E402
from analyzers.cost.opcost import OpCost  # noqa: E402
from analyzers.fusion.scope_runs import _saved_bytes  # noqa: E402
from brrrtui.recording.load import load_trace  # noqa: E402


@dataclass(frozen=True)
class Case:
    workload: str
    fix: str
    recording: str  # relative to the repository root
    line: int  # a line of the finding's function: the chain holding it is the case's
    measured_ms: float
    low: float | None  # the measured range, where repeats gave one
    high: float | None
    gpu: str
    source: str


H100 = "validation/holdout/SAVINGS.md"
H200 = "validation/results/savings_table_h200.md"
GPT2 = "validation/results/savings_gpt2_eager_h200.brrr.gz"
CASES = (
    Case("gpt2_eager", "compile Block.forward", GPT2, 39, 4.91, None, None, "H200", H200),
    Case("gpt2_eager", "compile the loss", GPT2, 98, 4.39, None, None, "H200", H200),
    Case("llama_decoder", "compile_forward", "validation/holdout/data/llama_decoder.brrr.gz", 83, 16.65, 16.38,
         16.91, "H100", H100),
    Case("llama_decoder", "compile_loss", "validation/holdout/data/llama_decoder.brrr.gz", 120, 3.44, 3.28, 3.65,
         "H100", H100),
    Case("cnn_channels_last", "compile_loss", "validation/holdout/data/cnn_channels_last.brrr.gz", 29, 2.45, 0.78,
         2.48, "H100", H100),
    Case("lstm_lm", "compile_loss", "validation/holdout/data/lstm_lm.brrr.gz", 44, 0.16, -0.02, 0.34, "H100", H100),
    Case("lstm_lm", "compile_forward", "validation/holdout/data/lstm_lm.brrr.gz", 25, 0.04, -0.08, 0.12, "H100",
         H100),
)  # fmt: skip


@dataclass(frozen=True)
class Pair:
    """A fix recorded before and after on one GPU: the drop in GPU kernel time per step is what fusing saved
    of the kernels themselves (the step time also moves with the host and the profiler)."""

    fix: str
    before: str
    after: str
    line: int


FIXTURE = "tests/fixtures/h200_gpt2_{}.brrr.gz"
PAIRS = (
    Pair(
        "compile Block.forward",
        FIXTURE.format("eager_before_compile"),
        FIXTURE.format("compile_block_after"),
        39,
    ),
    Pair("compile the loss", FIXTURE.format("eager_before_compile"), FIXTURE.format("compiled_loss"), 98),
)


@dataclass
class Captured:
    """What the analysis's fusion pass saw."""

    trace: Any
    links: Any
    roof: Any
    peak: float
    per_launch_ns: float
    chains: list[Any]
    order: Any
    per: int


def capture(path: str) -> Captured:
    """Analyse the recording as `brrrtui report` does, keeping the fusion pass's inputs and chains."""
    seen: dict[str, Any] = {}
    real = analyze_mod.fusion_chains

    def hook(trace: Any, links: Any, roof: Any, peaks: Any, per_launch_ns: Any, fusable: Any = None) -> Any:
        chains = real(trace, links, roof, peaks, per_launch_ns, fusable)
        seen.update(
            trace=trace, links=links, roof=roof, peaks=peaks, L=per_launch_ns, chains=chains, f=fusable
        )
        return chains

    analyze_mod.fusion_chains = hook  # type: ignore[assignment]
    try:
        an = analyze_mod.analyze(load_trace(path))
    finally:
        analyze_mod.fusion_chains = real
    trace = seen["trace"]
    per = an.steps_analysed if an.steps_analysed > 0 else max(1, len(trace.windows))
    return Captured(trace, seen["links"], seen["roof"], float(seen["peaks"].bytes_per_s), float(seen["L"] or 0.0),
                    seen["chains"], seen["f"].order, per)  # fmt: skip


def chain_of(cap: Captured, line: int) -> Any | None:
    """The chain (a function's scope, or a chain) holding `line`, the largest saving first."""
    for c in cap.chains:
        if any(cap.trace.lines[i].line == line for i in c.line_ids):
            return c
    return None


def backward_rows(cap: Captured) -> np.ndarray:
    """Per GPU row: its op is, or runs inside, an autograd backward node (seq >= 0 and a forward thread)."""
    ops, parent = cap.trace.ops, cap.links.op_parent
    node = (ops.seq >= 0) & (ops.fwd_tid > 0)
    inside = node.copy()
    todo = np.nonzero(~inside & (parent >= 0))[0]
    anc = parent[todo]
    while len(todo):
        hit = node[anc]
        inside[todo[hit]] = True
        more = ~hit & (parent[anc] >= 0)
        todo, anc = todo[more], parent[anc[more]]
    kop = cap.links.kernel_op
    return np.where(kop >= 0, inside[np.maximum(kop, 0)], False)


@dataclass(frozen=True)
class Run:
    rows: np.ndarray  # in stream order
    n: int
    T: float  # ns
    W: float  # ns
    B: float  # bytes (known ones)
    S: float  # intermediates saved
    ext: float  # external bytes: inputs produced outside the run + the last output
    bmax: float  # best achieved bytes/s of a kernel (at most the peak)


def _costs(cap: Captured, rows: np.ndarray) -> list[tuple[str, OpCost | None]]:
    """The run's costed ops in order, with their names, an op split over several kernels once (as
    scope_runs)."""
    op = cap.roof.cost_op[rows]
    idx, costs = cap.roof.op_costs.index, cap.roof.op_costs.costs
    out: list[tuple[str, OpCost | None]] = []
    prev = None
    for o in op.tolist():
        if o == prev:
            continue
        prev = o
        ci = int(idx[o]) if o >= 0 and len(idx) else -1
        name = cap.trace.name(int(cap.trace.ops.name[o])) if o >= 0 else ""
        out.append((name, costs[ci] if ci >= 0 else None))
    return out


WRITE_ONLY_SELF = {"aten::copy_", "aten::_copy_from", "aten::fill_", "aten::zero_"}


def external_bytes(costs: list[tuple[str, OpCost | None]]) -> float:
    """What a fused kernel of the run still moves: per op, the inputs no earlier op of the run produced
    (same shape and dtype; an op reading more same-shaped inputs than the run produced reads the rest from
    outside; a copy's or fill's destination is written, not read), at most the bytes the op moves (nll_loss reads a row's target entry, not the row); plus the last op's output."""
    produced: collections.Counter[tuple[tuple[int, ...], str]] = collections.Counter()
    ext = 0.0
    last = None
    for name, c in costs:
        if c is None:
            continue
        ins = c.inputs[1:] if name in WRITE_ONLY_SELF else c.inputs
        seen: collections.Counter[tuple[tuple[int, ...], str]] = collections.Counter()
        outside = 0.0
        for t in ins:
            if t is None:
                continue
            key = (t.shape, t.dtype)
            seen[key] += 1
            if seen[key] > produced[key]:  # more same-shaped inputs than the run produced: from outside
                outside += t.nbytes
        ext += min(outside, c.bytes) if c.bytes is not None else outside
        if c.output is not None:
            produced[(c.output.shape, c.output.dtype)] += 1
        last = c
    if last is not None and last.output is not None:
        ext += last.output.nbytes
    return ext


def runs_of(cap: Captured, rows: np.ndarray, split: np.ndarray | None) -> list[Run]:
    """The maximal runs of `rows` among the stream order (scope_runs' rule); `split`: per GPU row a flag a run
    may not change (forward / backward)."""
    order, key = cap.order.order, cap.order.key
    mask = np.zeros(len(cap.trace.gpu), dtype=bool)
    mask[rows] = True
    m = mask[order]
    cont = np.zeros(len(order), dtype=bool)
    cont[1:] = m[1:] & m[:-1] & (key[order][1:] == key[order][:-1])
    if split is not None:
        cont[1:] &= split[order][1:] == split[order][:-1]
    starts = np.nonzero(m & ~cont)[0]
    ends = np.nonzero(m & ~np.append(cont[1:], False))[0]
    gpu, kb = cap.trace.gpu, cap.roof.bytes
    out = []
    cache: dict[tuple[int, ...], tuple[float, float]] = {}
    for s, e in zip(starts.tolist(), ends.tolist(), strict=True):
        r = order[s : e + 1]
        dur = gpu.dur_ns[r].astype(np.float64)
        b = kb[r]
        known = np.isfinite(b)
        B = float(b[known].sum())
        k = tuple(int(x) for x in cap.roof.cost_op[r])
        if k not in cache:  # per distinct sequence of ops (by op row: cheap enough here)
            costs = _costs(cap, r)
            cache[k] = (_saved_bytes([c for _, c in costs]), external_bytes(costs))
        S, ext = cache[k]
        with np.errstate(divide="ignore", invalid="ignore"):
            rates = np.where(known & (dur > 0), np.where(known, b, 0.0) / (dur * 1e-9), 0.0)
        out.append(Run(r, len(r), float(dur.sum()),
                       float(gpu.start_ns[r[-1]] + gpu.dur_ns[r[-1]] - gpu.start_ns[r[0]]), B,
                       min(S, B) if known.any() else S, ext, min(float(rates.max()), cap.peak)))  # fmt: skip
    return out


Formula = Callable[[Run, float, float, float], float]  # (run, F, peak, per-launch ns) -> ns saved


def _at_peak(r: Run, f: float, p: float, lc: float) -> float:
    return min((r.B - f) / p + (r.n - 1) * lc, r.W - f / p)


def _achieved(r: Run, f: float, p: float, lc: float) -> float:
    if r.B <= 0 or r.T <= 0:
        return (r.n - 1) * lc
    rate = r.B / (r.T * 1e-9)
    return min((r.B - f) / rate * 1e9 + (r.n - 1) * lc, r.W - f / rate * 1e9)


def _time_p(r: Run, f: float, p: float, lc: float) -> float:
    return r.T - f / p


def _time_best(r: Run, f: float, p: float, lc: float) -> float:
    return r.T - f / (r.bmax * 1e-9) if r.bmax > 0 else 0.0


def _wall_p(r: Run, f: float, p: float, lc: float) -> float:
    return r.W - f / p


def _wall_best(r: Run, f: float, p: float, lc: float) -> float:
    return r.W - f / (r.bmax * 1e-9) if r.bmax > 0 else 0.0


FORMULAS: dict[str, Formula] = {
    "peak": _at_peak,
    "achieved": _achieved,
    "time-P": _time_p,
    "time-best": _time_best,
    "wall-P": _wall_p,
    "wall-best": _wall_best,
}
VARIANTS = ("", "/fb", "/ext")


def estimates(cap: Captured, chain: Any, bwd: np.ndarray) -> dict[str, float]:
    """Every formula and variant over the chain's runs, ms per step."""
    p = cap.peak * 1e-9  # bytes per ns
    out: dict[str, float] = {}
    runs = {False: runs_of(cap, np.asarray(chain.all_rows), None),
            True: runs_of(cap, np.asarray(chain.all_rows), bwd)}  # fmt: skip
    for variant in VARIANTS:
        rs = runs["fb" in variant]
        for name, fn in FORMULAS.items():
            total = 0.0
            for r in rs:
                f = r.B - r.S
                if "ext" in variant:
                    f = max(f, min(r.ext, r.B))
                total += max(0.0, fn(r, f, p, cap.per_launch_ns))
            out[name + variant] = total / cap.per / 1e6
    return out


def kernel_table(cap: Captured, chain: Any, bwd: np.ndarray) -> list[str]:
    """The chain's kernels by name: per step, count, ms, GB, achieved TB/s, forward or backward."""
    g, rows = cap.trace.gpu, np.asarray(chain.all_rows)
    agg: dict[tuple[str, bool], list[float]] = collections.defaultdict(lambda: [0.0, 0.0, 0.0])
    for r in rows.tolist():
        a = agg[(cap.trace.name(int(g.name[r])), bool(bwd[r]))]
        b = cap.roof.bytes[r]
        a[0] += 1
        a[1] += float(g.dur_ns[r])
        a[2] += float(b) if np.isfinite(b) else 0.0
    lines = []
    for (name, back), (n, d, b) in sorted(agg.items(), key=lambda kv: -kv[1][1]):
        tbs = b / d / 1e3 if d else 0.0
        lines.append(f"    {n / cap.per:6.1f}/step {d / cap.per / 1e6:7.3f} ms {b / cap.per / 1e9:7.3f} GB "
                     f"{tbs:5.2f} TB/s {'bwd' if back else 'fwd'}  {name[:90]}")  # fmt: skip
    return lines


def kernel_ms(cap: Captured) -> float:
    """GPU kernel time per step of the analysed windows."""
    return float(cap.trace.gpu.dur_ns.sum()) / cap.per / 1e6


def pair_table(caps: dict[str, Captured]) -> list[str]:
    """Each pair's drop in kernel time against every estimate made from its `before` recording."""
    rows = []
    for pr in PAIRS:
        before, after = (caps.setdefault(p, capture(os.path.join(ROOT, p))) for p in (pr.before, pr.after))
        chain = chain_of(before, pr.line)
        if chain is None:
            continue
        est = {
            "this checkout": chain.saving_ns / before.per / 1e6,
            **estimates(before, chain, backward_rows(before)),
        }
        rows.append((pr, kernel_ms(before) - kernel_ms(after), est))
    if not rows:
        return []
    names = list(rows[0][2])
    out = [
        "| estimate | " + " | ".join(f"GPT-2 {pr.fix}" for pr, _, _ in rows) + " |",
        "|---|" + "---:|" * len(rows),
    ]
    out.append("| kernel time saved (H200 pair) | " + " | ".join(f"{d:.2f}" for _, d, _ in rows) + " |")
    for n in names:
        out.append(
            f"| {n} | "
            + " | ".join(f"{e[n]:.2f} (×{d / e[n]:.2f})" if e[n] > 0 else "0" for _, d, e in rows)
            + " |"
        )
    return out


def within(measured: float, predicted: float) -> bool:
    return predicted > 0 and 0.7 <= measured / predicted <= 1.3


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--kernels", action="store_true", help="list each case's kernels by name")
    ap.add_argument("--pairs", action="store_true", help="also the H200 before/after pairs' kernel time")
    args = ap.parse_args(argv)
    caps: dict[str, Captured] = {}
    rows: list[tuple[Case, dict[str, float], str]] = []
    for case in CASES:
        path = os.path.join(ROOT, case.recording)
        if path not in caps:
            caps[path] = capture(path)
        cap = caps[path]
        chain = chain_of(cap, case.line)
        if chain is None:
            print(
                f"brrrtui: error: no fusion chain holds line {case.line} of {case.recording}", file=sys.stderr
            )
            return 1
        bwd = backward_rows(cap)
        est = {"this checkout": chain.saving_ns / cap.per / 1e6, **estimates(cap, chain, bwd)}
        runs = runs_of(cap, np.asarray(chain.all_rows), None)
        info = (f"{len(runs)} runs, {sum(r.n for r in runs) / cap.per:.0f} kernels, T {sum(r.T for r in runs) / cap.per / 1e6:.2f} ms, "
                f"W {sum(r.W for r in runs) / cap.per / 1e6:.2f} ms, B {sum(r.B for r in runs) / cap.per / 1e9:.2f} GB, "
                f"S {sum(r.S for r in runs) / cap.per / 1e9:.2f} GB, ext {sum(r.ext for r in runs) / cap.per / 1e9:.2f} GB, "
                f"P {cap.peak / 1e12:.2f} TB/s, L {cap.per_launch_ns / 1e3:.2f} us")  # fmt: skip
        rows.append((case, est, info))
        if args.kernels:
            print(f"\n{case.workload} {case.fix} ({case.gpu}, measured {case.measured_ms} ms/step): {info}")
            print("\n".join(kernel_table(cap, chain, bwd)))
    names = ["this checkout"] + [n + v for v in VARIANTS for n in FORMULAS]
    print()
    print("| estimate | " + " | ".join(f"{c.workload} {c.fix}" for c, _, _ in rows) + " | within ±30 % |")
    print("|---|" + "---:|" * len(rows) + "---:|")
    print("| measured | " + " | ".join(_measured(c) for c, _, _ in rows) + " | |")
    for n in names:
        cells, hits = [], 0
        for c, est, _ in rows:
            ok = within(c.measured_ms, est[n])
            hits += ok
            ratio = c.measured_ms / est[n] if est[n] > 0 else float("inf")
            cells.append(f"{est[n]:.2f} (×{ratio:.2f}){' ✓' if ok else ''}")
        print(f"| {n} | " + " | ".join(cells) + f" | {hits} of {len(rows)} |")
    if args.pairs:
        print()
        print("\n".join(pair_table(caps)))
    return 0


def _measured(c: Case) -> str:
    rng = f" [{c.low:.2f} … {c.high:.2f}]" if c.low is not None and c.high is not None else ""
    return f"{c.measured_ms:.2f}{rng} ({c.gpu})"


if __name__ == "__main__":
    sys.exit(main())
