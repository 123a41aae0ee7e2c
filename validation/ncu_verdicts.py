"""Ground truth for brrrtui's verdicts: Nsight Compute's speed-of-light numbers for a training script.

    python validation/ncu_verdicts.py --out $OUT                     # known_regimes.py under ncu -> ncu_kernels.json
    python validation/ncu_verdicts.py --out $OUT --record            # + brrrtui record/report + comparison
    python validation/ncu_verdicts.py --script examples/train_gpt.py --report run.json --out $OUT -- --steps 8
    python validation/ncu_verdicts.py --csv ncu.csv --report r.json  # re-analyse saved files (no GPU)
    python validation/ncu_verdicts.py --smoke                        # CPU: the sample CSV in tests/fixtures,
                                                                     # against a synthetic report (both rules)

1. ncu profiles the kernels of a short run of --script (default examples/known_regimes.py: setup + --steps
   steps with --tiny-ops tiny ops, ~190 kernels; arguments after `--` go to the script instead) with
   `ncu --clock-control none --target-processes all --metrics METRICS --launch-skip S --launch-count C
   --export FILE`, and the report is printed with `ncu --import FILE --csv --page raw --print-units base
   --print-kernel-base demangled`: one row per kernel, full demangled names as Kineto spells them.
2. Steady state only: S and C come from a kernel count per step, N. S = --skip-steps x N (default 5 steps:
   past CUDA/cuBLAS initialisation and the first steps' allocator growth), C = --profile-steps x N (default
   one step: ncu's window then holds each kernel of a step once, whatever step boundary it starts at), capped
   by --max-kernels. N is --kernels-per-step, else counted from --report (kernel calls in the analysed windows
   / steps analysed, copies and memsets left out: ncu counts kernels only), else the table below.
   --launch-skip / --launch-count set S and C directly. The script must run > S + C kernels: give it
   --steps >= skip-steps + profile-steps + 2 (ncu_verdicts.py says so when it can tell).

       workload (script)                 kernels/step   --skip-steps 5  one step   ncu time, one step
       GPT-2 eager  examples/train_gpt.py      ~970      S ~4850        C ~970     ~2-3 min (-- --steps 8)
       HF GPT-2     workloads/hf_gpt2.py       ~600      S ~3000        C ~600     ~1-2 min (-- --steps 8)
       HF BERT      workloads/hf_bert.py       ~700      S ~3500        C ~700     ~1-2 min (-- --steps 8)
       ResNet-50    workloads/resnet50.py      ~500      S ~2500        C ~500     ~1-2 min (-- --steps 8)

   (counts per step from brrrtui's H200 recordings; the times are estimates: ncu replays each profiled kernel
   a few times, so --max-kernels is the knob for a time budget, at the price of part of a step.)
3. Each kernel gets ncu's speed-of-light verdict (`classify_sol`), each kernel name the verdict that holds
   most of its time (`aggregate_by_name`). Written to ncu_kernels.json.
4. With --report (brrrtui's `report --json` output, or a .brrr recording to report on) or --record, brrrtui's
   verdicts are compared two ways, written to ncu_compare.json:
   a. `compare`: per kernel name, brrrtui's verdict against ncu's SOL verdict, agreement weighted by GPU time
      (target >= 95%); for memory-bound kernels, brrrtui's bytes estimate against ncu's DRAM bytes; for
      known_regimes.py, the `# expect:` comment of each line against brrrtui's line verdict.
   b. `compare_ground_truth` (the issue's ground-truth rule, below): agreement by brrrtui GPU time and the
      disagreeing kernels (name, ncu numbers, brrrtui verdict and roof, GPU time share); also written alone
      to ncu_ground_truth.json.

The SOL rule (ncu's own SOLBottleneck rule, and the measurements on an H200 below), `classify_sol`:

    SM% = sm__throughput (% of peak), MEM% = gpu__compute_memory_throughput (% of peak, DRAM/L2/L1)

    TENSOR% >= 60                    -> compute   (8192^3 bf16 matmul on the H200: SM 93%, memory 94.5%,
                                                   tensor pipe 97%: the tensor cores are the busy unit)
    SM% >= MEM% and SM% >= 60        -> compute
    MEM% > SM%  and MEM% >= 60       -> memory    (1 GiB pointwise ops: memory 88%, SM 6-20%)
    otherwise (both below 60%)       -> latency   (2 µs kernels on 32 elements: < 1% of both)

ncu's rule calls throughput under 60% of peak on both "latency issues"; brrrtui calls such kernels (and the
GPU idle around them) overhead, so "latency" is compared as brrrtui's "overhead".

The ground-truth rule (the issue's), `ground_truth` per launch, the verdict holding most of a name's time:

    TENSOR% >= 50                                        -> compute
    MEM% >= 60 and MEM% > SM%, or DRAM >= 2.4 TB/s       -> memory     (DRAM = (read + write bytes) / duration)
    anything else                                        -> under-utilised: either verdict is right, provided
                                                            brrrtui shows the kernel below 60% of its roof
    brrrtui agrees: compute -> brrrtui "compute"; memory -> brrrtui "memory"; under-utilised -> brrrtui's roof
    fraction < 0.6, whatever its verdict (no roof known: agrees only when brrrtui says "overhead").

The report JSON (schema 2) carries no roof fraction per kernel; unless a kernel has "roof_fraction" (or
"roof"), it is computed here as max(achieved FLOP/s / device.peak_flops_per_s, achieved bytes/s /
device.peak_bytes_per_s), and the output says "roof_source": "computed". The JSON's FLOP roof is the
tensor-core one, so for a kernel on the fp32 units this fraction is lower than brrrtui's own (which uses the
fp32 roof); an SM-bound fp32 kernel (SM% >= 60, tensor pipe idle) is "under-utilised" by the issue's rule.
"""

from __future__ import annotations

import argparse
import csv
import io
import json
import os
import re
import shutil
import subprocess
import sys
import time
import tokenize
from collections import defaultdict
from dataclasses import asdict, dataclass
from typing import Any

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SCRIPT = os.path.join(ROOT, "examples", "known_regimes.py")
# kernels per step, by script name, for --skip-steps when there is no report to count them in (H200 recordings)
KERNELS_PER_STEP = {"train_gpt.py": 970, "hf_gpt2.py": 600, "hf_bert.py": 700, "resnet50.py": 500}
SAMPLE_CSV = os.path.join(ROOT, "tests", "fixtures", "ncu_sample.csv")

DURATION = "gpu__time_duration.sum"
DRAM_READ = "dram__bytes_read.sum"
DRAM_WRITE = "dram__bytes_write.sum"
SM_PCT = "sm__throughput.avg.pct_of_peak_sustained_elapsed"
MEM_PCT = "gpu__compute_memory_throughput.avg.pct_of_peak_sustained_elapsed"
# HMMA is the tensor pipe of mma.sync (Ampere-style kernels); Hopper's wgmma kernels (cuBLAS nvjet/sm90_*)
# run on the GMMA pipe. ncu has the metric the chip has; `available_metrics` drops the other.
TENSOR_PCT = (
    "sm__pipe_tensor_op_hmma_cycles_active.avg.pct_of_peak_sustained_active",
    "sm__pipe_tensor_op_gmma_cycles_active.avg.pct_of_peak_sustained_active",
)
CORE_METRICS = (DURATION, DRAM_READ, DRAM_WRITE, SM_PCT, MEM_PCT)
METRICS = CORE_METRICS + TENSOR_PCT

THRESHOLD_PCT = 60.0
NCU_TO_BRRRTUI = {"compute": "compute", "memory": "memory", "latency": "overhead"}
# the ground-truth rule (module docstring)
GT_TENSOR_PCT = 50.0
GT_MEM_PCT = 60.0
GT_DRAM_BYTES_PER_S = 2.4e12
GT_ROOF = 0.6
GT_RULE = (
    "tensor pipe >= 50% -> compute; memory throughput >= 60% of peak and above SM throughput, or DRAM >= "
    "2.4 TB/s -> memory; else under-utilised: agrees when brrrtui's roof fraction < 0.6"
)
REGIMES = ("compute", "memory", "overhead")

# ncu's units (--print-units auto writes scaled ones; base writes nsecond / byte / %)
UNIT_SCALE = {
    "": 1.0, "%": 1.0, "nsecond": 1.0, "ns": 1.0, "usecond": 1e3, "us": 1e3, "msecond": 1e6, "ms": 1e6,
    "second": 1e9, "s": 1e9, "byte": 1.0, "Kbyte": 1e3, "Mbyte": 1e6, "Gbyte": 1e9, "Tbyte": 1e12,
    "KB": 1e3, "MB": 1e6, "GB": 1e9, "KiB": 2**10, "MiB": 2**20, "GiB": 2**30,
}  # fmt: skip
"""Multiplier to the base unit (ns for time, bytes for sizes)."""


@dataclass(frozen=True)
class NcuKernel:
    """One profiled kernel launch."""

    id: int
    name: str
    duration_ns: float | None
    dram_read_bytes: float | None
    dram_write_bytes: float | None
    sm_pct: float | None
    mem_pct: float | None
    tensor_pct: float | None  # the highest of the tensor-pipe metrics present
    regime: str  # compute | memory | latency | unknown

    @property
    def dram_bytes(self) -> float | None:
        if self.dram_read_bytes is None or self.dram_write_bytes is None:
            return None
        return self.dram_read_bytes + self.dram_write_bytes


@dataclass(frozen=True)
class NcuName:
    """All launches of one kernel name."""

    name: str
    calls: int
    duration_ns: float
    dram_bytes: float | None
    regime: str  # the verdict holding most of the name's time
    regime_share: float  # that verdict's share of the name's time
    sm_pct: float | None  # time-weighted means
    mem_pct: float | None
    tensor_pct: float | None
    # the launches with the name's verdict (a pointwise kernel runs on 1 GiB and on 32 elements alike)
    regime_calls: int
    regime_duration_ns: float
    regime_dram_bytes: float | None


def parse_number(text: str | None) -> float | None:
    """ncu's numbers: "1,234,567", "93.10", "4.0e-05"; "n/a" and "" are unknown."""
    if text is None:
        return None
    s = text.strip().replace(",", "")
    if not s or s.lower() in ("n/a", "nan", "-"):
        return None
    try:
        return float(s)
    except ValueError:
        return None


def classify_sol(
    sm_pct: float | None,
    mem_pct: float | None,
    threshold: float = THRESHOLD_PCT,
    tensor_pct: float | None = None,
) -> str:
    """ncu's speed-of-light verdict for one kernel (see the module docstring). A matmul keeps both SM and
    memory throughput high on the H200 (memory 94.5% vs SM 93.3%, measured), so the tensor pipe decides."""
    if tensor_pct is not None and tensor_pct >= threshold:
        return "compute"
    if sm_pct is None or mem_pct is None:
        return "unknown"
    if sm_pct >= mem_pct and sm_pct >= threshold:
        return "compute"
    if mem_pct > sm_pct and mem_pct >= threshold:
        return "memory"
    return "latency"


def parse_ncu_csv(text: str, threshold: float = THRESHOLD_PCT) -> list[NcuKernel]:
    """`ncu --csv --page raw` output -> one NcuKernel per row.

    The header row starts with "ID" and names the metrics as columns; the next row holds their units when
    its ID is empty. Lines before the header (==PROF== messages, the app's own output) are skipped.
    """
    lines = text.splitlines()
    start = next((i for i, ln in enumerate(lines) if ln.startswith('"ID",') or ln.startswith("ID,")), None)
    if start is None:
        raise ValueError('no ncu CSV header (a line starting with "ID",) in the input')
    rows = list(csv.reader(io.StringIO("\n".join(lines[start:]))))
    header = rows[0]
    col = {name: i for i, name in enumerate(header)}
    name_col = col.get("Kernel Name", col.get("Function Name"))
    if name_col is None:
        raise ValueError("ncu CSV has no 'Kernel Name' column")
    body = rows[1:]
    units = [""] * len(header)
    if body and body[0] and body[0][0].strip() == "":
        units = body[0] + [""] * (len(header) - len(body[0]))
        body = body[1:]

    def value(row: list[str], metric: str) -> float | None:
        i = col.get(metric)
        if i is None or i >= len(row):
            return None
        v = parse_number(row[i])
        if v is None:
            return None
        unit = units[i].strip()
        if unit not in UNIT_SCALE:
            raise ValueError(f"unknown unit {unit!r} for {metric}")
        return v * UNIT_SCALE[unit]

    kernels = []
    for row in body:
        if len(row) <= name_col or not row[0].strip().isdigit():
            continue  # ==PROF== lines or app output after the table
        sm, mem = value(row, SM_PCT), value(row, MEM_PCT)
        tensors = [t for t in (value(row, m) for m in TENSOR_PCT) if t is not None]
        kernels.append(
            NcuKernel(
                id=int(row[0]),
                name=row[name_col],
                duration_ns=value(row, DURATION),
                dram_read_bytes=value(row, DRAM_READ),
                dram_write_bytes=value(row, DRAM_WRITE),
                sm_pct=sm,
                mem_pct=mem,
                tensor_pct=max(tensors) if tensors else None,
                regime=classify_sol(sm, mem, threshold, max(tensors) if tensors else None),
            )
        )
    return kernels


def _weighted_mean(pairs: list[tuple[float | None, float]]) -> float | None:
    known = [(v, w) for v, w in pairs if v is not None]
    total = sum(w for _, w in known)
    if not known or total <= 0:
        return None
    return sum(v * w for v, w in known) / total


def _sum_known(values: list[float | None]) -> float | None:
    """The sum, or None when any value is unknown."""
    return None if any(v is None for v in values) else sum(v for v in values if v is not None)


def aggregate_by_name(kernels: list[NcuKernel]) -> dict[str, NcuName]:
    """Group launches by name; the name's verdict is the one holding most of its time."""
    groups: dict[str, list[NcuKernel]] = defaultdict(list)
    for k in kernels:
        groups[k.name].append(k)
    out = {}
    for name, ks in groups.items():
        dur = [k.duration_ns or 0.0 for k in ks]
        total = sum(dur)
        by_regime: dict[str, float] = defaultdict(float)
        for k, d in zip(ks, dur, strict=True):
            by_regime[k.regime] += d
        # most time wins; ties (and all-zero durations) go to the most launches, then the name order
        counts = defaultdict(int)
        for k in ks:
            counts[k.regime] += 1
        regime = max(by_regime, key=lambda r: (by_regime[r], counts[r], r))
        dram = [k.dram_bytes for k in ks]
        mine = [k for k in ks if k.regime == regime]
        mine_dram = [k.dram_bytes for k in mine]
        out[name] = NcuName(
            name=name,
            calls=len(ks),
            duration_ns=total,
            dram_bytes=_sum_known(dram),
            regime=regime,
            regime_share=by_regime[regime] / total if total > 0 else 1.0,
            sm_pct=_weighted_mean([(k.sm_pct, d) for k, d in zip(ks, dur, strict=True)]),
            mem_pct=_weighted_mean([(k.mem_pct, d) for k, d in zip(ks, dur, strict=True)]),
            tensor_pct=_weighted_mean([(k.tensor_pct, d) for k, d in zip(ks, dur, strict=True)]),
            regime_calls=len(mine),
            regime_duration_ns=by_regime[regime],
            regime_dram_bytes=_sum_known(mine_dram),
        )
    return out


# --- the ground-truth rule ------------------------------------------------------------------------------


def dram_bytes_per_s(k: NcuKernel) -> float | None:
    if k.dram_bytes is None or not k.duration_ns:
        return None
    return k.dram_bytes / (k.duration_ns * 1e-9)


def ground_truth(k: NcuKernel) -> str:
    """The issue's verdict for one launch: compute | memory | under (under-utilised) | unknown."""
    if k.tensor_pct is not None and k.tensor_pct >= GT_TENSOR_PCT:
        return "compute"
    bw = dram_bytes_per_s(k)
    if bw is not None and bw >= GT_DRAM_BYTES_PER_S:
        return "memory"
    if k.mem_pct is not None and k.mem_pct >= GT_MEM_PCT and (k.sm_pct is None or k.mem_pct > k.sm_pct):
        return "memory"
    if k.sm_pct is None and k.mem_pct is None and bw is None:
        return "unknown"
    return "under"


@dataclass(frozen=True)
class GtName:
    """All launches of one kernel name under the ground-truth rule."""

    name: str
    calls: int
    duration_ns: float
    verdict: str  # the ground-truth verdict holding most of the name's time
    verdict_share: float
    sol: str  # the SOL verdict (classify_sol) holding most of its time
    sm_pct: float | None  # time-weighted means
    mem_pct: float | None
    tensor_pct: float | None
    dram_bytes_per_s: float | None  # all launches' DRAM bytes over their time


def ground_truth_by_name(kernels: list[NcuKernel]) -> dict[str, GtName]:
    groups: dict[str, list[NcuKernel]] = defaultdict(list)
    for k in kernels:
        groups[k.name].append(k)
    sol = aggregate_by_name(kernels)
    out = {}
    for name, ks in groups.items():
        dur = [k.duration_ns or 0.0 for k in ks]
        total = sum(dur)
        by: dict[str, float] = defaultdict(float)
        counts: dict[str, int] = defaultdict(int)
        for k, d in zip(ks, dur, strict=True):
            by[ground_truth(k)] += d
            counts[ground_truth(k)] += 1
        verdict = max(by, key=lambda r: (by[r], counts[r], r))
        dram = _sum_known([k.dram_bytes for k in ks])
        out[name] = GtName(
            name=name,
            calls=len(ks),
            duration_ns=total,
            verdict=verdict,
            verdict_share=by[verdict] / total if total > 0 else 1.0,
            sol=sol[name].regime,
            sm_pct=sol[name].sm_pct,
            mem_pct=sol[name].mem_pct,
            tensor_pct=sol[name].tensor_pct,
            dram_bytes_per_s=dram / (total * 1e-9) if dram is not None and total > 0 else None,
        )
    return out


def roof_fraction(k: dict[str, Any], device: dict[str, Any]) -> tuple[float | None, str]:
    """brrrtui's roof fraction for a report kernel: its own when the JSON has one, else computed from the
    achieved rates and the device's peaks (tensor FLOP roof; see the module docstring)."""
    for key in ("roof_fraction", "roof"):
        if k.get(key) is not None:
            return float(k[key]), "report"
    parts = []
    for rate, peak in (
        ("achieved_flops_per_s", "peak_flops_per_s"),
        ("achieved_bytes_per_s", "peak_bytes_per_s"),
    ):
        if k.get(rate) is not None and device.get(peak):
            parts.append(float(k[rate]) / float(device[peak]))
    return (max(parts), "computed") if parts else (None, "unknown")


def gt_agrees(verdict: str, regime: str | None, roof: float | None) -> bool | None:
    """None: not scored (no ncu numbers)."""
    if verdict in ("compute", "memory"):
        return regime == verdict
    if verdict == "under":
        return roof < GT_ROOF if roof is not None else regime == "overhead"
    return None


def compare_ground_truth(ncu: list[NcuKernel], report: dict[str, Any]) -> dict[str, Any]:
    """brrrtui's kernel verdicts against the ground-truth rule, weighted by brrrtui's GPU time."""
    gt = ground_truth_by_name(ncu)
    kernels = report.get("kernels", [])
    device = report.get("device") or {}
    matches = match_names([k["name"] for k in kernels], list(gt))
    total = sum(float(k.get("gpu_ns") or 0) for k in kernels)
    rows = []
    for k in kernels:
        n = gt.get(matches.get(k["name"], ""))
        if n is None:
            continue
        roof, source = roof_fraction(k, device)
        gpu_ns = float(k.get("gpu_ns") or 0)
        rows.append(_gt_row(k, n, roof, source, gpu_ns, total))
    scored = [r for r in rows if r["agree"] is not None]
    scored_ns = sum(r["gpu_ns"] for r in scored)
    agree_ns = sum(r["gpu_ns"] for r in scored if r["agree"])
    by_verdict: dict[str, float] = defaultdict(float)
    for r in scored:
        by_verdict[r["ncu"]] += r["gpu_ns"]
    return {
        "rule": GT_RULE,
        "agreement": agree_ns / scored_ns if scored_ns else None,
        "scored_gpu_share": scored_ns / total if total else None,
        "kernels_scored": len(scored),
        "kernels_in_report": len(kernels),
        "gpu_share_by_verdict": {v: ns / scored_ns for v, ns in by_verdict.items()} if scored_ns else {},
        "roof_source": sorted({r["roof_source"] for r in rows}),
        "disagreeing": sorted((r for r in scored if not r["agree"]), key=lambda r: -r["gpu_ns"]),
        "kernels": rows,
    }


def _gt_row(
    k: dict[str, Any], n: GtName, roof: float | None, source: str, gpu_ns: float, total: float
) -> dict[str, Any]:
    def r1(v: float | None) -> float | None:
        return None if v is None else round(v, 1)

    return {
        "name": k["name"],
        "short": short_name(k["name"]),
        "gpu_ns": gpu_ns,
        "gpu_share": gpu_ns / total if total else None,
        "brrrtui": k.get("regime"),
        "roof": roof,
        "roof_source": source,
        "ncu": n.verdict,
        "ncu_share": n.verdict_share,
        "ncu_sol": n.sol,
        "sm_pct": r1(n.sm_pct),
        "mem_pct": r1(n.mem_pct),
        "tensor_pct": r1(n.tensor_pct),
        "dram_tb_per_s": None if n.dram_bytes_per_s is None else round(n.dram_bytes_per_s / 1e12, 3),
        "ncu_calls": n.calls,
        "ncu_ns": n.duration_ns,
        "agree": gt_agrees(n.verdict, k.get("regime"), roof),
    }


# --- names -------------------------------------------------------------------------------------------------


def normalize_name(name: str) -> str:
    """Kineto and ncu spell one demangled name with different spaces; compare without them."""
    s = name.strip()
    if s.startswith("void "):
        s = s[5:]
    return re.sub(r"\s+", "", s)


def strip_params(name: str) -> str:
    """`f<T>(int, T)` -> `f<T>`: the name up to the parameter list that follows the template arguments."""
    depth = 0
    for i, ch in enumerate(name):
        if ch == "<":
            depth += 1
        elif ch == ">":
            depth -= 1
        elif ch == "(" and depth == 0 and i > 0:
            # "(anonymous namespace)::" is part of the qualified name, not a parameter list
            if name.startswith("(anonymousnamespace)", i) or name.startswith("(anonymous namespace)", i):
                continue
            return name[:i]
    return name


def base_name(name: str) -> str:
    """`at::native::vectorized_elementwise_kernel<4, ...>(...)` -> `vectorized_elementwise_kernel`."""
    s = strip_params(normalize_name(name))
    s = s.split("<", 1)[0]
    return s.rsplit("::", 1)[-1]


_WORD = re.compile(r"[A-Za-z_]\w*|\d+")
_NOT_SIGNIFICANT = frozenset(
    "at native void std const operator lambda instance anonymous namespace unnamed ul char array int long "
    "TensorIteratorBase TensorIterator fusion".split()  # cuDNN: Kineto's cudnn::fusion::f is ncu's cudnn::f
)


_SPELLING = (  # how ncu and Kineto spell one template argument differently
    (
        re.compile(r"\((?:[\w:]+)\)(?=-?\d)"),
        "",
    ),  # casts: ncu's (int)8, (bool)1; Kineto's (at::native::NormType)1
    (re.compile(r"\b(\d+)(?:ull|ul|u|ll|l)\b"), r"\1"),  # integer suffixes: 32u -> 32
    (re.compile(r"\btrue\b"), "1"),
    (re.compile(r"\bfalse\b"), "0"),
)


def signature(name: str) -> tuple[str, ...]:
    """The words that identify a kernel however it is spelt. Kineto writes
    `void at::native::vectorized_elementwise_kernel<4, at::native::sqrt_kernel_cuda(...)::{lambda()#2}...,
    std::array<char*, 2ul> >(int, ...)`; ncu (H200, 2025.3) writes `void at::vectorized_elementwise_kernel<4,
    at::sqrt_kernel_cuda(...)::[lambda() (instance 2)]..., std::array<char *, 2>>(int, T2, T3)`. Both give
    (vectorized_elementwise_kernel, 4, sqrt_kernel_cuda, 2, ...)."""
    spaced = name.strip().removeprefix("void ")  # keep the spaces: "instance 2" must stay two words
    for pattern, repl in _SPELLING:
        spaced = pattern.sub(repl, spaced)
    return tuple(w for w in _WORD.findall(strip_params(spaced)) if w not in _NOT_SIGNIFICANT)


def match_names(report_names: list[str], ncu_names: list[str]) -> dict[str, str]:
    """brrrtui kernel name -> ncu kernel name: exact (spaces aside), then without parameters, then by
    signature (namespaces and lambda spelling aside), then by a base name that only one ncu kernel has."""
    full = {normalize_name(n): n for n in ncu_names}
    noparams: dict[str, list[str]] = defaultdict(list)
    signatures: dict[tuple[str, ...], list[str]] = defaultdict(list)
    bases: dict[str, list[str]] = defaultdict(list)
    for n in ncu_names:
        noparams[strip_params(normalize_name(n))].append(n)
        signatures[signature(n)].append(n)
        bases[base_name(n)].append(n)
    out = {}
    for r in report_names:
        key = normalize_name(r)
        if key in full:
            out[r] = full[key]
        elif len(noparams.get(strip_params(key), [])) == 1:
            out[r] = noparams[strip_params(key)][0]
        elif len(set(signatures.get(signature(r), []))) == 1:
            out[r] = signatures[signature(r)][0]
        elif len(bases.get(base_name(r), [])) == 1:
            out[r] = bases[base_name(r)][0]
    return out


_NOISE = re.compile(
    r"at::native::|\(anonymousnamespace\)::|,?std::array<char\*,\d+ul>|binary_internal::"
    r"|\(at::TensorIteratorBase&\)(::\{lambda\([^)]*\)#\d+\}(::operator\(\)\(\)const)?)*"
)


def short_name(name: str, width: int = 72) -> str:
    """A readable label: namespaces, iterator lambdas and std::array arguments removed, then cut."""
    s = _NOISE.sub("", strip_params(normalize_name(name)))
    return s if len(s) <= width else s[: width - 1] + "…"


# --- expected verdicts --------------------------------------------------------------------------------------

EXPECT_RE = re.compile(r"^#\s*expect:\s*(compute|memory|overhead)\s*$")


def expected_lines(path: str) -> dict[int, str]:
    """Line number -> expected regime, from trailing `# expect: REGIME` comments (real comments only)."""
    out = {}
    with open(path, encoding="utf-8") as f:
        for tok in tokenize.generate_tokens(f.readline):
            if tok.type == tokenize.COMMENT:
                m = EXPECT_RE.match(tok.string)
                if m:
                    out[tok.start[0]] = m.group(1)
    return out


# --- comparison ---------------------------------------------------------------------------------------------


BYTES_KEYS = (
    "name",
    "bandwidth_ratio",
    "bytes_per_call_ratio",
    "brrrtui_bytes_per_call",
    "ncu_dram_bytes_per_call",
)


def compare(
    ncu: list[NcuKernel],
    report: dict[str, Any],
    expected: dict[int, str] | None = None,
    script: str = "known_regimes.py",
) -> dict[str, Any]:
    """brrrtui's report against ncu: kernel verdicts (GPU-time weighted), bytes, and line verdicts."""
    by_name = aggregate_by_name(ncu)
    kernels = report.get("kernels", [])
    matches = match_names([k["name"] for k in kernels], list(by_name))
    rows = []
    agree_ns = matched_ns = total_ns = 0.0
    agree_ncu_ns = matched_ncu_ns = 0.0
    for k in kernels:
        gpu_ns = float(k.get("gpu_ns") or 0)
        total_ns += gpu_ns
        ncu_name = matches.get(k["name"])
        row: dict[str, Any] = {
            "name": k["name"],
            "gpu_ns": gpu_ns,
            "calls": k.get("calls"),
            "brrrtui": k.get("regime"),
            "ncu_name": ncu_name,
        }
        if ncu_name is not None:
            n = by_name[ncu_name]
            want = NCU_TO_BRRRTUI.get(n.regime)
            agree = want is not None and k.get("regime") == want
            row.update(
                ncu=n.regime,
                expected=want,
                agree=agree,
                ncu_ns=n.duration_ns,
                ncu_calls=n.calls,
                sm_pct=n.sm_pct,
                mem_pct=n.mem_pct,
                tensor_pct=n.tensor_pct,
            )
            if want is not None:
                matched_ns += gpu_ns
                matched_ncu_ns += n.duration_ns
                if agree:
                    agree_ns += gpu_ns
                    agree_ncu_ns += n.duration_ns
            if n.regime == "memory":
                row.update(_bytes_check(k, n))
        rows.append(row)
    rows.sort(key=lambda r: -r["gpu_ns"])

    lines = _compare_lines(report.get("lines", []), expected or {}, script)
    bytes_rows = [r for r in rows if r.get("bandwidth_ratio") is not None or r.get("bytes_per_call_ratio")]
    return {
        "kernel_agreement": agree_ns / matched_ns if matched_ns else None,
        "kernel_agreement_by_ncu_time": agree_ncu_ns / matched_ncu_ns if matched_ncu_ns else None,
        "matched_gpu_share": matched_ns / total_ns if total_ns else None,
        "kernels_matched": sum(1 for r in rows if r.get("ncu_name")),
        "kernels_in_report": len(rows),
        "kernels": rows,
        "bytes": [{k: r.get(k) for k in BYTES_KEYS} for r in bytes_rows],
        "line_agreement": lines["agreement"],
        "lines": lines["rows"],
        "target": 0.95,
    }


def _bytes_check(k: dict[str, Any], n: NcuName) -> dict[str, Any]:
    """brrrtui's bytes (inputs + outputs from shapes) against ncu's DRAM bytes for one memory-bound name.

    ncu's side counts only the name's memory-bound launches, so a tiny launch of the same kernel does not
    dilute it. bandwidth_ratio: brrrtui's achieved bytes/s over ncu's DRAM bytes/s; it does not depend on
    how many launches each run had. bytes_per_call_ratio: brrrtui's bytes per call over ncu's DRAM bytes
    per call, when the report carries `bytes` and `calls`.
    """
    out: dict[str, Any] = {}
    if n.regime_dram_bytes is None or n.regime_duration_ns <= 0 or n.regime_calls <= 0:
        return out
    ncu_bw = n.regime_dram_bytes / (n.regime_duration_ns / 1e9)
    if k.get("achieved_bytes_per_s") and ncu_bw > 0:
        out["bandwidth_ratio"] = k["achieved_bytes_per_s"] / ncu_bw
    out["ncu_dram_bytes_per_call"] = n.regime_dram_bytes / n.regime_calls
    if k.get("bytes") and k.get("calls") and n.regime_dram_bytes > 0:
        out["brrrtui_bytes_per_call"] = k["bytes"] / k["calls"]
        out["bytes_per_call_ratio"] = out["brrrtui_bytes_per_call"] / out["ncu_dram_bytes_per_call"]
    return out


def _compare_lines(lines: list[dict[str, Any]], expected: dict[int, str], script: str) -> dict[str, Any]:
    base = os.path.basename(script)
    got = {int(r["line"]): r for r in lines if os.path.basename(str(r.get("file", ""))) == base}
    rows = []
    for line, want in sorted(expected.items()):
        r = got.get(line)
        rows.append(
            {
                "line": line,
                "expected": want,
                "got": r.get("regime") if r else None,
                "agree": bool(r) and r.get("regime") == want,
                "gpu_ns": r.get("gpu_ns") if r else None,
                "idle_ns": r.get("idle_ns") if r else None,
            }
        )
    for line, r in sorted(got.items()):
        if line not in expected:
            rows.append(
                {
                    "line": line,
                    "expected": None,
                    "got": r.get("regime"),
                    "agree": None,
                    "gpu_ns": r.get("gpu_ns"),
                    "idle_ns": r.get("idle_ns"),
                }
            )
    scored = [r for r in rows if r["expected"] is not None]
    return {"agreement": sum(r["agree"] for r in scored) / len(scored) if scored else None, "rows": rows}


# --- printing -----------------------------------------------------------------------------------------------


def _pct(v: float | None) -> str:
    return "  —  " if v is None else f"{v:5.1f}"


def format_ncu(by_name: dict[str, NcuName]) -> str:
    out = [
        "| kernel | calls | total µs | DRAM MB | SM% | Mem% | Tensor% | ncu verdict |",
        "|---|---:|---:|---:|---:|---:|---:|---|",
    ]
    for n in sorted(by_name.values(), key=lambda n: -n.duration_ns):
        dram = "—" if n.dram_bytes is None else f"{n.dram_bytes / 1e6:.1f}"
        share = "" if n.regime_share == 1.0 else f" ({n.regime_share:.1%} of its time)"
        out.append(
            f"| {short_name(n.name)} | {n.calls} | {n.duration_ns / 1e3:.1f} | {dram} | {_pct(n.sm_pct)} "
            f"| {_pct(n.mem_pct)} | {_pct(n.tensor_pct)} | {n.regime}{share} |"
        )
    return "\n".join(out)


def format_compare(c: dict[str, Any]) -> str:
    def pct(v: float | None) -> str:
        return "—" if v is None else f"{v:.1%}"

    out = ["| kernel | brrrtui µs | brrrtui | ncu | agree |", "|---|---:|---|---|---|"]
    for r in c["kernels"]:
        agree = "" if r.get("ncu_name") is None else ("yes" if r.get("agree") else "NO")
        out.append(
            f"| {short_name(r['name'])} | {r['gpu_ns'] / 1e3:.1f} | {r['brrrtui']} | {r.get('ncu', 'unmatched')} | {agree} |"
        )
    out.append("")
    out.append(
        f"kernel agreement (brrrtui GPU time) {pct(c['kernel_agreement'])}, by ncu time "
        f"{pct(c['kernel_agreement_by_ncu_time'])}; target {c['target']:.0%}; "
        f"{c['kernels_matched']}/{c['kernels_in_report']} names matched, {pct(c['matched_gpu_share'])} of GPU time"
    )
    if c["bytes"]:
        out += [
            "",
            "| memory-bound kernel | brrrtui/ncu bandwidth | brrrtui/ncu bytes per call |",
            "|---|---:|---:|",
        ]
        for b in c["bytes"]:
            bw = "—" if b["bandwidth_ratio"] is None else f"{b['bandwidth_ratio']:.3f}"
            pc = "—" if b["bytes_per_call_ratio"] is None else f"{b['bytes_per_call_ratio']:.3f}"
            out.append(f"| {short_name(b['name'])} | {bw} | {pc} |")
    if c["lines"]:
        out += [
            "",
            "| line | expected | brrrtui | agree | gpu µs | idle µs |",
            "|---:|---|---|---|---:|---:|",
        ]
        for r in c["lines"]:
            agree = "" if r["agree"] is None else ("yes" if r["agree"] else "NO")
            g = "—" if r["gpu_ns"] is None else f"{r['gpu_ns'] / 1e3:.1f}"
            i = "—" if r["idle_ns"] is None else f"{r['idle_ns'] / 1e3:.1f}"
            out.append(
                f"| {r['line']} | {r['expected'] or ''} | {r['got'] or 'missing'} | {agree} | {g} | {i} |"
            )
        out.append(f"\nline agreement {pct(c['line_agreement'])}")
    return "\n".join(out)


def format_ground_truth(g: dict[str, Any], top: int = 12) -> str:
    def pct(v: float | None) -> str:
        return "—" if v is None else f"{v:.1%}"

    def num(v: float | None, fmt: str = "{:.1f}") -> str:
        return "—" if v is None else fmt.format(v)

    shares = ", ".join(f"{v} {pct(s)}" for v, s in sorted(g["gpu_share_by_verdict"].items()))
    out = [
        f"ground truth ({g['rule']})",
        f"agreement (brrrtui GPU time) {pct(g['agreement'])} over {g['kernels_scored']}/{g['kernels_in_report']}"
        f" kernel names, {pct(g['scored_gpu_share'])} of GPU time; ncu's verdicts by that time: {shares};"
        f" roof: {'/'.join(g['roof_source']) or '—'}",
    ]
    if g["disagreeing"]:
        out += [
            "| disagreeing kernel | GPU share | brrrtui | roof | ncu | SM% | Mem% | Tensor% | DRAM TB/s |",
            "|---|---:|---|---:|---|---:|---:|---:|---:|",
        ]
        for r in g["disagreeing"][:top]:
            out.append(
                f"| {short_name(r['name'], 60)} | {pct(r['gpu_share'])} | {r['brrrtui']} | {num(r['roof'], '{:.2f}')}"
                f" | {r['ncu']} | {num(r['sm_pct'])} | {num(r['mem_pct'])} | {num(r['tensor_pct'])}"
                f" | {num(r['dram_tb_per_s'], '{:.2f}')} |"
            )
        if len(g["disagreeing"]) > top:
            out.append(f"(+{len(g['disagreeing']) - top} more in ncu_ground_truth.json)")
    return "\n".join(out)


# --- running ncu and brrrtui --------------------------------------------------------------------------------


def available_metrics(ncu: str, wanted: tuple[str, ...]) -> tuple[list[str], list[str]]:
    """(metrics the device has, metrics dropped); keeps all when the query itself fails."""
    try:
        proc = subprocess.run([ncu, "--query-metrics"], capture_output=True, text=True, timeout=120)
    except (OSError, subprocess.TimeoutExpired):
        return list(wanted), []
    names = set(re.findall(r"^([a-z0-9]+__[A-Za-z0-9_]+)", proc.stdout, flags=re.M))
    if proc.returncode != 0 or not names:
        return list(wanted), []
    keep = [m for m in wanted if m.split(".")[0] in names]
    return keep, [m for m in wanted if m not in keep]


def is_known_regimes(script: str) -> bool:
    return os.path.abspath(script) == SCRIPT


def script_args(args: argparse.Namespace) -> list[str]:
    """The script's arguments under ncu: those after `--`, else known_regimes.py's from --steps etc."""
    if args.script_args or not is_known_regimes(args.script):
        return list(args.script_args)
    return ["--steps", str(args.steps), "--tiny-ops", str(args.tiny_ops), "--device", args.device]


def stem(args: argparse.Namespace) -> str:
    return os.path.splitext(os.path.basename(args.script))[0]


def kernels_per_step(report: dict[str, Any] | None) -> float | None:
    """Kernel launches per step in a brrrtui report: kernel calls (copies and memsets aside) in the analysed
    windows over the steps they hold (span / profiled step time, rounded)."""
    if not report:
        return None
    o = report.get("overhead") or {}
    span, step = report.get("span_ns"), o.get("profiled_step_ns")
    if not span or not step:
        return None
    steps = round(span / step)
    calls = sum(
        int(k.get("calls") or 0)
        for k in report.get("kernels", [])
        if not str(k.get("name", "")).startswith(("Memcpy", "Memset"))
    )
    return calls / steps if steps >= 1 and calls else None


def launch_window(args: argparse.Namespace, report: dict[str, Any] | None) -> tuple[int, int, str]:
    """(launch-skip, launch-count, how they were chosen)."""
    per, source = args.kernels_per_step, "--kernels-per-step"
    if per is None:
        per, source = kernels_per_step(report), "counted in the report"
    if per is None and not is_known_regimes(args.script):
        per, source = KERNELS_PER_STEP.get(os.path.basename(args.script)), "the table of kernels per step"
    skip, count, how = args.launch_skip, args.launch_count, "given"
    if per:
        how = f"{per:.0f} kernels per step ({source})"
        if skip is None:
            skip = round(args.skip_steps * per)
        if count is None:
            count = round(args.profile_steps * per)
    skip = 0 if skip is None else skip
    count = 300 if count is None else count
    if args.max_kernels and count > args.max_kernels:
        count, how = args.max_kernels, how + f", capped at --max-kernels {args.max_kernels}"
    return skip, count, how


def kernel_id(invocations: str) -> str:
    """ncu's --kernel-id for "the N-th call of every kernel", N in `invocations` ("50,200,800"). ncu numbers
    the calls of each kernel name (with --kernel-name-base demangled: each template instance apart, as Kineto
    names them; by default one count per function, so every elementwise kernel shares one); the invocation
    field is a regular expression as it stands (a `regex:` prefix there is refused)."""
    nums = [str(int(x)) for x in invocations.split(",") if x.strip()]
    return f"::regex:.:^({'|'.join(nums)})$"


def ncu_command(args: argparse.Namespace, ncu: str, metrics: list[str], rep: str) -> list[str]:
    if args.sample_invocations:  # the same calls of every kernel name, not a slice of the launch sequence
        which = ["--kernel-name-base", "demangled", "--kernel-id", kernel_id(args.sample_invocations)]
    else:
        which = ["--launch-skip", str(args.launch_skip)]
    if args.kernel_regex:  # launch-skip and launch-count then count the matching kernels only
        which = ["--kernel-name-base", "demangled", "--kernel-name", f"regex:{args.kernel_regex}", *which]
    return [
        ncu, "--clock-control", "none", "--target-processes", "all", "--metrics", ",".join(metrics),
        *which, "--launch-count", str(args.launch_count),
        "--export", rep, "--force-overwrite", sys.executable, args.script, *script_args(args),
    ]  # fmt: skip


def run_ncu(args: argparse.Namespace) -> tuple[str, list[str]]:
    """Profile a short run of the script; returns the raw-page CSV text and the metrics collected."""
    ncu = shutil.which(args.ncu) or args.ncu
    metrics, dropped = available_metrics(ncu, METRICS)
    if dropped:
        print(f"ncu: this device lacks {', '.join(dropped)}; profiling without", flush=True)
    rep = os.path.join(args.out, f"{stem(args)}.ncu-rep")
    core = [m for m in metrics if m in CORE_METRICS]
    for attempt in [metrics, core] if core != metrics else [metrics]:
        if os.path.exists(rep):
            os.remove(rep)
        cmd = ncu_command(args, ncu, attempt, rep)
        print("$ " + " ".join(cmd), flush=True)
        t0 = time.perf_counter()
        proc = subprocess.run(
            cmd, cwd=ROOT, capture_output=True, text=True, timeout=args.timeout, env=_child_env()
        )
        with open(os.path.join(args.out, "ncu_profile.log"), "w") as f:
            f.write(proc.stdout + "\n--- stderr\n" + proc.stderr)
        print(f"ncu: rc={proc.returncode} in {time.perf_counter() - t0:.0f} s", flush=True)
        if proc.returncode == 0 and os.path.exists(rep):
            metrics = attempt
            break
        print((proc.stdout + proc.stderr)[-1500:], flush=True)
    else:
        raise RuntimeError(f"ncu failed; see {os.path.join(args.out, 'ncu_profile.log')}")
    return import_csv(ncu, rep), metrics


def import_csv(ncu: str, rep: str) -> str:
    for extra in (
        ["--print-units", "base", "--print-kernel-base", "demangled"],
        ["--print-units", "base"],
        [],
    ):
        imp = subprocess.run(
            [ncu, "--import", rep, "--csv", "--page", "raw", *extra],
            capture_output=True,
            text=True,
            timeout=300,
        )
        if imp.returncode == 0 and '"ID"' in imp.stdout:
            return imp.stdout
        print(f"ncu --import {' '.join(extra)}: rc={imp.returncode} {imp.stderr[-300:]}", flush=True)
    raise RuntimeError("ncu --import produced no CSV")


def _child_env() -> dict[str, str]:
    env = dict(os.environ)
    env.pop("OUT", None)  # the scripts would write their result files into the lead's $OUT
    return env


def load_report(path: str, out: str, name: str = "known_regimes") -> dict[str, Any]:
    """brrrtui's report JSON: a .json file as is, anything else is a recording to run `report --json` on."""
    if path.endswith(".json"):
        with open(path) as f:
            return json.load(f)
    proc = subprocess.run(
        [sys.executable, "-m", "brrrtui", "report", path, "--json"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=300,
    )
    if proc.returncode != 0:
        raise RuntimeError(f"brrrtui report failed (rc={proc.returncode}): {proc.stderr[-1500:]}")
    report = json.loads(proc.stdout)
    with open(os.path.join(out, f"{name}_report.json"), "w") as f:
        json.dump(report, f, indent=1)
    return report


def with_steps(argv: list[str], steps: int) -> list[str]:
    """The script's arguments with --steps set to `steps`."""
    out, skip = [], False
    for a in argv:
        if skip:
            skip = False
        elif a == "--steps":
            skip = True
        elif not a.startswith("--steps="):
            out.append(a)
    return [*out, "--steps", str(steps)]


def record(args: argparse.Namespace) -> str:
    path = os.path.join(args.out, f"{stem(args)}.brrr")
    if is_known_regimes(args.script) and not args.script_args:
        extra = ["--steps", str(args.record_steps or 300)]
    else:
        extra = (
            with_steps(args.script_args, args.record_steps) if args.record_steps else list(args.script_args)
        )
    cmd = [sys.executable, "-m", "brrrtui", "record", "-o", path, args.script, *extra]
    if args.smoke:
        cmd.append("--smoke")
    print("$ " + " ".join(cmd), flush=True)
    proc = subprocess.run(
        cmd, cwd=ROOT, capture_output=True, text=True, timeout=args.timeout, env=_child_env()
    )
    with open(os.path.join(args.out, "brrrtui_record.log"), "w") as f:
        f.write(proc.stdout + "\n--- stderr\n" + proc.stderr)
    if proc.returncode != 0:
        raise RuntimeError(f"brrrtui record failed (rc={proc.returncode}): {proc.stderr[-1500:]}")
    return path


def smoke_report() -> dict[str, Any]:
    """A synthetic brrrtui report for tests/fixtures/ncu_sample.csv's kernels (CPU: --smoke without --record);
    its verdicts and rates are chosen, not measured: one disagreement per rule."""
    with open(SAMPLE_CSV) as f:
        names = [k.name for k in parse_ncu_csv(f.read())]

    def find(part: str) -> str:
        return next(n for n in names if part in n)

    return {
        "schema": 2,
        "device": {"name": "smoke", "peak_flops_per_s": 7.72e14, "peak_bytes_per_s": 4.18e12},
        "kernels": [
            {"name": find("nvjet"), "calls": 2, "gpu_ns": 2_800_000, "regime": "compute",
             "achieved_flops_per_s": 7.8e14, "achieved_bytes_per_s": 5e11},
            {"name": find("MulFunctor"), "calls": 2, "gpu_ns": 507_000, "regime": "memory",
             "achieved_flops_per_s": None, "achieved_bytes_per_s": 4.2e12},
            {"name": find("CUDAFunctorOnSelf_add"), "calls": 1, "gpu_ns": 506_000, "regime": "memory",
             "achieved_flops_per_s": None, "achieved_bytes_per_s": 4.2e12},
            {"name": find("abs_kernel"), "calls": 1, "gpu_ns": 506_000, "regime": "compute",
             "achieved_flops_per_s": 5e11, "achieved_bytes_per_s": 4.2e12},
            {"name": find("tanh_kernel"), "calls": 2, "gpu_ns": 4_000, "regime": "memory",
             "achieved_flops_per_s": None, "achieved_bytes_per_s": 2.5e8},
            {"name": find("reduce_kernel"), "calls": 1, "gpu_ns": 4_100, "regime": "memory",
             "achieved_flops_per_s": None, "achieved_bytes_per_s": 3.0e12},
        ],
        "lines": [],
    }  # fmt: skip


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    argv = list(sys.argv[1:] if argv is None else argv)
    rest: list[str] = []
    if "--" in argv:
        i = argv.index("--")
        argv, rest = argv[:i], argv[i + 1 :]
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--out", default=os.environ.get("OUT") or "ncu_out")
    p.add_argument("--script", default=SCRIPT, help="the script to profile (default examples/known_regimes.py);"
                   " its arguments follow `--`")  # fmt: skip
    p.add_argument("--csv", help="analyse this ncu raw CSV instead of running ncu")
    p.add_argument("--report", help="brrrtui report JSON, or a .brrr recording to report on")
    p.add_argument("--record", action="store_true", help="record the script with brrrtui and compare")
    p.add_argument("--record-steps", type=int, default=None,
                   help="steps of the brrrtui recording (known_regimes.py: 300, ~7 ms each)")  # fmt: skip
    p.add_argument("--ncu", default="ncu")
    p.add_argument("--steps", type=int, default=3, help="known_regimes.py's steps under ncu")
    p.add_argument("--tiny-ops", type=int, default=50, help="known_regimes.py's tiny ops per step under ncu")
    p.add_argument("--device", default="cuda", help="known_regimes.py's --device under ncu")
    p.add_argument(
        "--skip-steps", type=float, default=5, help="steps to skip before profiling (x kernels/step)"
    )
    p.add_argument("--profile-steps", type=float, default=1, help="steps to profile (x kernels/step)")
    p.add_argument(
        "--kernels-per-step", type=float, default=None, help="default: from --report, else a table"
    )
    p.add_argument("--max-kernels", type=int, default=0, help="cap on --launch-count (0: none)")
    p.add_argument(
        "--launch-skip", type=int, default=None, help="ncu's --launch-skip (overrides --skip-steps)"
    )
    p.add_argument("--launch-count", type=int, default=None,
                   help="ncu's --launch-count (overrides --profile-steps; known_regimes.py: 300)")  # fmt: skip
    p.add_argument("--sample-invocations", default=None,
                   help="profile call number N of every kernel name, N in this list (e.g. 50,200,800: steady-state"
                        " calls of names called once to hundreds of times a step) instead of a slice of launches;"
                        " --max-kernels caps the total")  # fmt: skip
    p.add_argument("--kernel-regex", default=None,
                   help="profile only kernels whose demangled name matches (ncu --kernel-name regex:...)")  # fmt: skip
    p.add_argument("--csv-extra", default=None,
                   help="with --csv: a second raw CSV whose kernel names replace those names' launches in --csv"
                        " (a run that profiled every call of a few names in a steady step)")  # fmt: skip
    p.add_argument("--threshold", type=float, default=THRESHOLD_PCT, help="SOL threshold, %% of peak")
    p.add_argument("--timeout", type=float, default=420, help="seconds for the ncu run and for the recording")
    p.add_argument("--smoke", action="store_true", help="use tests/fixtures/ncu_sample.csv (no GPU)")
    args = p.parse_args(argv)
    args.script = os.path.abspath(args.script)
    args.script_args = rest
    if args.smoke and not args.csv:
        args.csv = SAMPLE_CSV
    return args


def ncu_kernels(args: argparse.Namespace, report: dict[str, Any] | None) -> tuple[list[NcuKernel], list[str]]:
    metrics = list(METRICS)
    if args.csv:
        with open(args.csv) as f:
            text = f.read()
    else:
        if args.sample_invocations:
            args.launch_skip, args.launch_count = None, args.max_kernels or args.launch_count or 300
            print(f"ncu: --kernel-id {kernel_id(args.sample_invocations)} --launch-count {args.launch_count}"
                  " (calls number N of each kernel name)", flush=True)  # fmt: skip
        else:
            args.launch_skip, args.launch_count, how = launch_window(args, report)
            print(
                f"ncu: --launch-skip {args.launch_skip} --launch-count {args.launch_count} ({how})",
                flush=True,
            )
        text, metrics = run_ncu(args)
        with open(os.path.join(args.out, "ncu_raw.csv"), "w") as f:
            f.write(text)
    kernels = parse_ncu_csv(text, args.threshold)
    if args.csv_extra:
        with open(args.csv_extra) as f:
            extra = parse_ncu_csv(f.read(), args.threshold)
        sigs = {signature(k.name) for k in extra}  # two ncu runs may spell one name differently
        kernels = [k for k in kernels if signature(k.name) not in sigs] + extra
        print(f"ncu: {len(extra)} launches of {len(sigs)} names from {args.csv_extra} replace theirs")
    by_name = aggregate_by_name(kernels)
    print(f"ncu: {len(kernels)} kernels, {len(by_name)} names (threshold {args.threshold:g}%)")
    print(format_ncu(by_name))
    with open(os.path.join(args.out, "ncu_kernels.json"), "w") as f:
        json.dump(
            {
                "threshold_pct": args.threshold,
                "metrics": metrics,
                "source": args.csv or "ncu run",
                "script": os.path.relpath(args.script, ROOT),
                "script_args": script_args(args),
                "launch_skip": args.launch_skip,
                "launch_count": args.launch_count,
                "kernels": [asdict(k) | {"dram_bytes": k.dram_bytes} for k in kernels],
                "by_name": [asdict(n) for n in by_name.values()],
            },
            f,
            indent=1,
        )
    return kernels, metrics


def write_comparison(args: argparse.Namespace, kernels: list[NcuKernel], report: dict[str, Any]) -> None:
    has_lines = bool(report.get("lines"))
    expected = expected_lines(args.script) if is_known_regimes(args.script) and has_lines else {}
    c = compare(kernels, report, expected, os.path.basename(args.script))
    g = compare_ground_truth(kernels, report)
    c["ground_truth"] = g
    c["workload"] = stem(args)
    print()
    print(format_compare(c))
    print()
    print(format_ground_truth(g))
    with open(os.path.join(args.out, "ncu_compare.json"), "w") as f:
        json.dump(c, f, indent=1)
    summary = {k: v for k, v in g.items() if k != "kernels"}
    summary |= {"workload": stem(args), "sol_agreement": c["kernel_agreement"], "ncu_kernels": len(kernels)}
    with open(os.path.join(args.out, "ncu_ground_truth.json"), "w") as f:
        json.dump(summary, f, indent=1)
    print(
        "GT_SUMMARY "
        + json.dumps(
            {
                "workload": stem(args),
                "ncu_kernels": len(kernels),
                "sol_agreement": c["kernel_agreement"],
                "gt_agreement": g["agreement"],
                "scored_gpu_share": g["scored_gpu_share"],
                "disagreeing": len(g["disagreeing"]),
            }
        ),
        flush=True,
    )


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    os.makedirs(args.out, exist_ok=True)
    report = None
    try:
        if args.report and args.report.endswith(".json"):  # before ncu: it may give the kernels per step
            report = load_report(args.report, args.out, stem(args))
        kernels, _ = ncu_kernels(args, report)
        report_path = record(args) if args.record else args.report
        if report is None and report_path:
            report = load_report(report_path, args.out, stem(args))
    except (OSError, RuntimeError, subprocess.TimeoutExpired, json.JSONDecodeError) as e:
        print(f"ERROR: {e}", file=sys.stderr)
        return 1
    if report is None and args.smoke:
        report = smoke_report()
        print("\n(--smoke: a synthetic report for the sample CSV)")
    if report is not None:
        write_comparison(args, kernels, report)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
