"""Lines of torch.compile'd GPT-2 small recorded on the H200 with its eager code tagged
(`python -m validation.run compile-lines`):

- h200_gpt2_compiled: `examples/train_gpt.py --compile --steps 300` (the whole model compiled);
- h200_gpt2_compiled_loss: `validation/workloads/gpt2_eager_fixes.py --compile-loss --steps 120` (only the
  cross-entropy compiled);
- h200_hf_gpt2_compiled: `validation/workloads/hf_gpt2_compiled.py --steps 60` (Hugging Face GPT-2 compiled
  whole; `python -m validation.run compile-models --set CASES=hf_gpt2`).

The compiled backward runs in one autograd node whose creator (the compiled call) is untagged: its kernels
take the model's lines from Inductor's provenance, not the line of the data slicing that shares the node's
sequence number (`x, y = data[:, :-1], data[:, 1:]`, line 176), and the eager optimizer step and gradient
clipping keep their own lines.
"""

from collections import defaultdict

import numpy as np
import pytest

from analyzers.analyze import analyze
from analyzers.link.compiled import kernel_line_shares
from brrrtui.present.finding_words import message
from tests.test_h200_recordings import open_fixture


def gpu_share_by_line(analysis) -> tuple[dict[str, float], float, float]:
    """Share of the analysed GPU time per `file:line` (compiled kernels split as Inductor names them), the
    share with no line and the share Inductor's provenance placed."""
    t, links = analysis.trace, analysis.links
    dur = t.gpu.dur_ns.astype(np.float64)
    rows, lines, weight = kernel_line_shares(
        t, links.kernel_op, links.kernel_line, links.op_compiled, links.compiled
    )
    by_line: dict[str, float] = defaultdict(float)
    for r, ln, w in zip(rows.tolist(), lines.tolist(), weight.tolist(), strict=True):
        src = t.lines[ln]
        by_line[f"{src.file.rsplit('/', 1)[-1]}:{src.line}"] += dur[r] * w / dur.sum()
    ops = links.kernel_op
    compiled = (ops >= 0) & links.op_compiled[np.maximum(ops, 0)]
    no_line = float(dur[links.kernel_line < 0].sum() / dur.sum())
    return dict(by_line), no_line, float(dur[compiled].sum() / dur.sum())


@pytest.fixture(scope="module")
def whole(tmp_path_factory):
    trace, _ = open_fixture(tmp_path_factory, "h200_gpt2_compiled")
    return analyze(trace)


def test_the_compiled_backward_is_on_the_models_lines_not_the_data_slicing(whole):
    by_line, no_line, compiled = gpu_share_by_line(whole)
    assert by_line.get("train_gpt.py:176", 0.0) < 0.001  # held 63 % when the node took the slicing's span
    assert compiled > 0.85  # forward and backward graphs, placed by Inductor's provenance
    # attention / MLP / block lines of the model, forward and backward
    assert by_line["train_gpt.py:55"] > 0.25 and by_line["train_gpt.py:39"] > 0.1
    assert no_line < 0.07  # three backward Triton kernels Inductor's provenance does not name


def test_eager_code_of_a_compiled_script_keeps_its_lines(whole):
    by_line, _, _ = gpu_share_by_line(whole)
    # opt.step() (fused AdamW) and clip_grad_norm_ run eagerly between compiled calls
    assert 0.02 < by_line["train_gpt.py:181"] < 0.05
    assert 0.005 < by_line["train_gpt.py:180"] < 0.03
    assert by_line.get("train_gpt.py:179", 0.0) < 0.001  # loss.backward() launches the graph, not kernels


def test_a_compiled_loss_backward_is_on_the_compiled_functions_lines(tmp_path_factory):
    trace, _ = open_fixture(tmp_path_factory, "h200_gpt2_compiled_loss")
    by_line, no_line, compiled = gpu_share_by_line(analyze(trace))
    assert no_line == 0.0
    # the compiled cross-entropy, forward and backward: the model's call and the wrapper's body
    assert compiled > 0.05
    assert by_line["gpt2_eager_fixes.py:45"] > 0.02
    # the eager model's own lines keep the rest
    assert by_line["train_gpt.py:55"] > 0.25


def test_a_library_model_compiled_whole_is_on_the_line_that_calls_it_with_its_library_lines(tmp_path_factory):
    """HF GPT-2 compiled whole (validation/workloads/hf_gpt2_compiled.py,
    `python -m validation.run compile-models`): Inductor's traces start inside transformers, so before the capture named
    the compiled call 96 % of the GPU time had no line. Now it is on `return model(...).loss` (hf_gpt2.py:32),
    with the transformers lines the kernels came from, and the graph break in transformers' logging is on
    that line too."""
    trace, _ = open_fixture(tmp_path_factory, "h200_hf_gpt2_compiled")
    a = analyze(trace)
    by_line, no_line, _ = gpu_share_by_line(a)
    assert no_line == 0.0
    assert by_line["hf_gpt2.py:32"] > 0.9 and by_line["common.py:40"] > 0.03  # the model; fused AdamW
    libs = {f"{s.line.file.split('site-packages/')[-1]}:{s.line.line}": s.gpu_ns for s in a.library_lines}
    assert libs["transformers/pytorch_utils.py:119"] > 0.5 * a.breakdown.compute_ns  # Conv1D's addmm
    assert any(k.startswith("transformers/models/gpt2/modeling_gpt2.py:") for k in libs)
    (brk,) = [f for f in a.findings if f.kind.value == "graph_break"]
    assert brk.lines[0].line == 32 and "transformers/modeling_utils.py:4635" in message(brk)


def test_the_text_report_of_a_compiled_library_model_lists_its_library_lines(tmp_path_factory):
    from brrrtui.present.report import render_text

    trace, _ = open_fixture(tmp_path_factory, "h200_hf_gpt2_compiled")
    text = render_text(analyze(trace))
    section = text.split("library lines (GPU time per step, of the kernels that have one)\n", 1)[1]
    first = section.splitlines()[0].split()
    assert first[0] == "transformers/pytorch_utils.py:119" and first[-1] == "compute"  # Conv1D's addmm
    assert len(section.split("\n\n", 1)[0].splitlines()) == 10  # the top ten
