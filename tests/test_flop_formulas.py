"""opcost's FLOP formulas against torch.utils.flop_counter's own (skipped where torch is not installed)."""

from __future__ import annotations

import json

import pytest

from analyzers.opcost import op_cost, parse_args

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
