"""Bytes of fused and foreach optimizer ops (analyzers/cost/optimizer_cost.py), from the parameters the backward
before them accumulated; hand-built traces with exact arithmetic."""

from __future__ import annotations

import math

import pytest
from fixtures.synthetic import F32, TraceBuilder

from analyzers.cost.optimizer_cost import list_accesses
from analyzers.cost.peaks import resolve_peaks
from analyzers.cost.roofline import roofline
from analyzers.link.links import link

ADAMW_TYPES = ["TensorList"] * 6 + ["Scalar"] * 7 + ["", ""]
W, B = (768, 3072), (3072,)  # a weight and a bias, fp32
P = 4 * (768 * 3072 + 3072)  # bytes of one copy of the parameters


class Steps:
    def __init__(self) -> None:
        self.b = TraceBuilder()
        self.ln = self.b.line("train.py", 50, "main")
        self.cpu, self.gpu = 0, 10_000

    def backward(self, shapes=(W, B)) -> None:
        for s in shapes:
            self.b.op("torch::autograd::AccumulateGrad", self.cpu, 2_000, shapes=[list(s)], dtypes=[F32])
            self.cpu += 3_000

    def opt(self, name: str, types: list[str], dur_ns: int = 100_000) -> int:
        b = self.b
        b.span(self.ln, self.cpu, 6_000)
        b.op(name, self.cpu + 500, 5_000, shapes=[[] for _ in types], dtypes=types)
        row = b.launch("multi_tensor_apply_kernel<AdamW>", self.cpu + 1_000, self.gpu, dur_ns)
        self.cpu, self.gpu = self.cpu + 7_000, self.gpu + dur_ns + 2_000
        return row

    def bytes(self) -> list[float]:
        self.b.window(0, self.gpu + 10_000, first_step=0, last_step=0)
        trace = self.b.build()
        links = link(trace)
        return roofline(trace, links, resolve_peaks(trace)).bytes.tolist()


def test_accesses_per_parameter_element():
    assert list_accesses("aten::_fused_adamw_", None) == 7
    assert list_accesses("aten::_fused_sgd_", None) == 5
    assert list_accesses("aten::_foreach_mul_", '["TensorList","float"]') == 2  # read and write one list
    assert list_accesses("aten::_foreach_addcmul_", '["TensorList","TensorList","TensorList","Scalar"]') == 4
    assert list_accesses("aten::_foreach_norm", '["TensorList","Scalar",""]') == 1  # writes scalars only
    assert list_accesses("aten::_foreach_sqrt", '["TensorList"]') == 2  # a new list
    assert list_accesses("aten::add_", '["float","float"]') is None


def test_fused_adamw_moves_seven_parameter_copies():
    s = Steps()
    s.backward()
    k = s.opt("aten::_fused_adamw_", ADAMW_TYPES)
    assert s.bytes()[k] == 7 * P


def test_two_param_groups_share_the_step_by_kernel_time():
    s = Steps()
    s.backward()
    k1 = s.opt("aten::_fused_adamw_", ADAMW_TYPES, dur_ns=300_000)  # weight-decay group
    k2 = s.opt("aten::_fused_adamw_", ADAMW_TYPES, dur_ns=100_000)  # no-decay group
    got = s.bytes()
    assert got[k1] == pytest.approx(7 * P * 0.75) and got[k2] == pytest.approx(7 * P * 0.25)


def test_gradient_accumulation_counts_each_parameter_once():
    s = Steps()
    s.backward()
    s.backward()  # two micro-batches before one step
    k = s.opt("aten::_fused_adamw_", ADAMW_TYPES)
    assert s.bytes()[k] == 7 * P


def test_each_step_takes_its_own_backward():
    s = Steps()
    s.backward()
    k1 = s.opt("aten::_foreach_mul_", ["TensorList", "float"])  # clip: grads *= c
    s.backward(shapes=(W,))  # the next step's backward (only the weight had a gradient)
    k2 = s.opt("aten::_foreach_mul_", ["TensorList", "float"])
    got = s.bytes()
    assert got[k1] == 2 * P and got[k2] == 2 * 4 * 768 * 3072


def test_step_counters_are_not_taken_for_parameters():
    s = Steps()
    s.backward()
    k = s.opt("aten::_foreach_add_", ["TensorList", "Scalar"], dur_ns=1_000)  # 2 P in 1 us would be 19 TB/s
    assert 2 * P / 1e-6 > 10e12 and math.isnan(s.bytes()[k])


def test_without_a_backward_in_the_window_the_bytes_stay_unknown():
    s = Steps()
    k = s.opt("aten::_fused_adamw_", ADAMW_TYPES)
    assert math.isnan(s.bytes()[k])
