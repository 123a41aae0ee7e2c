"""Issue 39, savings that hold: the hold-out mixture-of-experts layer (H100) routes with `torch.where(chosen ==
e)` per expert, an op that waits for the GPU and sizes its output from the data. There CUDA graphs cannot
capture the step (torch.compile(backend="cudagraphs") failed on it: the captured input's rows changed from
step to step) and torch.compile recompiles, so "capture the step with CUDA graphs" alone is advice that cannot
be followed. The overhead and small-kernels findings now name those ops and their line and put static shapes
first."""

from __future__ import annotations

import os

import pytest

from analyzers.analyze import analyze
from analyzers.findings.idle import DATA_DEPENDENT_OPS
from analyzers.results import FindingKind
from brrrtui.present.finding_words import action
from brrrtui.recording.load import load_trace

DATA = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "validation", "holdout", "data")
EXPERTS, LAYERS = 8, 4  # validation/holdout/moe_layer.py's defaults, as recorded


@pytest.fixture(scope="module")
def moe():
    return analyze(load_trace(os.path.join(DATA, "moe_layer.brrr.gz")))


@pytest.mark.parametrize("kind", [FindingKind.OVERHEAD, FindingKind.SMALL_KERNELS])
def test_cuda_graph_advice_puts_the_data_dependent_shapes_first(moe, kind):
    (f,) = [f for f in moe.findings if f.kind is kind]
    text = action(f)
    # one torch.where per expert and layer, each a nonzero under aten::where
    assert text.startswith("first give the data-dependent shapes a static size (aten::where on ")
    assert f"holdout/moe_layer.py:43, {EXPERTS * LAYERS} per step: each waits for the GPU" in text
    assert "CUDA graphs cannot capture the step" in text
    assert text.index("static size") < text.index("; then ") < text.rindex("CUDA graphs")


def test_compiling_the_function_that_holds_them_puts_static_shapes_first(moe):
    """torch.compile of MoELayer.forward made the step 21.6 ms slower (SAVINGS.md): the fusion finding whose
    advice compiles that function names the data-dependent ops first; the loss's fusion, compiled in
    `loss_of` where none runs, does not."""
    fusion = {f.facts.function: f for f in moe.findings if f.kind is FindingKind.FUSION}
    forward, loss = action(fusion["forward"]), action(fusion["loss_of"])
    assert forward.startswith("first give the data-dependent shapes a static size (aten::where on ")
    assert f"holdout/moe_layer.py:43, {EXPERTS * LAYERS} per step" in forward
    assert forward.index("; then torch.compile the function `forward`") > forward.index("static size")
    assert loss.startswith("torch.compile the function `loss_of`") and "data-dependent" not in loss


def test_each_counted_op_is_a_data_dependent_one(moe):
    t = moe.trace
    names = [t.name(int(n)) for n in t.ops.name]
    nonzero = sum(n == "aten::nonzero" for n in names)
    assert nonzero == EXPERTS * LAYERS * moe.steps_analysed and "aten::nonzero" in DATA_DEPENDENT_OPS


@pytest.mark.parametrize("workload", ["cnn_channels_last", "unet_diffusion"])
def test_static_shapes_need_no_advice(workload):
    a = analyze(load_trace(os.path.join(DATA, f"{workload}.brrr.gz")))
    kinds = (FindingKind.OVERHEAD, FindingKind.SMALL_KERNELS, FindingKind.FUSION)
    found = [f for f in a.findings if f.kind in kinds]
    assert found and not any("data-dependent" in action(f) for f in found)
