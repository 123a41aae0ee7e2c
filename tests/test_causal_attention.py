"""Causal attention's FLOPs (analyzers/cost/attention_cost.py): the share of (query, key) pairs the mask keeps,
applied when the recording holds the op's `Concrete Inputs`; the argument positions against torch's schemas."""

from __future__ import annotations

import dataclasses
import json

import numpy as np
import pytest
from fixtures.synthetic import BF16, TraceBuilder

from analyzers.cost.attention_cost import (
    CAUSAL_ARG,
    causal_fraction,
    is_causal,
    sdpa_backward_flops,
    sdpa_flops,
)
from analyzers.cost.opcost import op_cost, parse_args
from analyzers.cost.peaks import resolve_peaks
from analyzers.cost.roofline import roofline
from analyzers.link.links import link
from brrrtui.contract.model import Table

torch = pytest.importorskip("torch")
from torch.utils.flop_counter import flop_registry  # noqa: E402

aten = torch.ops.aten


def test_causal_argument_positions_match_torchs_schemas():
    for op, entries in CAUSAL_ARG.items():
        schemas = torch._C._jit_get_schemas_for_operator(f"aten::{op}")
        assert schemas, op
        for s in schemas:
            names = [a.name for a in s.arguments]
            i = next(j for j, n in enumerate(names) if n in ("is_causal", "custom_mask_type"))
            assert (len(names), i) in entries, (op, s.overload_name)


@pytest.mark.parametrize(("s_q", "s_k"), [(1024, 1024), (256, 384), (384, 256), (1, 7)])
def test_causal_share_is_the_kept_part_of_torchs_mask(s_q, s_k):
    mask = torch.ones(s_q, s_k, dtype=torch.float64).tril()  # what is_causal=True means in torch
    assert causal_fraction(s_q, s_k) == pytest.approx(float(mask.mean()), rel=1e-12)


def test_causal_op_costs_scale_flop_counters_full_count():
    q = [2, 12, 1024, 64]
    args = parse_args(json.dumps([q] * 3), json.dumps([BF16] * 3))
    full = op_cost("aten::_scaled_dot_product_cudnn_attention", args).flops
    half = op_cost("aten::_scaled_dot_product_cudnn_attention", args, causal=True).flops
    t = tuple(q)
    assert full == flop_registry[aten._scaled_dot_product_cudnn_attention](t, t, t, out_val=None)
    assert half == full * 1025 / 2048  # flop_counter has no causal formula: its full count x the kept share
    bargs = parse_args(json.dumps([q] * 4), json.dumps([BF16] * 4))
    bwd = op_cost("aten::_scaled_dot_product_cudnn_attention_backward", bargs, causal=True).flops
    theirs = flop_registry[aten._scaled_dot_product_cudnn_attention_backward](t, t, t, t, out_val=None)
    assert bwd == theirs * 1025 / 2048 == sdpa_backward_flops(t, t, t) * 1025 / 2048


@pytest.mark.parametrize("causal", [True, False])
def test_is_causal_reads_the_profilers_concrete_inputs(causal):
    """torch.profiler's own record of an SDPA call on the CPU: its Concrete Inputs say whether it was causal."""
    q = torch.randn(1, 2, 16, 8)
    with torch.profiler.profile(record_shapes=True) as prof:
        torch.nn.functional.scaled_dot_product_attention(q, q, q, is_causal=causal)
    seen = {}
    for e in prof.events():
        base = e.name.removeprefix("aten::")
        if base in CAUSAL_ARG and e.concrete_inputs:
            seen[base] = is_causal(base, list(e.concrete_inputs))
    assert seen and all(v is causal for v in seen.values()), seen


def test_efficient_attentions_mask_type():
    args = [""] * 14
    args[9] = 1  # custom_mask_type: causal from the top left
    assert is_causal("_efficient_attention_forward", args) is True
    args[9] = 0
    assert is_causal("_efficient_attention_forward", args) is False
    assert is_causal("_efficient_attention_forward", [""] * 3) is None  # another argument count: unknown


def test_a_recorded_causal_call_halves_its_kernels_flops():
    q = [4, 12, 1024, 64]
    b = TraceBuilder()
    ln = b.line("train.py", 43, "forward")
    b.span(ln, 0, 20_000)
    b.op("aten::_scaled_dot_product_cudnn_attention", 500, 10_000, shapes=[q] * 3 + [[]] * 6,
         dtypes=[BF16] * 3 + ["", "Scalar", "Scalar", "Scalar", "Scalar", ""])  # fmt: skip
    k = b.launch("cudnn_generated_fort_native_sdpa_sm90_flash_fprop_wgmma_f16", 1_000, 10_000, 200_000)
    b.window(0, 300_000)
    trace = b.build()

    def flops(concrete: str | None) -> float:
        ops = dict(trace.ops.columns)
        strings = list(trace.strings)
        if concrete is not None:
            strings.append(concrete)
            ops["concrete"] = np.array([len(strings) - 1], dtype=np.int32)
        t = dataclasses.replace(trace, strings=strings, ops=Table(ops))
        return float(roofline(t, link(t), resolve_peaks(t)).flops[k])

    full = sdpa_flops(tuple(q), tuple(q), tuple(q))
    assert flops(None) == full
    assert flops('["", "", "", "", "True", "0.", "True", "False", ""]') == full * 1025 / 2048
    assert flops('["", "", "", "", "True", "0.", "False", "False", ""]') == full
