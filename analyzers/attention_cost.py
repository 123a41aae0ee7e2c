"""FLOPs and bytes of attention: every SDPA backend (flash, memory-efficient, cuDNN, math, CPU flash), forward and
backward, and the `flash_attn` package's ops.

FLOPs re-implement `torch.utils.flop_counter` (forward: QK^T and PV, 2·b·h·s_q·s_k·(d + d_v); backward: five
bmms, recomputed QK^T, dV, dP, dQ, dK), with the query's head count (GQA/MQA broadcast K and V). Ops that take
(batch, seq, heads, dim) tensors (`_flash_attention_*`, `_efficient_attention_*`, `flash_attn::*`) are
permuted to (batch, heads, seq, dim) first.

Causal masks count in full, as flop_counter counts them. A causal kernel skips the masked upper triangle and
does about half of that work, but `is_causal` is a scalar argument and the recording keeps only shapes and dtype
names (no `Concrete Inputs`), so nothing recorded tells a causal call apart: on an H200, GPT-2 (causal) and BERT
(not causal) both call `scaled_dot_product_attention` with no mask, the same kernel names and the same argument
types. Inferring causality from a missing mask would halve BERT's FLOPs; counting in full overstates a causal
kernel's FLOP/s by up to 2x and keeps intensity (s_k/2 FLOP/byte for bf16, d = d_v) well above an H200's ridge
(~190) from s_k ~ 400, so the compute verdict holds either way for the sequences where it matters.

Bytes are each tensor read or written once (the kernels stream Q, K, V through shared memory): forward reads
q, k, v and writes the output (the query's shape with the value's head dim); backward reads grad_out, q, k, v
and out (grad_out's shape) and writes dq, dk, dv. The log-sum-exp and RNG state are too small to count.
"""

from __future__ import annotations

from analyzers.tensor_args import TensorArg, Traffic


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


def attention(ts: list[TensorArg], bshd: bool, in_bytes: float) -> Traffic:
    """Forward attention: `ts` starts with q, k, v."""
    q, k, v = ts[0], ts[1], ts[2]
    if bshd:
        q, k, v = _bshd_to_bhsd(q), _bshd_to_bhsd(k), _bshd_to_bhsd(v)
    if not all(len(t.shape) == 4 for t in (q, k, v)):
        return None, None, in_bytes, 0.0
    out = TensorArg((*q.shape[:3], v.shape[3]), q.dtype)
    return sdpa_flops(q.shape, k.shape, v.shape), out, float(q.nbytes + k.nbytes + v.nbytes), 0.0


def attention_backward(ts: list[TensorArg], bshd: bool, in_bytes: float) -> Traffic:
    """Backward attention: `ts` starts with grad_out, q, k, v (every backend's argument order)."""
    go, q, k, v = ts[0], ts[1], ts[2], ts[3]
    if bshd:
        go, q, k, v = (_bshd_to_bhsd(t) for t in (go, q, k, v))
    if not all(len(t.shape) == 4 for t in (go, q, k, v)):
        return None, None, in_bytes, 0.0
    # reads grad_out, q, k, v, out (grad_out's shape); writes dq, dk, dv
    read = float(2 * go.nbytes + q.nbytes + k.nbytes + v.nbytes)
    return sdpa_backward_flops(q.shape, k.shape, v.shape), None, read, float(q.nbytes + k.nbytes + v.nbytes)
