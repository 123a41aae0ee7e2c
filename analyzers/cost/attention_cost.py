"""FLOPs and bytes of attention: every SDPA backend (flash, memory-efficient, cuDNN, math, CPU flash), forward and
backward, and the `flash_attn` package's ops.

FLOPs re-implement `torch.utils.flop_counter` (forward: QK^T and PV, 2·b·h·s_q·s_k·(d + d_v); backward: five
bmms, recomputed QK^T, dV, dP, dQ, dK), with the query's head count (GQA/MQA broadcast K and V). Ops that take
(batch, seq, heads, dim) tensors (`_flash_attention_*`, `_efficient_attention_*`, `flash_attn::*`) are
permuted to (batch, heads, seq, dim) first.

Causal masks: a causal kernel skips the masked upper triangle, so its FLOPs are the full count times the
share of (query, key) pairs the mask keeps, top-left aligned as torch's `is_causal` is (query i sees keys
0..i): (s+1)/(2s) for s_q = s_k = s, forward and backward alike. `torch.utils.flop_counter` counts causal
attention in full (its sdpa formulas say so); a causal call is halved here only when the recording says it was
causal: `is_causal` (or the efficient kernels' `custom_mask_type`) is a scalar argument, which Kineto gives only
as a `Concrete Inputs` value; without it (recordings keep shapes and dtype names, and GPT-2 (causal) and BERT
(not causal) call the same ops with the same argument types) attention counts in full, which overstates a
causal kernel's FLOP/s up to 2x. `is_causal` reads the argument's position from CAUSAL_ARG (checked against
torch's own schemas in tests/test_flop_formulas.py).

Bytes are each tensor read or written once (the kernels stream Q, K, V through shared memory): forward reads
q, k, v and writes the output (the query's shape with the value's head dim); backward reads grad_out, q, k, v
and out (grad_out's shape) and writes dq, dk, dv. The log-sum-exp and RNG state are too small to count.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass

from analyzers.cost.op_families import ATTENTION_BACKWARD_BSHD, ATTENTION_BSHD, Family, family_of
from analyzers.cost.tensor_args import FP32, SIXTEEN_BIT_FLOAT, TensorArg, Traffic

# op -> ((argument count, index of is_causal / custom_mask_type), ...): overloads differ in argument count
CAUSAL_ARG: dict[str, tuple[tuple[int, int], ...]] = {
    "scaled_dot_product_attention": ((8, 5),),
    "_scaled_dot_product_attention_math": ((9, 5),),
    "_scaled_dot_product_flash_attention": ((7, 4), (10, 7)),
    "_scaled_dot_product_efficient_attention": ((8, 6),),
    "_scaled_dot_product_cudnn_attention": ((9, 6),),
    "_scaled_dot_product_flash_attention_for_cpu": ((7, 4),),
    "_scaled_dot_product_fused_attention_overrideable": ((8, 5),),
    "_flash_attention_forward": ((17, 8), (18, 8)),
    "_efficient_attention_forward": ((14, 9),),
    "_cudnn_attention_forward": ((13, 10),),
    "_scaled_dot_product_flash_attention_backward": ((15, 11),),
    "_scaled_dot_product_efficient_attention_backward": ((13, 11),),
    "_scaled_dot_product_cudnn_attention_backward": ((16, 14),),
    "_scaled_dot_product_flash_attention_for_cpu_backward": ((10, 7),),
    "_scaled_dot_product_fused_attention_overrideable_backward": ((17, 13),),
    "_flash_attention_backward": ((17, 11),),
    "_efficient_attention_backward": ((20, 14),),
    "_cudnn_attention_backward": ((16, 14),),
}
_TRUE = {"true", "1", "1."}
_MASK_TYPE_OPS = {"_efficient_attention_forward", "_efficient_attention_backward"}


def is_causal(op: str, concrete: list[object]) -> bool | None:
    """Whether an attention op (base name) was causal, from its `Concrete Inputs` (one entry per argument;
    None where the op or the argument count is not in CAUSAL_ARG, or the value is missing)."""
    for n_args, i in CAUSAL_ARG.get(op, ()):
        if len(concrete) == n_args:
            v = concrete[i]
            if v is None or v == "":
                return None
            text = str(v).strip().lower()
            if op in _MASK_TYPE_OPS:  # custom_mask_type: 0 none, 1 and 2 causal (top-left, bottom-right)
                return text not in ("0", "0.")
            return text in _TRUE
    return None


def causal_fraction(s_q: int, s_k: int) -> float:
    """The share of (query, key) pairs a top-left causal mask keeps: query i sees keys 0..i."""
    if s_q <= 0 or s_k <= 0:
        return 1.0
    kept = s_q * (s_q + 1) / 2 if s_q <= s_k else s_k * (s_k + 1) / 2 + (s_q - s_k) * s_k
    return kept / (s_q * s_k)


def sdpa_flops(q: tuple[int, ...], k: tuple[int, ...], v: tuple[int, ...]) -> float:
    """(b, h, s, d) layout. QK^T plus PV; GQA (fewer KV heads) broadcasts KV, so the query's heads count."""
    b, h, s_q, d = q
    s_k, d_v = k[2], v[3]
    return 2.0 * b * h * s_q * s_k * d + 2.0 * b * h * s_q * s_k * d_v


def sdpa_backward_flops(q: tuple[int, ...], k: tuple[int, ...], v: tuple[int, ...]) -> float:
    """flop_counter's sdpa_backward_flop_count: recompute QK^T, dV, dP, dQ, dK (five bmms)."""
    b, h, s_q, d = q
    s_k, d_v = k[2], v[3]
    return 2.0 * b * h * (s_q * s_k * d + s_q * s_k * d_v + s_k * s_q * d_v + s_q * s_k * d + s_q * s_k * d)


def _bshd_to_bhsd(t: TensorArg) -> TensorArg:
    if len(t.shape) != 4:
        return t
    b, s, h, d = t.shape
    return TensorArg((b, h, s, d), t.dtype)


def attention(ts: list[TensorArg], bshd: bool, in_bytes: float, causal: bool = False) -> Traffic:
    """Forward attention: `ts` starts with q, k, v."""
    q, k, v = ts[0], ts[1], ts[2]
    if bshd:
        q, k, v = _bshd_to_bhsd(q), _bshd_to_bhsd(k), _bshd_to_bhsd(v)
    if not all(len(t.shape) == 4 for t in (q, k, v)):
        return None, None, in_bytes, 0.0
    out = TensorArg((*q.shape[:3], v.shape[3]), q.dtype)
    share = causal_fraction(q.shape[2], k.shape[2]) if causal else 1.0
    return share * sdpa_flops(q.shape, k.shape, v.shape), out, float(q.nbytes + k.nbytes + v.nbytes), 0.0


def attention_backward(ts: list[TensorArg], bshd: bool, in_bytes: float, causal: bool = False) -> Traffic:
    """Backward attention: `ts` starts with grad_out, q, k, v (every backend's argument order)."""
    go, q, k, v = ts[0], ts[1], ts[2], ts[3]
    if bshd:
        go, q, k, v = (_bshd_to_bhsd(t) for t in (go, q, k, v))
    if not all(len(t.shape) == 4 for t in (go, q, k, v)):
        return None, None, in_bytes, 0.0
    # reads grad_out, q, k, v, out (grad_out's shape); writes dq, dk, dv
    read = float(2 * go.nbytes + q.nbytes + k.nbytes + v.nbytes)
    share = causal_fraction(q.shape[2], k.shape[2]) if causal else 1.0
    flops = share * sdpa_backward_flops(q.shape, k.shape, v.shape)
    return flops, None, read, float(q.nbytes + k.nbytes + v.nbytes)


# ------------------------------------------------------------------------------------ why a kernel runs slow
#
# Which SDPA backend ran is the op's name (`_scaled_dot_product_flash_attention` and the `_flash_attention_*`
# it calls: flash; `_efficient_*`: the memory-efficient CUTLASS kernels; `_cudnn_*`: cuDNN; the `_math` op:
# the fallback of separate matmul, softmax and matmul kernels). What each backend takes is torch's
# aten/src/ATen/native/transformers/cuda/sdp_utils.cpp (`can_use_flash_attention`,
# `can_use_mem_efficient_attention`, `can_use_cudnn_attention`, `select_sdp_backend`): flash and cuDNN take
# fp16/bf16 only, flash no attn_mask and head dims equal and at most 256; the efficient kernels take fp32 too
# and a mask, with head dims a multiple of 8 (16-bit) or 4 (fp32) on sm80+; the math fallback takes the rest.
# The efficient kernels' fp32 GEMMs run on the tensor cores as three TF32 products per multiply
# (`OpMultiplyAddFastF32`, mem_eff_attention/gemm_kernel_utils.h `DefaultGemmType<ArchTag, float>`): fp32
# accuracy at a fraction of the 16-bit rate. Flash's kernels are built for head dims FLASH_HEAD_DIMS
# (flash_attn/static_switch.h `HEADDIM_SWITCH`): any other runs in the next larger one, its columns past the
# head dim computed and thrown away.

FLASH_HEAD_DIMS = (32, 64, 96, 128, 160, 192, 256)
SHORT_SEQ = 128  # keys a flash / efficient kernel walks in one tile: no pipeline to hide its loads
TILE_ROWS = 64  # query rows per thread block: the smallest of the backends' forward kernels (fewest tiles)

# op -> index of its attn_mask / attn_bias argument (checked against torch's schemas in the tests)
MASK_ARG: dict[str, int] = {
    "scaled_dot_product_attention": 3,
    "_scaled_dot_product_attention_math": 3,
    "_scaled_dot_product_efficient_attention": 3,
    "_scaled_dot_product_cudnn_attention": 3,
    "_scaled_dot_product_fused_attention_overrideable": 3,
    "_efficient_attention_forward": 3,
    "_cudnn_attention_forward": 3,
    "_scaled_dot_product_efficient_attention_backward": 4,
    "_efficient_attention_backward": 4,
    "_scaled_dot_product_cudnn_attention_backward": 8,
    "_cudnn_attention_backward": 8,
}
MATH_OPS = {"_scaled_dot_product_attention_math", "_scaled_dot_product_attention_math_for_mps"}


def backend_of(op: str) -> str:
    """flash, efficient, cudnn, math or other (the `flash_attn` package's ops: flash), from an op's base name."""
    if op in MATH_OPS:
        return "math"
    for key in ("cudnn", "efficient", "flash"):
        if key in op:
            return key
    return "other"


@dataclass(frozen=True)
class AttentionShape:
    """One attention call's sizes, (batch, heads, seq, head_dim) as SDPA takes them."""

    batch: int
    heads: int
    s_q: int
    s_k: int
    head_dim: int
    head_dim_v: int
    dtype: str  # the recorded dtype name ("c10::BFloat16")

    @property
    def text(self) -> str:
        """ "batch=8 heads=16 seq=4096 head_dim=64 bf16" """
        seq = f"seq={self.s_q}" if self.s_q == self.s_k else f"seq_q={self.s_q} seq_k={self.s_k}"
        dim = f"head_dim={self.head_dim}" + (
            f" (v {self.head_dim_v})" if self.head_dim_v != self.head_dim else ""
        )
        return f"batch={self.batch} heads={self.heads} {seq} {dim} {dtype_word(self.dtype)}"


def dtype_word(dtype: str) -> str:
    """ "bf16", "fp16", "fp32", or the recorded name."""
    low = dtype.lower()
    if "bfloat16" in low:
        return "bf16"
    if "half" in low or low == "float16":
        return "fp16"
    if low in FP32:
        return "fp32"
    return "fp64" if low in ("double", "float64") else dtype


def attention_shape(op: str, inputs: Sequence[TensorArg | None]) -> AttentionShape | None:
    """The call's sizes from an attention op's recorded q, k, v (forward: the first three tensors; backward:
    the three after grad_out); None when they are not 4-d."""
    ts = [t for t in inputs if t is not None]
    backward = family_of("aten::" + op) == Family.ATTENTION_BACKWARD
    qkv = ts[1:4] if backward else ts[:3]
    if len(qkv) < 3 or not all(len(t.shape) == 4 for t in qkv):
        return None
    if op in ATTENTION_BSHD or op in ATTENTION_BACKWARD_BSHD:
        qkv = [_bshd_to_bhsd(t) for t in qkv]
    q, k, v = qkv
    b, h, s_q, d = q.shape
    return AttentionShape(b, h, s_q, k.shape[2], d, v.shape[3], q.dtype)


def mask_arg(op: str, inputs: Sequence[TensorArg | None]) -> TensorArg | None:
    """The attn_mask tensor the call passed (at MASK_ARG), None when it passed none or the op takes none."""
    i = MASK_ARG.get(op)
    return inputs[i] if i is not None and i < len(inputs) else None


def has_mask(op: str, inputs: Sequence[TensorArg | None]) -> bool | None:
    """Whether the call passed an attn_mask (a tensor at MASK_ARG); None for ops that take none (flash)."""
    return None if op not in MASK_ARG else mask_arg(op, inputs) is not None


def mask_spans_pairs(op: str, inputs: Sequence[TensorArg | None], s: AttentionShape) -> bool:
    """The call's attn_mask has one entry per (query, key) pair (its last two dims s_q x s_k), as a causal mask
    does, rather than broadcasting over the queries (a key-padding mask, (..., 1, s_k))."""
    mask = mask_arg(op, inputs)
    return mask is not None and len(mask.shape) >= 2 and tuple(mask.shape[-2:]) == (s.s_q, s.s_k)


def flash_head_dim(d: int) -> int:
    """The head dim of the flash kernel that runs head dim `d` (FLASH_HEAD_DIMS; `d` itself past them)."""
    return next((k for k in FLASH_HEAD_DIMS if k >= d), d)


# cuDNN's generated SDPA kernels name their tile after `knob_<n>_`: query rows x key rows x head dim. On an H100
# (torch 2.11, cuDNN's sm90 kernels) head_dim 64 ran `..._fprop_wgmma_f16_knob_7_64x128x64_...` and
# `..._bprop_wgmma_f16_knob_26_64x64x64_...`, head_dim 200 `..._knob_7_64x128x256_...` and
# `..._knob_26_64x64x256_...`: the tile's head dim past the call's is computed and thrown away.
_CUDNN_TILE = re.compile(r"cudnn_generated\w*sdpa\w*?_knob_\d+_(\d+)x(\d+)x(\d+)")


def cudnn_head_dim(kernel: str) -> int | None:
    """The head dim of a cuDNN SDPA kernel's tile, from its name; None for any other kernel."""
    m = _CUDNN_TILE.search(kernel)
    return int(m.group(3)) if m else None


@dataclass(frozen=True)
class AttentionDiagnosis:
    """Why an attention kernel runs under its roof (`diagnose_attention`).

    cause:  fp32        the efficient kernel on fp32 operands (three TF32 products per multiply)
            mask        an explicit attn_mask on the efficient or cuDNN kernel: every (query, key) pair computed
                        and the mask read; flash takes no mask
            head_dim    flash ran a head dim not among FLASH_HEAD_DIMS in the next larger kernel, or cuDNN ran
                        it in a kernel whose tile (its name, `cudnn_head_dim`) has a larger head dim
            short       at most SHORT_SEQ keys, or fewer query tiles than SMs: too little work per launch
            not_flash   the efficient kernel on a call flash takes (16-bit, no mask, head dims equal, <= 256)
            math        the math fallback (separate matmul, softmax and matmul kernels); `why` says what of
                        the recorded inputs rules the fused kernels out: dtype, fp32_align, head_dim, or
                        "" when nothing recorded does (backends turned off, strides or storage offsets)
    """

    cause: str
    backend: str  # flash, efficient, cudnn, math, other
    shape: AttentionShape
    mask: bool | None  # an explicit attn_mask was passed (None: the op takes none)
    causal: bool | None  # from the recorded Concrete Inputs; None when not recorded
    work: float = 1.0  # useful FLOPs over the kernel's: head_dim / the flash or cuDNN kernel's head dim
    why: str = ""  # math: what rules the fused kernels out
    dims: tuple[int, ...] = ()  # the offending values: (head_dim, kernel's), (tiles, SMs), (s_k,)
    pair_mask: bool = False  # mask: its last two dims are (s_q, s_k), one entry per (query, key) pair, as a
    #                          causal mask has (a key-padding mask broadcasts over the queries: s_q of 1)


def _math_why(s: AttentionShape, mask: bool | None) -> str:
    d, dv = s.head_dim, s.head_dim_v
    half, fp32 = s.dtype in SIXTEEN_BIT_FLOAT, s.dtype in FP32
    if not half and not fp32:
        return "dtype"
    if fp32 and (d % 4 or dv % 4):
        return "fp32_align"
    if half and (d % 8 or dv % 8) and (mask or d > 256 or d != dv):
        return "head_dim"  # flash refuses the mask, the size or the unequal dims; efficient the alignment
    return ""


def diagnose_attention(
    op: str,
    inputs: Sequence[TensorArg | None],
    causal: bool | None,
    sms: int | None,
    kernel_head_dim: int | None = None,
) -> AttentionDiagnosis | None:
    """The cause of a slow attention kernel from its op's base name, recorded inputs and is_causal (the
    class doc, strongest first); None when the recorded shapes say nothing (cause unknown).
    `kernel_head_dim`: the head dim of the cuDNN kernel's tile that ran the call (`cudnn_head_dim`)."""
    s = attention_shape(op, inputs)
    if s is None:
        return None
    backend, mask = backend_of(op), has_mask(op, inputs)
    if backend == "math":
        return AttentionDiagnosis("math", backend, s, mask, causal, why=_math_why(s, mask))
    if backend == "efficient" and s.dtype in FP32:
        return AttentionDiagnosis("fp32", backend, s, mask, causal)
    if mask and backend in ("efficient", "cudnn"):
        return AttentionDiagnosis("mask", backend, s, mask, causal, pair_mask=mask_spans_pairs(op, inputs, s))
    if backend == "flash":
        k = flash_head_dim(s.head_dim)
        if k != s.head_dim:
            return AttentionDiagnosis(
                "head_dim", backend, s, mask, causal, s.head_dim / k, dims=(s.head_dim, k)
            )
    if backend == "cudnn" and kernel_head_dim is not None and kernel_head_dim > max(s.head_dim, s.head_dim_v):
        return AttentionDiagnosis(
            "head_dim", backend, s, mask, causal, s.head_dim / kernel_head_dim, dims=(s.head_dim, kernel_head_dim)
        )
    tiles = s.batch * s.heads * -(-s.s_q // TILE_ROWS)
    if sms and tiles < sms:
        return AttentionDiagnosis("short", backend, s, mask, causal, dims=(tiles, sms))
    if s.s_k <= SHORT_SEQ:
        return AttentionDiagnosis("short", backend, s, mask, causal, dims=(s.s_k,))
    flash_takes = s.dtype in SIXTEEN_BIT_FLOAT and not mask and s.head_dim == s.head_dim_v <= 256
    if backend == "efficient" and flash_takes and not (causal and s.s_q != s.s_k):
        return AttentionDiagnosis("not_flash", backend, s, mask, causal)
    return None
