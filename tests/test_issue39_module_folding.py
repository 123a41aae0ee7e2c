"""Issue 39, module tree: repeated siblings fold by structure (same class, same children), whatever their
names. A model whose blocks are `encoder_layer_0 … encoder_layer_11` folds to one row as `h.0 … h.11` does;
leaves of one class (`fc1`, `fc2`) and stages of one class that differ below stay apart. Hand-built traces,
exact times; end to end through `brrrtui report`."""

from __future__ import annotations

import json
import os

from conftest import ROOT, run_brrrtui
from fixtures.synthetic import BF16, TraceBuilder

from analyzers.analyze import analyze
from brrrtui.contract.modules import ModuleFrame
from brrrtui.recording.store import write_trace


def _layered_trace(names: list[str], container: str = "encoder"):
    """A model of len(names) blocks `Layer` (attention and MLP Linear children) named `names` under
    `container`, each block's attention 100 µs and MLP 50 µs, plus a head outside the blocks (30 µs)."""
    b = TraceBuilder()
    line = b.line("train.py", 30, "step")
    root = ("", "Model")
    enc = (container, "Encoder")
    calls = []
    for n in names:
        block = (f"{container}.{n}", "Layer")
        calls.append(([root, enc, block, (f"{container}.{n}.attn", "Linear")], 100_000))
        calls.append(([root, enc, block, (f"{container}.{n}.mlp", "Linear")], 50_000))
    calls.append(([root, ("head", "Linear")], 30_000))
    t = 0
    for chain, dur in calls:
        b.span(line, t, 8_000, modules=chain)
        b.op("aten::mm", t + 500, 6_000, shapes=[[1024, 1024], [1024, 1024]], dtypes=[BF16, BF16])
        b.launch("sm90_xmma_gemm_bf16bf16", t + 1_000, t + 20_000, dur)
        t += dur + 30_000
    b.window(0, t + 100_000, first_step=0, last_step=0)
    return b.build()


def _rows(trace):
    tree = analyze(trace).modules
    assert tree is not None
    return tree, [(n.depth, n.name, n.kind, n.instances, n.gpu_ns, n.self_gpu_ns) for n in tree.nodes]


def test_named_layers_fold_like_numbered_ones():
    named_tree, named = _rows(_layered_trace([f"encoder_layer_{i}" for i in range(12)]))
    numbered_tree, numbered = _rows(_layered_trace([f"h.{i}" for i in range(12)]))
    assert len(named) == len(numbered) == 6  # Model, encoder, the blocks, attn, mlp, head
    block = next(r for r in named if r[2] == "Layer")
    assert block == (2, "encoder_layer_*", "Layer", 12, 12 * 150_000, 0)
    # the same rows as `h.*`, but for the name
    assert [r[:1] + r[2:] for r in named] == [r[:1] + r[2:] for r in numbered]
    attn = next(n for n in named_tree.nodes if n.path == "encoder.encoder_layer_*.attn")
    assert (attn.instances, attn.gpu_ns, attn.name) == (12, 1_200_000, "attn")
    assert sum(n.gpu_ns for n in named_tree.roots) == named_tree.total_gpu_ns == 12 * 150_000 + 30_000


def test_siblings_without_a_common_pattern_fold_by_structure_too():
    _, rows = _rows(_layered_trace(["first", "second"]))
    assert (2, "{first,second}", "Layer", 2, 300_000, 0) in rows


def test_leaves_and_stages_that_differ_below_stay_apart():
    from brrrtui.contract.modules import fold_chains

    frames = [ModuleFrame("", "Net"), ModuleFrame("mlp", "MLP")]
    leaves = [(*frames, ModuleFrame(f"mlp.fc{i}", "Linear")) for i in (1, 2)]
    stage = [ModuleFrame("", "Net"), ModuleFrame("layer1", "Stage"), ModuleFrame("layer1.0", "Block")]
    other = [ModuleFrame("", "Net"), ModuleFrame("layer2", "Stage"), ModuleFrame("layer2.0", "Block")]
    deeper = [*other, ModuleFrame("layer2.0.downsample", "Conv2d")]
    longer = [ModuleFrame("", "Net"), ModuleFrame("layer3", "Stage")]
    longer = [[*longer, ModuleFrame(f"layer3.{i}", "Block")] for i in range(2)]
    folds = fold_chains([*leaves, stage, other, deeper, *longer])
    assert folds[("", "mlp", "mlp.fc1")] == ("", "mlp", "mlp.fc1")  # two Linear leaves: fc1 and fc2 stay
    assert folds[("", "layer1", "layer1.0")] == ("", "layer1", "layer1.*")
    assert folds[("", "layer2", "layer2.0", "layer2.0.downsample")] == (
        "",
        "layer2",
        "layer2.*",
        "layer2.*.downsample",
    )
    assert folds[("", "layer3", "layer3.1")] == ("", "layer3", "layer3.*")  # two blocks, not one: apart


def test_report_json_lists_one_row_for_named_layers(tmp_path):
    path = tmp_path / "named.brrr.gz"
    write_trace(_layered_trace([f"encoder_layer_{i}" for i in range(4)]), str(path))
    proc = run_brrrtui("report", str(path), "--json")
    assert proc.returncode == 0, proc.stderr
    nodes = json.loads(proc.stdout)["modules"]["nodes"]
    blocks = [n for n in nodes if n["class"] == "Layer"]
    assert [(n["path"], n["instances"], n["gpu_ns"]) for n in blocks] == [
        ("encoder.encoder_layer_*", 4, 600_000)
    ]


def test_recorded_gpt2_with_its_blocks_renamed_folds_the_same(tmp_path):
    """The H200 recording of Hugging Face GPT-2 with `transformer.h.N` renamed `transformer.block_N` (as a
    model with named layers records them): one `block_*` row of 12, holding what `h.*` holds."""
    import dataclasses
    import re

    from brrrtui.recording.load import load_trace

    trace = load_trace(os.path.join(ROOT, "tests", "fixtures", "h200_hf_gpt2_modules.brrr.gz"))
    named = re.compile(r"transformer\.h\.(\d+)")
    renamed = [named.sub(r"transformer.block_\1", s) if "=" in s else s for s in trace.strings]
    assert renamed != trace.strings
    before = {(n.depth, n.path, n.kind): n for n in analyze(trace).modules.nodes}
    after = {
        (n.depth, n.path, n.kind): n
        for n in analyze(dataclasses.replace(trace, strings=renamed)).modules.nodes
    }
    assert len(after) == len(before)
    for (depth, path, kind), n in before.items():
        m = after[(depth, path.replace("transformer.h.*", "transformer.block_*"), kind)]
        assert (m.instances, m.gpu_ns, m.self_gpu_ns, m.idle_ns) == (
            n.instances,
            n.gpu_ns,
            n.self_gpu_ns,
            n.idle_ns,
        )
    assert after[(2, "transformer.block_*", "GPT2Block")].instances == 12


def test_a_finding_spread_over_named_layers_is_placed_on_their_folded_node():
    """A finding whose kernels are every block's attention and MLP (1.8 ms, each block 1/12 of it, the
    attentions 2/3): its place is the deepest folded node holding 60 % of it, the blocks' `attn` with its 12
    instances, as for `h.0 … h.11`; not their container, which no single `encoder_layer_N` reaches."""
    from analyzers.findings.facts import Facts
    from analyzers.findings.places import place_findings
    from analyzers.results import Finding, FindingKind

    for names, folded in (([f"encoder_layer_{i}" for i in range(12)], "encoder.encoder_layer_*.attn"),
                          ([f"h.{i}" for i in range(12)], "encoder.h.*.attn")):  # fmt: skip
        trace = _layered_trace(names)
        a = analyze(trace)
        rows = tuple(range(len(names) * 2))  # the blocks' kernels, in launch order; the head's is last
        f = Finding(FindingKind.FUSION, (), None, Facts(), kernels=rows)
        (placed,) = place_findings(trace, a.links, a.modules, [f])
        assert placed.place is not None
        assert (placed.place.module, placed.place.module_kind, placed.place.instances) == (folded, "Linear", 12)
