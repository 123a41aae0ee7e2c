"""Share of FLOPs and GPU time by operator class, beside Ivanov et al. 2021 ("Data Movement Is All You Need").

    python validation/op_classes.py bert.brrr                 # a brrrtui recording (e.g. of bert_step.py)
    python validation/op_classes.py bert_trace.json.gz        # a torch.profiler trace (bert_step.py --trace)
    python validation/op_classes.py report.json               # `brrrtui report --json` output (names only)
    python validation/op_classes.py --smoke                   # CPU: the ResNet-50 H200 fixture trace

The paper's classes, for a BERT encoder layer's forward and backward pass (PyTorch, V100):

    class                        FLOPs     runtime
    tensor contractions         99.80 %    61.0 %     matmuls, batched matmuls (attention scores/values)
    statistical normalisations   0.17 %    25.5 %     softmax, layer norm
    element-wise operators       0.03 %    13.5 %     bias, dropout, activations, residual additions

Kernels outside those (optimizer, embedding lookups, the loss, random numbers, copies between host and device)
are "other": listed, but left out of the shares, as the paper's layer has none of them.

How a kernel is classified (`classify`, pure: kernel name plus the names of the ops that launched it):

1. memcpy/memset, and any kernel launched under an optimizer, embedding, loss or RNG op -> other (the
   cross-entropy's log-softmax kernel is the loss's, not a normalisation of the model).
2. The kernel's own name, when it says what it is: GEMM/convolution/attention kernels (gemm, nvjet, cutlass,
   xmma, fmha, flash, ...) -> contraction; softmax/norm kernels (softmax, layer_norm, batch_norm,
   GammaBeta, RowwiseMoments, ...) -> normalisation; optimizer, embedding, loss and RNG kernels -> other.
   Fused attention kernels (flash, memory-efficient) contain their softmax; they count as contractions.
3. Otherwise (a generic `vectorized_elementwise_kernel`, `reduce_kernel`, a Triton kernel without a telling
   name), the outermost launching op that has a class decides: a normalisation op (layer_norm,
   NativeLayerNormBackward0, ...) -> normalisation; optimizer/embedding/loss ops -> other; element-wise ops
   -> element-wise; a contraction op (linear, addmm, AddmmBackward0) -> element-wise, since its non-GEMM
   kernels are the bias add, the bias-gradient reduction and layout copies.
4. Otherwise element-wise for generic element-wise/reduction kernels, and other for the rest.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import re
import sys
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from enum import Enum
from typing import Any

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
if ROOT not in sys.path:  # run as `python validation/op_classes.py`: analyzers/ sits beside validation/
    sys.path.insert(0, ROOT)
SMOKE_TRACE = os.path.join(ROOT, "tests", "fixtures", "resnet50_h200_tui.json.gz")


class OpClass(Enum):
    CONTRACTION = "tensor contraction"
    NORMALIZATION = "statistical normalisation"
    ELEMENTWISE = "element-wise"
    OTHER = "other"


PAPER_CLASSES = (OpClass.CONTRACTION, OpClass.NORMALIZATION, OpClass.ELEMENTWISE)
# Ivanov et al. 2021, BERT encoder layer: (% of FLOPs, % of runtime)
PAPER = {
    OpClass.CONTRACTION: (99.80, 61.0),
    OpClass.NORMALIZATION: (0.17, 25.5),
    OpClass.ELEMENTWISE: (0.03, 13.5),
}

_CONTRACTION_KERNEL = re.compile(
    r"gemm|gemv|nvjet|cutlass|xmma|cublas|splitkreduce|wgrad|dgrad|fprop|convolve|conv[123]d|depthwise"
    r"|fmha|flash|attention|dot_kernel|bmm_|triton_tem_fused_.*mm",
    re.I,
)
_NORMALIZATION_KERNEL = re.compile(
    r"softmax|layer_?norm|batch_?norm|group_?norm|rms_?norm|instance_?norm|gammabeta|rowwisemoments"
    r"|computeinternalgradients|computegradientfusedparams|computefusedparams",
    re.I,
)
# Kernel names carry their template arguments: `{lambda(float)#1}`, `at::PhiloxCudaState` (in dropout kernels)
# and functor names are everywhere, so these patterns name kernels, not fragments that occur inside them.
_OTHER_KERNEL = re.compile(
    r"multi_tensor_apply|fused_?adam|fused_?sgd|index_?select|embedding|indexing_backward|index_put"
    r"|nll_loss|cross_entropy|distribution_elementwise|randperm|^memcpy|^memset",
    re.I,
)
_GENERIC_KERNEL = re.compile(
    r"elementwise|vectorized|unrolled|reduce|pointwise|triton_|dropout|gelu|relu|tanh|sigmoid|copy|fill"
    r"|cat_|transpose|permute|where|masked|clamp|bias|add|mul|div",
    re.I,
)

_CONTRACTION_OPS = {
    "mm", "addmm", "bmm", "baddbmm", "addbmm", "matmul", "linear", "einsum", "dot", "mv", "addmv", "tensordot",
    "conv1d", "conv2d", "conv3d", "convolution", "cudnnconvolution", "convolutionoverrideable",
    "scaleddotproductattention", "scaleddotproductflashattention", "scaleddotproductefficientattention",
    "scaleddotproductcudnnattention", "flashattention", "efficientattention",
}  # fmt: skip
_NORMALIZATION_OPS = {
    "softmax", "logsoftmax", "softmaxbackwarddata", "logsoftmaxbackwarddata", "safesoftmax", "layernorm",
    "nativelayernorm", "batchnorm", "nativebatchnorm", "cudnnbatchnorm", "batchnormimplindex", "groupnorm",
    "nativegroupnorm", "rmsnorm", "fusedrmsnorm", "instancenorm",
}  # fmt: skip
_ELEMENTWISE_OPS = {
    "dropout", "nativedropout", "featuredropout", "add", "sub", "rsub", "mul", "div", "gelu", "relu", "tanh",
    "sigmoid", "silu", "threshold", "where", "maskedfill", "clamp", "clampmin", "pow", "sqrt", "rsqrt",
    "exp", "neg", "abs", "erf",
}  # fmt: skip
_OTHER_OPS = {
    "embedding", "embeddingdense", "embeddingdensebackward", "indexselect", "nllloss", "nllloss2d",
    "nlllossnd", "nlllossforward", "crossentropyloss", "accumulategrad", "randint", "random", "uniform",
    "normal", "randperm", "clipgradnorm",
}  # fmt: skip


def squash_op(name: str) -> str:
    """`aten::native_layer_norm_backward`, `NativeLayerNormBackward0` -> `nativelayernorm`."""
    s = name.split(": ", 1)[1] if ": " in name else name  # "autograd::engine::evaluate_function: XBackward0"
    s = s.rsplit("::", 1)[-1].lower().replace("_", "")
    return re.sub(r"backward\d*$", "", s)


def op_class(name: str) -> OpClass | None:
    """The class an op's name implies, or None for ops that say nothing (copy_, to, view, user scopes)."""
    flat = name.lower().replace("_", "")
    if flat.startswith("optimizer.") or any(w in flat for w in ("foreach", "fusedadam", "fusedsgd")):
        return OpClass.OTHER
    s = squash_op(name)
    if s in _CONTRACTION_OPS:
        return OpClass.CONTRACTION
    if s in _NORMALIZATION_OPS:
        return OpClass.NORMALIZATION
    if s in _OTHER_OPS:
        return OpClass.OTHER
    if s in _ELEMENTWISE_OPS:
        return OpClass.ELEMENTWISE
    return None


def kernel_class(name: str) -> OpClass | None:
    """The class a kernel's own name implies (steps 1-2 of the module docstring), or None if it is generic."""
    if name.lower().startswith(("memcpy", "memset")):
        return OpClass.OTHER
    if name.startswith("triton_"):
        # Inductor names kernels after the ops they fuse: a fused norm is a norm, a template mm a contraction
        if re.match(r"triton_tem_", name) and "mm" in name:
            return OpClass.CONTRACTION
        return OpClass.NORMALIZATION if _NORMALIZATION_KERNEL.search(name) else None
    if _CONTRACTION_KERNEL.search(name):
        return OpClass.CONTRACTION
    if _NORMALIZATION_KERNEL.search(name):
        return OpClass.NORMALIZATION
    if _OTHER_KERNEL.search(name):
        return OpClass.OTHER
    return None


def classify(kernel: str, ops: Sequence[str] = (), is_copy: bool = False) -> OpClass:
    """Class of one kernel from its name and its launching ops, innermost first (see the module docstring).

    is_copy: a memcpy/memset row (whatever its name)."""
    if is_copy or any(op_class(op) is OpClass.OTHER for op in ops):
        return OpClass.OTHER
    k = kernel_class(kernel)
    if k is not None:
        return k
    for op in reversed(ops):  # outermost first
        c = op_class(op)
        if c is not None:
            return OpClass.ELEMENTWISE if c is OpClass.CONTRACTION else c
    if _GENERIC_KERNEL.search(kernel):
        return OpClass.ELEMENTWISE
    return OpClass.OTHER


@dataclass(frozen=True)
class KernelRow:
    """One kernel launch (or one kernel name with totals, from a report)."""

    name: str
    ops: tuple[str, ...]  # launching ops, innermost first
    gpu_ns: float
    flops: float | None
    calls: int = 1
    is_copy: bool = False


@dataclass(frozen=True)
class ClassShare:
    op_class: OpClass
    calls: int
    gpu_ns: float
    flops: float  # known FLOPs only
    unknown_flops_ns: float  # GPU time of kernels whose FLOPs are unknown
    time_share: float | None  # of the paper classes' total (None for OTHER)
    flop_share: float | None
    time_share_all: float  # of all GPU time, OTHER included


def shares(rows: Iterable[KernelRow]) -> dict[OpClass, ClassShare]:
    """Sum GPU time and FLOPs per class; shares over the three paper classes, and over everything."""
    acc = {c: [0, 0.0, 0.0, 0.0] for c in OpClass}
    for r in rows:
        a = acc[classify(r.name, r.ops, r.is_copy)]
        a[0] += r.calls
        a[1] += r.gpu_ns
        if r.flops is None or math.isnan(r.flops):
            a[3] += r.gpu_ns
        else:
            a[2] += r.flops
    paper_ns = sum(acc[c][1] for c in PAPER_CLASSES)
    paper_flops = sum(acc[c][2] for c in PAPER_CLASSES)
    all_ns = sum(a[1] for a in acc.values())
    out = {}
    for c, (calls, ns, flops, unknown) in acc.items():
        in_paper = c in PAPER_CLASSES
        out[c] = ClassShare(
            op_class=c,
            calls=calls,
            gpu_ns=ns,
            flops=flops,
            unknown_flops_ns=unknown,
            time_share=ns / paper_ns if in_paper and paper_ns else None,
            flop_share=flops / paper_flops if in_paper and paper_flops else None,
            time_share_all=ns / all_ns if all_ns else 0.0,
        )
    return out


# --- inputs -------------------------------------------------------------------------------------------------


def rows_from_report(report: dict[str, Any]) -> list[KernelRow]:
    """`brrrtui report --json`: kernel names with totals; FLOPs from achieved FLOP/s x time."""
    rows = []
    for k in report.get("kernels", []):
        gpu_ns = float(k.get("gpu_ns") or 0)
        rate = k.get("achieved_flops_per_s")
        flops = k.get("flops")
        if flops is None and rate is not None:
            flops = rate * gpu_ns / 1e9
        rows.append(KernelRow(k["name"], (), gpu_ns, flops, int(k.get("calls") or 1)))
    return rows


def rows_from_trace(trace: Any) -> tuple[list[KernelRow], str]:
    """One row per GPU activity of a loaded trace, with its op chain. FLOPs from analyzers.analyze when it
    imports; otherwise torch.profiler's own per-op FLOPs (matmuls and convolutions only), split evenly over
    the op's contraction kernels."""
    import numpy as np

    from brrrtui.contract.model import GpuKind

    gpu, ops = trace.gpu, trace.ops
    try:
        from analyzers.analyze import analyze

        analysis = analyze(trace)
        links, flops, source = (
            analysis.links,
            np.asarray(analysis.kernel_flops, dtype=float),
            "analyzers.analyze",
        )
    except ImportError:
        from analyzers.link.links import link

        links, flops, source = link(trace), None, "torch.profiler's op FLOPs (no analyzers.analyze)"

    op_names = [trace.name(int(s)) for s in ops.name]
    parent = links.op_parent.tolist()
    chains: dict[int, tuple[str, ...]] = {}

    def chain(op: int) -> tuple[str, ...]:
        if op not in chains:
            names, i = [], op
            while i >= 0 and len(names) < 64:
                names.append(op_names[i])
                i = parent[i]
            chains[op] = tuple(names)
        return chains[op]

    kernel_op = links.kernel_op.tolist()
    names = [trace.name(int(s)) for s in gpu.name]
    kinds = gpu.kind.tolist()
    durs = gpu.dur_ns.tolist()
    if flops is None:
        # torch.profiler puts FLOPs on the op it has a formula for (aten::conv2d, aten::addmm), often an
        # ancestor of the op that launched the kernel: give each contraction kernel its nearest such op's
        # FLOPs, split evenly between the kernels that share that op.
        flops = np.full(len(gpu), np.nan)
        op_flops = ops.flops.tolist()
        per_op: dict[int, list[int]] = {}
        for row, op in enumerate(kernel_op):
            if kinds[row] != GpuKind.KERNEL or kernel_class(names[row]) is not OpClass.CONTRACTION:
                continue
            while op >= 0 and not op_flops[op] > 0:  # NaN compares False
                op = parent[op]
            if op >= 0:
                per_op.setdefault(op, []).append(row)
        for op, rows in per_op.items():
            flops[rows] = op_flops[op] / len(rows)
    rows = [
        KernelRow(
            name=names[i],
            ops=chain(kernel_op[i]) if kernel_op[i] >= 0 else (),
            gpu_ns=float(durs[i]),
            flops=float(flops[i]),
            is_copy=kinds[i] != GpuKind.KERNEL,
        )
        for i in range(len(gpu))
    ]
    return rows, source


def load_rows(path: str) -> tuple[list[KernelRow], str]:
    if path.endswith(".json"):
        with open(path) as f:
            head = f.read(4096)
        if '"traceEvents"' not in head:
            with open(path) as f:
                data = json.load(f)
            if isinstance(data, dict) and "kernels" in data:
                return rows_from_report(data), "brrrtui report JSON (kernel names only)"
    from brrrtui.recording.load import load_trace

    return rows_from_trace(load_trace(path))


# --- output -------------------------------------------------------------------------------------------------


def format_table(s: dict[OpClass, ClassShare]) -> str:
    def pct(v: float | None, nd: int = 1) -> str:
        return "—" if v is None else f"{100 * v:.{nd}f} %"

    out = [
        "| class | kernels | GPU ms | FLOPs share | paper FLOPs | GPU time share | paper runtime | of all GPU time |",
        "|---|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for c in OpClass:
        x = s[c]
        paper = PAPER.get(c)
        out.append(
            f"| {c.value} | {x.calls} | {x.gpu_ns / 1e6:.2f} | {pct(x.flop_share, 2)} "
            f"| {f'{paper[0]:.2f} %' if paper else ''} | {pct(x.time_share)} "
            f"| {f'{paper[1]:.1f} %' if paper else ''} | {pct(x.time_share_all)} |"
        )
    unknown = sum(x.unknown_flops_ns for c, x in s.items() if c in PAPER_CLASSES)
    total = sum(x.gpu_ns for c, x in s.items() if c in PAPER_CLASSES)
    if total and unknown:
        out.append(
            f"\nFLOPs unknown for kernels holding {100 * unknown / total:.1f} % of the paper classes' GPU time"
        )
    return "\n".join(out)


def top_kernels(rows: list[KernelRow], per_class: int = 5) -> dict[str, list[dict[str, Any]]]:
    """The kernels holding most time in each class (to check the classification by eye)."""
    by: dict[tuple[OpClass, str], list[float]] = {}
    for r in rows:
        a = by.setdefault((classify(r.name, r.ops, r.is_copy), r.name), [0, 0.0])
        a[0] += r.calls
        a[1] += r.gpu_ns
    out: dict[str, list[dict[str, Any]]] = {}
    for c in OpClass:
        items = sorted(((n, v) for (cc, n), v in by.items() if cc is c), key=lambda t: -t[1][1])[:per_class]
        out[c.value] = [{"name": n, "calls": int(v[0]), "gpu_ns": v[1]} for n, v in items]
    return out


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("input", nargs="?", help=".brrr recording, torch.profiler .json(.gz) trace or report JSON")
    p.add_argument("--out", default=os.environ.get("OUT") or ".", help="write op_classes.json here ($OUT)")
    p.add_argument("--top", type=int, default=5, help="kernels listed per class")
    p.add_argument("--smoke", action="store_true", help="classify the ResNet-50 H200 fixture trace")
    args = p.parse_args(argv)
    path = args.input or (SMOKE_TRACE if args.smoke else None)
    if path is None:
        p.error("give an input file (or --smoke)")
    if not os.path.exists(path):
        print(f"ERROR: {path}: no such file", file=sys.stderr)
        return 1

    from brrrtui.contract.errors import InputError

    try:
        rows, source = load_rows(path)
    except (InputError, ValueError, OSError) as e:
        print(f"ERROR: {path}: {e}", file=sys.stderr)
        return 1
    s = shares(rows)
    print(f"{path}: {len(rows)} GPU rows; FLOPs from {source}")
    if not rows:
        print("no GPU kernels in this input (a CPU run?): nothing to classify")
    print(format_table(s))
    tops = top_kernels(rows, args.top)
    for c, items in tops.items():
        if items:
            print(
                f"\n{c}: " + "; ".join(f"{it['name'][:70]} ({it['gpu_ns'] / 1e6:.2f} ms)" for it in items[:3])
            )
    os.makedirs(args.out, exist_ok=True)
    result = {
        "input": path,
        "flops_source": source,
        "paper": {c.value: {"flops_pct": v[0], "runtime_pct": v[1]} for c, v in PAPER.items()},
        "classes": {
            c.value: {
                "calls": x.calls,
                "gpu_ns": x.gpu_ns,
                "flops": x.flops,
                "unknown_flops_gpu_ns": x.unknown_flops_ns,
                "flops_share": x.flop_share,
                "gpu_time_share": x.time_share,
                "gpu_time_share_all": x.time_share_all,
            }
            for c, x in s.items()
        },
        "top_kernels": tops,
    }
    with open(os.path.join(args.out, "op_classes.json"), "w") as f:
        json.dump(result, f, indent=1)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
