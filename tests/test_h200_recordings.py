"""Parsing real H200 recordings made by `brrrtui record` (torch 2.11.0+cu130, driver 580), pinned exactly.

Recorded on the H200 with:
  brrrtui record -o known_regimes.brrr --window-steps 2 --duty 1 --min-gap 0 --max-windows 2 \\
      examples/known_regimes.py --steps 12 --tiny-ops 50
  brrrtui record -o gpt_small.brrr --window-steps 2 --duty 1 --min-gap 0 --max-windows 2 \\
      examples/train_gpt.py --layers 2 --seq 256 --batch 4 --steps 12
  brrrtui record -o bert.brrr --max-windows 2 --window-steps 1 --min-gap 0 --duty 1 validation/bert_step.py --steps 8
Line numbers are those of the scripts as recorded.
"""

import collections
import gzip
import os
import shutil

import numpy as np
import pytest

from analyzers.link.links import link
from brrrtui.contract.model import GpuKind
from brrrtui.recording.load import load_trace

FIXTURES = os.path.join(os.path.dirname(__file__), "fixtures")


def open_fixture(tmp_path_factory, name: str):
    path = tmp_path_factory.mktemp("h200") / f"{name}.brrr"
    with gzip.open(os.path.join(FIXTURES, f"{name}.brrr.gz")) as src, open(path, "wb") as dst:
        shutil.copyfileobj(src, dst)
    trace = load_trace(str(path))
    return trace, link(trace)


@pytest.fixture(scope="module")
def known(tmp_path_factory):
    return open_fixture(tmp_path_factory, "h200_known_regimes")


def kernels_by_line(trace, links) -> dict[int, list[str]]:
    out: dict[int, list[str]] = collections.defaultdict(list)
    for row, line in enumerate(links.kernel_line.tolist()):
        out[trace.lines[line].line if line >= 0 else -1].append(trace.name(trace.gpu.name[row]))
    return out


def test_known_regimes_recording_facts(known):
    trace, links = known
    assert trace.device.name == "NVIDIA H200" and trace.device.num_sms == 132
    assert trace.device.l2_bytes == 62914560
    assert trace.meta["torch_version"] == "2.11.0+cu130" and trace.meta["exit_code"] == 0
    assert trace.peaks.source == "measured"
    assert 7.0e14 < trace.peaks.tensor_flops_per_s < 8.5e14  # bf16 8192^3 matmul
    assert 3.9e12 < trace.peaks.bytes_per_s < 4.4e12  # 1 GiB device copy, read + write
    assert trace.steps.step.tolist() == list(range(12))
    assert trace.windows.mode.tolist() == [1, 0]  # a time window during set-up, then a step window
    assert (len(trace.gpu), int((trace.gpu.kind == GpuKind.KERNEL).sum()), len(trace.ops), len(trace.runtime)) == (
        184, 179, 262, 196)  # fmt: skip
    assert len(trace.telemetry) > 50 and np.nanmax(trace.telemetry.gpu_util_pct) > 0


def test_known_regimes_every_kernel_reaches_its_exact_line(known):
    trace, links = known
    assert (
        (links.kernel_launch >= 0).all() and (links.kernel_op >= 0).all() and (links.kernel_line >= 0).all()
    )
    by_line = kernels_by_line(trace, links)
    # torch.mm(a, b, out=c): the cuBLAS GEMM and the workspace memset it issues, once per captured step
    assert sorted(n[:6] for n in by_line[78]) == ["Memset", "Memset", "nvjet_", "nvjet_"]
    for line, functor in (
        (79, "AUnaryFunctor"),
        (80, "CUDAFunctorOnSelf_add"),
        (81, "AbsFunctor"),
        (82, "sqrt"),
    ):
        assert len(by_line[line]) == 3 and all(functor in n for n in by_line[line]), line  # one per step
    assert len(by_line[86]) == 150 and all("tanh" in n for n in by_line[86])  # 50 tiny tanh a step, 3 steps
    assert any("Memcpy DtoH" in n for n in by_line[83])  # y[0].item()


def test_gpt_recording_links_backward_kernels_to_forward_lines(tmp_path_factory):
    trace, links = open_fixture(tmp_path_factory, "h200_gpt_small")
    assert (len(trace.gpu), int((trace.gpu.kind == GpuKind.KERNEL).sum())) == (250, 235)
    assert (links.kernel_launch >= 0).all() and (links.kernel_op >= 0).all()
    # a time window opened mid-forward: 22 backward kernels belong to forward ops it did not see
    assert int((links.kernel_line >= 0).sum()) == 228
    by_line = kernels_by_line(trace, links)
    bwd_thread = trace.ops.tid[links.kernel_op] != trace.spans.tid[0]
    # backward kernels (launched on autograd's thread) land on model lines, not on loss.backward()
    model_lines = {trace.lines[i].line for i in links.kernel_line[bwd_thread] if i >= 0}
    assert model_lines and 179 not in model_lines
    assert len(by_line[180]) == 90  # opt.step() (fused AdamW) and clip_grad_norm_ on line 179/180


def test_bert_recording_every_kernel_has_a_line(tmp_path_factory):
    trace, links = open_fixture(tmp_path_factory, "h200_bert")
    assert (len(trace.gpu), int((trace.gpu.kind == GpuKind.KERNEL).sum())) == (2538, 2271)
    assert int((links.kernel_line >= 0).sum()) == 2538
    assert trace.windows.mode.tolist() == [1, 0]
