"""A Hugging Face KV cache built in training: copies that no backward pass reads.

Hugging Face models default to `use_cache=True`, so a training forward builds the generation cache too: each
attention layer hands its keys and values to `Cache.update` (transformers/cache_utils.py), which appends them
with `torch.cat` (a `CatArrayBatchedCopy` kernel for K and one for V, per layer, per step). Training never
reads the cache; `use_cache=False` skips it. The finding needs the library line the recording keeps for each
torch call (SPAN_SCHEMA's `lib_line`), and a window with a backward pass (autograd nodes, `fwd_tid` > 0)::

    forward   GPT2Attention  [c_attn][cat K][cat V][sdpa] ...    cat K, cat V: cache_utils.py update()
    backward  ... [sdpa bwd] ...                                  nothing reads the cache

Saving per step = the GPU time of the rows launched from the cache file + one launch each, costed as fusion
costs a launch fused away (launch_timing.unprofiled_launch_ns).
"""

from __future__ import annotations

import re

import numpy as np

from analyzers import launch_timing as lt
from analyzers.finding_context import MIN_SAVING_SHARE, Context, count_lines, where
from analyzers.lines import unprofiled_idle_scale
from analyzers.results import Finding, FindingKind
from brrrtui.contract.units import fmt_ns

# package paths of the files that build a model library's KV cache
CACHE_FILES = ("transformers/cache_utils.py",)

KV_CACHE_ACTION = (
    "pass use_cache=False to the model call (or set model.config.use_cache = False) when training"
)

_KERNEL_NAME = re.compile(r"(\w+)\s*[<(]")


def is_cache_file(path: str) -> bool:
    """True for a model library's cache file wherever it is installed (`…/site-packages/transformers/cache_utils.py`,
    or relative as foreign traces write it)."""
    normal = path.replace("\\", "/")
    return any(normal == f or normal.endswith("/" + f) for f in CACHE_FILES)


def training_windows(ctx: Context) -> np.ndarray:
    """The windows with a backward pass: some op in them is an autograd node running backward."""
    ops = ctx.trace.ops
    return np.unique(ops.window[ops.fwd_tid > 0]) if len(ops) else np.empty(0, dtype=np.int32)


def cache_rows(ctx: Context) -> np.ndarray:
    """GPU rows launched from a cache file (their innermost library line) inside a window with a backward."""
    trace, lib = ctx.trace, ctx.links.kernel_lib_line
    if not len(trace.gpu) or not (lib >= 0).any():
        return np.empty(0, dtype=np.int64)
    in_cache = np.fromiter((is_cache_file(ln.file) for ln in trace.lines), bool, len(trace.lines))
    if not in_cache.any():
        return np.empty(0, dtype=np.int64)
    hit = (lib >= 0) & in_cache[np.maximum(lib, 0)]
    hit &= np.isin(trace.gpu.window, training_windows(ctx))
    return np.nonzero(hit)[0]


def unprofiled_launch_ns(ctx: Context) -> float:
    """What one launch costs in a step without the profiler, as the fusion findings credit a launch."""
    b = ctx.breakdown
    gaps = lt.same_stream_gaps(ctx.trace, ~ctx.roof.host_copy)
    scale = unprofiled_idle_scale(b.idle_ns or 0, b.busy_ns, ctx.steps, ctx.overhead.unprofiled_step_ns)
    return lt.unprofiled_launch_ns(gaps, scale) or 0.0


def kernel_label(name: str) -> str:
    """`CatArrayBatchedCopy` out of `void at::native::(anonymous namespace)::CatArrayBatchedCopy<…>(…)`."""
    found = _KERNEL_NAME.search(name)
    return found.group(1) if found else name[:40]


def kv_cache_findings(ctx: Context) -> list[Finding]:
    rows = cache_rows(ctx)
    if not len(rows):
        return []
    trace, per, unit = ctx.trace, ctx.per, ctx.unit
    gpu_ns = float(trace.gpu.dur_ns[rows].sum()) / per
    launches = len(rows) / per
    launch_ns = unprofiled_launch_ns(ctx)
    saving = gpu_ns + launches * launch_ns
    if saving < MIN_SAVING_SHARE * ctx.step_ns:
        return []
    names = ", ".join(dict.fromkeys(kernel_label(trace.name(int(n))) for n in trace.gpu.name[rows].tolist()))
    lib_ids = np.unique(ctx.links.kernel_lib_line[rows]).tolist()
    lib = trace.lines[lib_ids[0]]
    nums = ", ".join(str(trace.lines[i].line) for i in lib_ids[:4])
    lines = ctx.source_lines(count_lines(ctx.links.kernel_line[rows]))
    msg = (
        f"the model call on {where(lines)} builds Hugging Face's KV cache while training:"
        f" {launches:.3g} {names} kernels per {unit} from {_package_file(lib.file)}:{nums} ({lib.function}),"
        f" {fmt_ns(gpu_ns)} of GPU time per {unit} plus their launches (~{fmt_ns(launch_ns)} each);"
        f" the backward never reads the cache: ~{fmt_ns(saving)} per {unit}"
    )
    window = int(trace.gpu.window[rows].min())
    return [Finding(FindingKind.KV_CACHE, lines, saving, msg, KV_CACHE_ACTION, tuple(rows.tolist()), window)]


def _package_file(path: str) -> str:
    """`transformers/cache_utils.py` out of an installed path."""
    normal = path.replace("\\", "/")
    return next((f for f in CACHE_FILES if normal.endswith(f)), normal)
