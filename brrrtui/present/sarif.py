"""Findings as SARIF 2.1.0 (`brrrtui report --sarif`), for the VS Code SARIF viewer and GitHub code scanning.

One result per finding: its rule is the finding's kind (`fusion`, `slow_gemm`, ...), its location the first
source line it names (the others are related locations), and its message the verdict, the saving per step
and the fix. A path under the run's working directory (`meta.cwd`, the repository root when the script ran
from it) is written relative to the base id `SRCROOT`, which is what code scanning matches against the
repository; any other path is an absolute `file://` URI.
"""

from __future__ import annotations

import hashlib
import os
from typing import Any
from urllib.parse import quote

from analyzers.results import Analysis, Finding, FindingKind
from brrrtui.contract.model import SourceLine
from brrrtui.contract.units import fmt_ns
from brrrtui.present.finding_words import action, words

SARIF_SCHEMA = "https://docs.oasis-open.org/sarif/sarif/v2.1.0/errata01/os/schemas/sarif-schema-2.1.0.json"
ROOT_ID = "SRCROOT"

RULES: dict[FindingKind, tuple[str, str]] = {
    FindingKind.FUSION: (
        "FuseMemoryBoundChain",
        "Memory-bound kernels in a chain write and re-read intermediates that one fused kernel would not.",
    ),
    FindingKind.ATTENTION: (
        "UseFusedAttention",
        "Attention written out as matmul, softmax and matmul instead of F.scaled_dot_product_attention.",
    ),
    FindingKind.OVERHEAD: (
        "GpuWaitsOnCpu",
        "The GPU sits idle while the CPU issues work (Python, dispatch, launches).",
    ),
    FindingKind.SMALL_KERNELS: (
        "LaunchBoundKernels",
        "Kernels too short for the GPU to be busy: launch overhead dominates.",
    ),
    FindingKind.SYNC: (
        "SyncInLoop",
        "The CPU waits for the GPU (.item(), .cpu(), synchronize) inside the loop.",
    ),
    FindingKind.H2D: (
        "SlowHostToDeviceCopy",
        "Host-to-device copies the GPU waits for (pageable or blocking).",
    ),
    FindingKind.DATA: ("DataLoadingStall", "The GPU waits for data loading."),
    FindingKind.NO_TENSOR_CORES: (
        "MatmulOffTensorCores",
        "Matrix multiplications that run on the SIMT units instead of the tensor cores.",
    ),
    FindingKind.OPTIMIZER: ("UnfusedOptimizer", "The optimizer step runs as many small per-tensor kernels."),
    FindingKind.SLOW_GEMM: (
        "SlowMatmulShape",
        "A tensor-core matmul or convolution far under its roof, for a cause in its shapes or kernel.",
    ),
    FindingKind.CONV_LAYOUT: (
        "ConvolutionLayout",
        "NCHW convolutions that cuDNN wraps in layout conversions; channels_last avoids them.",
    ),
    FindingKind.GRAPH_BREAK: (
        "CompileGraphBreak",
        "torch.compile breaks its graph on this line: separate graphs with Python in between.",
    ),
    FindingKind.RECOMPILE: (
        "CompileRecompile",
        "torch.compile compiles this function again: a guard fails between calls.",
    ),
    FindingKind.CPU_WAIT: (
        "TrainingThreadWaits",
        "The training thread waits off the CPU (a sleep, I/O, a lock) while the GPU idles.",
    ),
    FindingKind.SLOW_STEPS: (
        "SlowSteps",
        "Steady-state steps far slower than the median step (logging, evaluation, garbage collection, data).",
    ),
}


def _uri(path: str, root: str | None) -> dict[str, str]:
    """An artifactLocation: relative to SRCROOT when `path` lies under `root` (or is relative), else absolute."""
    if not os.path.isabs(path):
        return {"uri": quote(path.replace(os.sep, "/")), "uriBaseId": ROOT_ID}
    if root:
        rel = os.path.relpath(path, root)
        if not rel.startswith(".."):
            return {"uri": quote(rel.replace(os.sep, "/")), "uriBaseId": ROOT_ID}
    return {"uri": "file://" + quote(path.replace(os.sep, "/"))}


def _location(line: SourceLine, root: str | None) -> dict[str, Any]:
    return {
        "physicalLocation": {
            "artifactLocation": _uri(line.file, root),
            "region": {"startLine": max(1, int(line.line))},
        },
        "logicalLocations": [{"name": line.function, "kind": "function"}] if line.function else [],
    }


def message(f: Finding) -> str:
    saving = f"~{fmt_ns(f.saving_ns)} per step" if f.saving_ns is not None else "unknown"
    said = words(f)
    verdict = said.message.rstrip()
    verdict += "" if verdict.endswith((".", "!", "?")) else "."
    return f"{verdict} Saving: {saving}. Fix: {said.action.rstrip()}"


def _fingerprint(f: Finding) -> str:
    """Stable across runs and checkouts: the kind and the lines' file names and numbers, not the saving."""
    key = "|".join([str(f.kind), *(f"{os.path.basename(ln.file)}:{ln.line}" for ln in f.lines)])
    return hashlib.sha256(key.encode()).hexdigest()[:32]


def _script(analysis: Analysis, root: str | None) -> dict[str, Any] | None:
    """The script's own file, where a finding names no line (a fused optimizer, say): code scanning shows a
    result only at a location. None for `-m module` runs and traces without argv."""
    argv = analysis.trace.meta.get("argv")
    if not (isinstance(argv, list) and argv and isinstance(argv[0], str) and argv[0].endswith(".py")):
        return None
    path = argv[0] if os.path.isabs(argv[0]) or root is None else os.path.join(root, argv[0])
    return {"physicalLocation": {"artifactLocation": _uri(path, root), "region": {"startLine": 1}}}


def _result(
    f: Finding, rule_index: dict[FindingKind, int], root: str | None, script: dict[str, Any] | None
) -> dict[str, Any]:
    locations = [_location(ln, root) for ln in f.lines] or ([script] if script else [])
    result: dict[str, Any] = {
        "ruleId": str(f.kind),
        "ruleIndex": rule_index[f.kind],
        "level": "warning" if f.saving_ns is not None else "note",
        "message": {"text": message(f)},
        "locations": locations[:1],
        "partialFingerprints": {"brrrtuiFinding/v1": _fingerprint(f)},
        "properties": {"saving_ns": f.saving_ns, "action": action(f)},
    }
    if len(locations) > 1:
        result["relatedLocations"] = [
            loc | {"id": i, "message": {"text": "also part of this finding"}}
            for i, loc in enumerate(locations[1:], start=1)
        ]
    return result


def _rule(kind: FindingKind) -> dict[str, Any]:
    name, text = RULES.get(kind, (str(kind), str(kind)))
    return {
        "id": str(kind),
        "name": name,
        "shortDescription": {"text": text},
        "defaultConfiguration": {"level": "warning"},
        "properties": {"tags": ["performance", "gpu"]},
    }


def to_sarif(analysis: Analysis, version: str) -> dict[str, Any]:
    """The findings of `analysis` as one SARIF 2.1.0 log (one run, one result per finding)."""
    kinds = list(FindingKind)
    rule_index = {k: i for i, k in enumerate(kinds)}
    cwd = analysis.trace.meta.get("cwd")
    root = cwd if isinstance(cwd, str) and os.path.isabs(cwd) else None
    run: dict[str, Any] = {
        "tool": {
            "driver": {
                "name": "brrrtui",
                "version": version,
                "rules": [_rule(k) for k in kinds],
            }
        },
        "results": [_result(f, rule_index, root, _script(analysis, root)) for f in analysis.findings],
        "columnKind": "unicodeCodePoints",
    }
    if root is not None:
        run["originalUriBaseIds"] = {ROOT_ID: {"uri": "file://" + quote(root.rstrip("/") + "/")}}
    return {"$schema": SARIF_SCHEMA, "version": "2.1.0", "runs": [run]}
