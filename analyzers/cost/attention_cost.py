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

from analyzers.cost.tensor_args import TensorArg, Traffic

# op -> ((argument count, index of is_causal / custom_mask_type), ...): overloads differ in argument count
CAUSAL_ARG: dict[str, tuple[tuple[int, int], ...]] = {
    "scaled_dot_product_attention": ((8, 5),),
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
