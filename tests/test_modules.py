"""Module paths and library lines: the capture names the nn.Module chain and the innermost model-library line
of every torch call (CPU, a library stand-in under tests/scripts/fake_site); the module tree folds numbered
modules, keeps a Sequential's differently-typed children apart and sums to every kernel's time (hand-built
trace, exact); on real H200 recordings of Hugging Face GPT-2 and torchvision ResNet-50 the findings name their
module, library line and the library's own fix."""

from __future__ import annotations

import os

import pytest
from fixtures.recording import record
from fixtures.synthetic import BF16, TraceBuilder

from analyzers.analyze import analyze
from analyzers.results import FindingKind
from brrrtui.contract.modules import collapse, decode, encode
from brrrtui.present.finding_words import knob
from brrrtui.present.report import render_text, to_json
from brrrtui.recording.load import load_trace

HERE = os.path.dirname(__file__)
FIXTURES = os.path.join(HERE, "fixtures")


def test_module_strings_round_trip_and_collapse_only_whole_numbers():
    chain = [
        ("", "GPT2LMHeadModel"),
        ("transformer.h.3", "GPT2Block"),
        ("transformer.h.3.attn", "GPT2Attention"),
    ]
    assert [(f.path, f.kind) for f in decode(encode(chain))] == chain
    assert decode("") == () and decode("no separator") == ()
    assert collapse("bert.encoder.layer.11.attention") == "bert.encoder.layer.*.attention"
    assert collapse("conv2d1.layer3") == "conv2d1.layer3"  # digits inside a name stay


def _module_call(b, line, t, chain, kernel, dur, shapes=None):
    """A torch call from `line` inside the module chain: span > op > launch > kernel."""
    b.span(line, t, 8_000, modules=chain)
    b.op("aten::mm" if shapes else "aten::add", t + 500, 6_000, shapes=shapes, dtypes=[BF16, BF16])
    return b.launch(kernel, t + 1_000, t + 20_000, dur)


def small_model_trace():
    b = TraceBuilder()
    line = b.line("train.py", 30, "step")
    loop = b.line("train.py", 33, "step")
    mm = [[4096, 4096], [4096, 4096]]
    root = ("", "Net")
    calls = [
        ([root, ("layers.0", "Block"), ("layers.0.fc", "Linear")], "sm90_xmma_gemm_bf16bf16", 100_000, mm),
        ([root, ("layers.1", "Block"), ("layers.1.fc", "Linear")], "sm90_xmma_gemm_bf16bf16", 100_000, mm),
        ([root, ("layers.0", "Block")], "vectorized_elementwise_kernel", 50_000, None),
        ([root, ("seq.0", "Conv2d")], "vectorized_elementwise_kernel", 20_000, None),
        ([root, ("seq.1", "BatchNorm2d")], "vectorized_elementwise_kernel", 10_000, None),
    ]
    t = 0
    for chain, kernel, dur, shapes in calls:
        _module_call(b, line, t, chain, kernel, dur, shapes)
        t += dur + 30_000
    b.span(loop, t, 8_000)  # the optimizer: outside any module
    b.op("aten::add", t + 500, 6_000)
    b.launch("multi_tensor_apply_kernel", t + 1_000, t + 20_000, 30_000)
    b.window(0, t + 100_000, first_step=0, last_step=0)
    return b.build()


def test_the_tree_folds_numbered_modules_and_sums_to_every_kernel():
    tree = analyze(small_model_trace()).modules
    assert tree is not None
    nodes = {n.label + ":" + n.kind: n for n in tree.nodes}
    root = nodes["Net:Net"]
    assert (root.depth, root.gpu_ns, root.instances) == (0, 280_000, 1)
    block = nodes["layers.*:Block"]
    assert (block.instances, block.gpu_ns, block.self_gpu_ns, block.kernels) == (2, 250_000, 50_000, 3)
    fc = nodes["layers.*.fc:Linear"]
    assert (fc.name, fc.instances, fc.gpu_ns, fc.depth) == ("fc", 2, 200_000, 2)
    # a Sequential's `0` and `1` hold different classes: collapsed, they stay two nodes, each with its index
    assert nodes["seq.*:Conv2d"].gpu_ns == 20_000 and nodes["seq.*:BatchNorm2d"].gpu_ns == 10_000
    assert {nodes["seq.*:Conv2d"].name, nodes["seq.*:BatchNorm2d"].name} == {"seq.0", "seq.1"}
    assert tree.outside_gpu_ns == 30_000
    assert sum(n.gpu_ns for n in tree.roots) + tree.outside_gpu_ns == tree.total_gpu_ns == 310_000
    # depth first, siblings by time: the blocks before the convolution and the norm
    assert [n.label for n in tree.nodes][:3] == ["Net", "layers.*", "layers.*.fc"]


def test_idle_goes_to_the_module_whose_kernel_ended_it():
    tree = analyze(small_model_trace()).modules
    # every gap ends at the start of a kernel, each inside one module or outside: the idle sums up
    assert tree.idle_ns == sum(n.idle_ns for n in tree.roots) + tree.outside_idle_ns
    assert tree.outside_idle_ns > 0


def test_a_trace_without_module_names_has_no_tree():
    trace = load_trace(os.path.join(FIXTURES, "h200_gpt_small.brrr.gz"))  # recorded before module columns
    assert (trace.spans.module == -1).all() and (trace.spans.lib_line == -1).all()
    a = analyze(trace)
    assert a.modules is None and all(f.place is None for f in a.findings)
    assert to_json(a)["modules"] is None


def test_capture_names_modules_and_library_lines_on_cpu(tmp_path):
    """tests/scripts/nested_modules.py: a module of the script's own wrapping a library model."""
    proc, out = record(tmp_path, "nested_modules.py", "30")
    assert proc.returncode == 0, proc.stderr
    trace = load_trace(out)
    seen = {}
    for line, module, lib in zip(trace.spans.line.tolist(), trace.spans.module.tolist(),
                                 trace.spans.lib_line.tolist(), strict=True):  # fmt: skip
        chain = tuple((f.path, f.kind) for f in decode(trace.name(module)))
        user = trace.lines[line]
        library = trace.lines[lib] if lib >= 0 else None
        seen[chain] = (os.path.basename(user.file), user.line, library and (os.path.basename(library.file),
                                                                              library.line))  # fmt: skip
    fc = (("", "Wrapper"), ("body", "Net"), ("body.layers.1", "Block"), ("body.layers.1.fc", "Linear"))
    act = fc[:3]
    assert seen[fc] == ("nested_modules.py", 21, ("blocks.py", 14))  # `h = self.fc(x)` in the library
    assert seen[act] == ("nested_modules.py", 21, ("blocks.py", 15))  # `h * torch.sigmoid(h)`
    assert seen[(("", "Wrapper"),)] == ("nested_modules.py", 22, None)  # the script's own module: no library
    assert seen[()][0] == "nested_modules.py"  # the loop's own calls (loss, optimizer): no module


@pytest.fixture(scope="module")
def hf_gpt2():
    return analyze(load_trace(os.path.join(FIXTURES, "h200_hf_gpt2_modules.brrr.gz")))


def test_hf_gpt2_module_tree_on_the_h200(hf_gpt2):
    tree = hf_gpt2.modules
    assert tree is not None and tree.steps == 2
    assert sum(n.gpu_ns for n in tree.roots) + tree.outside_gpu_ns == tree.total_gpu_ns
    assert tree.outside_gpu_ns < 0.03 * tree.total_gpu_ns  # the fused AdamW: all else runs in a module
    nodes = {n.label: n for n in tree.nodes}
    assert nodes["transformer.h.*"].instances == 12 and nodes["transformer.h.*"].kind == "GPT2Block"
    act = nodes["transformer.h.*.mlp.act"]
    assert act.kind == "NewGELUActivation" and act.regime.value == "memory"
    assert act.lib_line is not None and act.lib_line.file.endswith("transformers/activations.py")


def test_hf_gpt2_findings_name_module_library_line_and_knob(hf_gpt2):
    gelu = [f for f in hf_gpt2.findings if f.place and f.place.module_kind == "NewGELUActivation"]
    assert len(gelu) == 1 and gelu[0].kind is FindingKind.FUSION
    place = gelu[0].place
    assert (place.module, place.instances) == ("transformer.h.*.mlp.act", 12)
    assert place.library_line.file.endswith("transformers/activations.py")
    assert 'activation_function="gelu_pytorch_tanh"' in knob(place)
    vocab = next(f for f in hf_gpt2.findings if f.kind is FindingKind.SLOW_GEMM)
    assert vocab.place.module == "lm_head" and "pad_to_multiple_of=64" in knob(vocab.place)
    text = render_text(hf_gpt2)
    assert "in transformer.h.*.mlp.act (NewGELUActivation ×12) · transformers/activations.py:" in text
    assert "modules (GPU + idle time per step" in text
    doc = to_json(hf_gpt2)
    assert doc["modules"]["nodes"][0]["path"] == "GPT2LMHeadModel"
    found = next(f for f in doc["findings"] if f["module"] and f["module"]["class"] == "NewGELUActivation")
    assert found["library_line"]["display"].startswith("transformers/activations.py:")


def test_resnet50_conv_layout_gets_channels_last_from_torchvision(hf_gpt2):
    a = analyze(load_trace(os.path.join(FIXTURES, "h200_resnet50_modules.brrr.gz")))
    layout = next(f for f in a.findings if f.kind is FindingKind.CONV_LAYOUT)
    assert layout.place.library_line.file.endswith("torchvision/models/resnet.py")
    assert "channels_last" in knob(layout.place) and knob(layout.place).startswith("torchvision")
    nodes = {(n.label, n.kind): n for n in a.modules.nodes}
    assert nodes[("layer1.*", "Bottleneck")].instances == 3
    # downsample is Sequential(conv, norm): two nodes once collapsed, named by their own index
    assert nodes[("layer1.*.downsample.*", "Conv2d")].name == "0"
    assert nodes[("layer1.*.downsample.*", "BatchNorm2d")].name == "1"


def test_a_tree_of_no_kernels_is_empty():
    import numpy as np

    from analyzers.idle.gaps import GAP_SCHEMA
    from analyzers.totals.modules import KernelColumns, module_tree
    from brrrtui.contract.model import empty_table

    none = np.zeros(0, dtype=np.int64)
    columns = KernelColumns(none, none, none, none.astype(np.int8), none * 1.0, none * 1.0, none)
    tree = module_tree(columns, empty_table(GAP_SCHEMA), lambda sid: "", [], steps=1)
    assert tree.nodes == () and tree.total_gpu_ns == 0 and tree.idle_ns == 0
