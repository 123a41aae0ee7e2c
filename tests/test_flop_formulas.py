"""opcost's FLOP formulas against torch.utils.flop_counter's own (skipped where torch is not installed)."""

from __future__ import annotations

import json

import pytest

from analyzers.cost.op_families import Family
from analyzers.cost.opcost import op_cost, parse_args

torch = pytest.importorskip("torch")
from torch.utils.flop_counter import flop_registry  # noqa: E402

aten = torch.ops.aten
BF16 = "c10::BFloat16"


def ours(name, shapes, **kw):
    return op_cost(name, parse_args(json.dumps(shapes), json.dumps([BF16] * len(shapes))), **kw).flops


@pytest.mark.parametrize(
    ("op", "name", "shapes"),
    [
        (aten.mm, "aten::mm", [[512, 256], [256, 128]]),
        (aten.bmm, "aten::bmm", [[8, 512, 64], [8, 64, 512]]),
        (aten.addmm, "aten::addmm", [[128], [512, 256], [256, 128]]),
        (aten.baddbmm, "aten::baddbmm", [[8, 512, 512], [8, 512, 64], [8, 64, 512]]),
    ],
)
def test_matmul_family(op, name, shapes):
    assert ours(name, shapes) == flop_registry[op](*map(tuple, shapes), out_val=None)


def test_convolution_forward_and_backward():
    x, w, out = (8, 64, 56, 56), (128, 64, 3, 3), (8, 128, 28, 28)
    theirs = flop_registry[aten.convolution](x, w, None, (2, 2), (1, 1), (1, 1), False, out_val=out)
    assert ours("aten::cudnn_convolution", [list(x), list(w)], out_spatial_hint=out[2:]) == theirs
    bwd = flop_registry[aten.convolution_backward](
        out, x, w, None, (2, 2), (1, 1), (1, 1), False, (0, 0), 1, [True, True, False], out_val=(x, w, None)
    )
    assert ours("aten::convolution_backward", [list(out), list(x), list(w)]) == bwd
    only_w = flop_registry[aten.convolution_backward](
        out, x, w, None, (2, 2), (1, 1), (1, 1), False, (0, 0), 1, [False, True, False], out_val=(x, w, None)
    )
    shapes = [list(out), list(x), list(w)]
    assert ours("aten::convolution_backward", shapes, conv_backward_mask=(False, True)) == only_w


def test_attention_forward_and_backward():
    q = k = v = (2, 8, 256, 64)
    fwd = flop_registry[aten._scaled_dot_product_flash_attention](q, k, v, out_val=None)
    assert ours("aten::_scaled_dot_product_flash_attention", [list(q)] * 3) == fwd
    bwd = flop_registry[aten._scaled_dot_product_flash_attention_backward](q, q, k, v, out_val=None)
    assert ours("aten::_scaled_dot_product_flash_attention_backward", [list(q)] * 4) == bwd


# every SDPA backend, forward and backward, (batch, heads, seq, dim); K and V longer than Q, V's head dim apart
Q, K, V = (2, 8, 256, 64), (2, 8, 384, 64), (2, 8, 384, 32)


@pytest.mark.parametrize(
    "name",
    [
        "aten::scaled_dot_product_attention",
        "aten::_scaled_dot_product_cudnn_attention",
        "aten::_cudnn_attention_forward",
        "aten::_scaled_dot_product_efficient_attention",
        "aten::_scaled_dot_product_flash_attention",
        "aten::_scaled_dot_product_attention_math",
    ],
)
def test_sdpa_forward_every_backend(name):
    for op in (aten._scaled_dot_product_cudnn_attention, aten._scaled_dot_product_efficient_attention):
        assert ours(name, [list(Q), list(K), list(V)]) == flop_registry[op](Q, K, V, out_val=None)


@pytest.mark.parametrize(
    "name",
    [
        "aten::_scaled_dot_product_cudnn_attention_backward",
        "aten::_cudnn_attention_backward",
        "aten::_scaled_dot_product_efficient_attention_backward",
        "aten::_scaled_dot_product_flash_attention_backward",
    ],
)
def test_sdpa_backward_every_backend(name):
    out = Q[:3] + V[3:]
    for op in (
        aten._scaled_dot_product_cudnn_attention_backward,
        aten._scaled_dot_product_efficient_attention_backward,
    ):
        assert ours(name, [list(out), list(Q), list(K), list(V)]) == flop_registry[op](out, Q, K, V)


def bshd(shape):
    b, h, s, d = shape
    return [b, s, h, d]


def nested(shape, efficient):
    """The same batch as one jagged tensor: (total tokens, heads, dim), with a leading 1 for efficient
    attention. flop_counter's dense path for these ops reads a (batch, seq, heads, dim) tensor as (batch, heads,
    seq, dim); its nested path reads seq and heads where the kernels keep them."""
    b, h, s, d = shape
    t = torch.empty((1, b * s, h, d) if efficient else (b * s, h, d), device="meta")
    return t, torch.arange(0, (b + 1) * s, s), s


def bshd_reference(op, efficient, shapes, grad=False):
    (q, cq, mq), (k, ck, mk), (v, _, _) = (nested(s, efficient) for s in shapes)
    if not grad:
        if efficient:
            return flop_registry[op](q, k, v, None, cq, ck, mq, mk)
        return flop_registry[op](q, k, v, cq, ck, mq, mk)
    go = torch.empty(q.shape, device="meta")
    if efficient:
        return flop_registry[op](go, q, k, v, None, go, cq, ck, mq, mk)
    return flop_registry[op](go, q, k, v, go, None, cq, ck, mq, mk)


@pytest.mark.parametrize(
    ("name", "op", "efficient"),
    [
        ("aten::_flash_attention_forward", aten._flash_attention_forward, False),
        ("flash_attn::_flash_attn_forward", aten._flash_attention_forward, False),
        ("aten::_efficient_attention_forward", aten._efficient_attention_forward, True),
    ],
)
def test_bshd_attention_forward(name, op, efficient):
    assert ours(name, [bshd(Q), bshd(K), bshd(V)]) == bshd_reference(op, efficient, (Q, K, V))


@pytest.mark.parametrize(
    ("name", "op", "efficient"),
    [
        ("aten::_flash_attention_backward", aten._flash_attention_backward, False),
        ("flash_attn::_flash_attn_backward", aten._flash_attention_backward, False),
        ("aten::_efficient_attention_backward", aten._efficient_attention_backward, True),
    ],
)
def test_bshd_attention_backward(name, op, efficient):
    v = K  # flop_counter's nested backward wants grad_out shaped like the query: d_v = d
    theirs = bshd_reference(op, efficient, (Q, K, v), grad=True)
    assert ours(name, [bshd(Q), bshd(Q), bshd(K), bshd(v)]) == theirs


def test_cudnn_attention_as_recorded_on_an_h200():
    """The argument lists torch.profiler recorded for GPT-2 small (B=8, T=1024, bf16) on an H200."""
    bhsd, lse = [8, 12, 1024, 64], [8, 12, 1024, 1]
    fwd = op_cost(
        "aten::_cudnn_attention_forward",
        parse_args(json.dumps([bhsd] * 3 + [[]] * 10), json.dumps([BF16] * 3 + [""] * 3 + ["Scalar"] * 7)),
    )
    t = 8 * 12 * 1024 * 64 * 2  # one (b, h, s, d) bf16 tensor
    assert fwd.family == Family.ATTENTION
    assert (
        fwd.flops
        == 4 * 8 * 12 * 1024 * 1024 * 64
        == flop_registry[aten._scaled_dot_product_cudnn_attention](
            tuple(bhsd), tuple(bhsd), tuple(bhsd), out_val=None
        )
    )
    assert fwd.bytes == 4 * t  # reads q, k, v; writes out
    shapes = [bhsd] * 5 + [lse] + [[]] * 10
    dtypes = [BF16] * 5 + ["float", "long int", "long int", "", "", ""] + ["Scalar"] * 5
    bwd = op_cost("aten::_cudnn_attention_backward", parse_args(json.dumps(shapes), json.dumps(dtypes)))
    assert bwd.family == Family.ATTENTION_BACKWARD
    assert bwd.flops == 2.5 * fwd.flops
    assert bwd.bytes == 8 * t  # reads grad_out, q, k, v, out; writes dq, dk, dv


def cost(name, shapes, dtypes):
    return op_cost(name, parse_args(json.dumps(shapes), json.dumps(dtypes)))


F32 = "float"
NCHW = [128, 256, 56, 56]
X = 128 * 256 * 56 * 56  # elements


def test_norm_bytes():
    c = [256]
    bn = cost("aten::native_batch_norm", [NCHW, c, c, c, c, [], [], []], [BF16] + [F32] * 4 + ["Scalar"] * 3)
    assert bn.bytes == 2 * X * 2 + 4 * 256 * 4 + X * 2  # statistics pass, normalise pass, writes y
    assert bn.flops == 8 * X
    bwd = cost(
        "aten::native_batch_norm_backward",
        [NCHW, NCHW, c, c, c, c, c, [], [], []],
        [BF16, BF16] + [F32] * 5 + ["Scalar", "Scalar", "ScalarList"],
    )
    assert bwd.bytes == 2 * (X * 2 + X * 2) + 5 * 256 * 4 + X * 2  # reduce pass, grad-input pass, writes gi
    cudnn = cost(
        "aten::cudnn_batch_norm_backward", [NCHW, NCHW, c, c, c, c, c, []], [BF16, BF16] + [F32] * 5 + [""]
    )
    assert cudnn.bytes == bwd.bytes  # (input, grad_out, ...): the same tensors in another order
    rows, d = [8, 1024, 768], [768]
    n = 8 * 1024 * 768
    ln = cost("aten::native_layer_norm", [rows, [], d, d, []], [F32, "ScalarList", F32, F32, "Scalar"])
    assert ln.bytes == n * 4 + 2 * 768 * 4 + n * 4  # one pass: reads x, weight, bias; writes y
    ln_bwd = cost(
        "aten::native_layer_norm_backward",
        [rows, rows, [], [8, 1024, 1], [8, 1024, 1], d, d, []],
        [F32, F32, "ScalarList", F32, F32, F32, F32, "ScalarList"],
    )
    assert ln_bwd.bytes == 2 * (n * 4 + n * 4) + 2 * 8192 * 4 + 2 * 768 * 4 + n * 4
    rms = cost("aten::_fused_rms_norm", [rows, [], d, []], [BF16, "ScalarList", BF16, "Scalar"])
    assert rms.bytes == n * 2 + 768 * 2 + n * 2
    gn = cost("aten::native_group_norm", [NCHW, c, c, [], [], [], [], []], [BF16, F32, F32] + ["Scalar"] * 5)
    assert gn.bytes == 2 * X * 2 + 2 * 256 * 4 + X * 2


def test_cross_entropy_pieces_touch_one_element_per_target():
    logits, target = [8192, 50257], [8192]
    nll = cost(
        "aten::nll_loss_forward", [logits, target, [], [], []], [F32, "long int", "", "Scalar", "Scalar"]
    )
    assert nll.bytes == 8192 * 8 + 8192 * 4  # the targets and one log-probability each
    assert nll.flops == 8192
    weighted = cost(
        "aten::nll_loss_forward",
        [logits, target, [50257], [], []],
        [F32, "long int", F32, "Scalar", "Scalar"],
    )
    assert weighted.bytes == 8192 * 8 + 8192 * (4 + 4)  # and one class weight each
    back = cost(
        "aten::nll_loss_backward",
        [[], logits, target, [], [], [], []],
        [F32, F32, "long int", "", "Scalar", "Scalar", F32],
    )
    assert back.bytes == 4 + 8192 * 8 + 8192 * 4  # grad_out, targets, one gradient written each
    assert back.output is not None and back.output.shape == (8192, 50257)
    seg = cost(
        "aten::nll_loss2d_forward", [[4, 21, 64, 64], [4, 64, 64], [], [], []], [BF16, "long int", "", "", ""]
    )
    assert seg.bytes == 4 * 64 * 64 * (8 + 2)
    ce = cost(
        "aten::cross_entropy_loss", [logits, target, [], [], [], []], [F32, "long int", ""] + ["Scalar"] * 3
    )
    assert ce.bytes == 2 * 8192 * 50257 * 4 + 8192 * 8 + 8192 * 4  # log_softmax reads and writes, nll picks
    soft = cost("aten::_log_softmax_backward_data", [logits, logits, [], []], [F32, F32, "Scalar", "Scalar"])
    assert soft.bytes == 3 * 8192 * 50257 * 4  # reads grad and output, writes grad_input


def test_embedding_backward_and_gather():
    go, idx = [8, 1024, 768], [8, 1024]
    n = 8 * 1024 * 768
    for name in ("aten::embedding_dense_backward", "aten::embedding_backward"):
        e = cost(name, [go, idx, [], [], []], [F32, "long int", "Scalar", "Scalar", "Scalar"])
        assert e.bytes == 2 * n * 4 + 4 * 8192 * 8  # reads grad_out, writes a row per index, sorts indices
        assert e.flops == n
    g = cost(
        "aten::gather",
        [[50257, 768], [], [8192, 768], [], [8192, 768]],
        [F32, "Scalar", "long int", "Scalar", F32],
    )
    assert g.output is not None and g.output.shape == (8192, 768)
    assert g.bytes == 8192 * 768 * (8 + 4 + 4)  # reads the index and one element per index; writes out


@pytest.mark.parametrize(
    "name", ["aten::_fused_adamw_", "aten::_fused_adam_", "aten::_fused_sgd_", "aten::_foreach_add_"]
)
def test_tensor_list_ops_stay_unknown(name):
    """TensorList arguments are recorded as dims [] and type "TensorList": no per-tensor sizes to count."""
    c = cost(name, [[], [], []], ["TensorList", "TensorList", "Scalar"])
    assert (c.flops, c.bytes, c.tensor_list, c.family) == (None, None, True, Family.FOREACH)
