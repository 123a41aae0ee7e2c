"""A real (CPU) profiler window converted to rows: attention ops keep their scalar arguments (`is_causal`),
which the attention cost needs, and the spans the line tagger names carry their module chain and library line."""

from __future__ import annotations

import json

import torch

from brrrtui.capture.convert import Interner, convert_events, parse_span_name
from brrrtui.capture.session import ProfilerSession
from brrrtui.contract.schema import OP_SCHEMA, SPAN_SCHEMA


def test_attention_ops_keep_is_causal_and_other_ops_no_concrete_inputs():
    q = torch.randn(1, 2, 16, 8)
    session = ProfilerSession(torch, cuda=False)
    session.start()
    try:
        torch.nn.functional.scaled_dot_product_attention(q, q, q, is_causal=True)
        torch.relu(q)
    finally:
        result = session.stop()
    strings = Interner()
    rows = convert_events(result.events(), 0, strings, "brrr:")
    names = {v: k for k, v in strings.ids.items()}
    col = list(OP_SCHEMA).index("concrete")
    by_name = {names[r[1]]: r for r in rows["ops"]}
    sdpa = by_name["aten::scaled_dot_product_attention"]
    assert json.loads(names[sdpa[col]])[5] is True  # (query, key, value, attn_mask, dropout_p, is_causal, …)
    assert by_name["aten::relu"][col] == -1
    assert all(len(r) == len(OP_SCHEMA) for r in rows["ops"])


def test_span_names_carry_line_library_line_and_module_chain():
    assert parse_span_name("17") == (17, -1, None)
    assert parse_span_name("17:4:=Net;h.0=Block") == (17, 4, "=Net;h.0=Block")
    assert parse_span_name("17:-1:") == (17, -1, None)
    assert len(SPAN_SCHEMA) == 7
