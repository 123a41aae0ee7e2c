"""kv_cache: a Hugging Face model trained with use_cache=True (the default) builds its KV cache every layer.

On the H200 recordings of HF GPT-2 small (bf16, 12 layers) `DynamicLayer.update` appends K and V with torch.cat
(transformers/cache_utils.py:146 and 147): 24 `CatArrayBatchedCopy` kernels a step, ~0.99 ms of GPU time. BERT
has no cache and the hand-written GPT never calls transformers; neither gets the finding. A hand-built trace
checks the arithmetic: GPU time of the cache's rows + one unprofiled launch each, per step, training windows
only.
"""

from __future__ import annotations

import os

import numpy as np
import pytest
from fixtures.synthetic import BF16, TraceBuilder

from analyzers.analyze import analyze
from analyzers.kv_cache_findings import KV_CACHE_ACTION, is_cache_file, kernel_label
from analyzers.results import FindingKind
from brrrtui.recording.load import load_trace

FIXTURES = os.path.join(os.path.dirname(__file__), "fixtures")
HF_GPT2 = ["h200_hf_gpt2_modules", "h200_hf_gpt2_vocab50257", "h200_hf_gpt2_vocab50304"]
CAT = "void at::native::(anonymous namespace)::CatArrayBatchedCopy<at::native::(anonymous namespace)::OpaqueType<2u>, unsigned int, 4, 128, 1>(at::native::(anonymous namespace)::OpaqueType<2u>*, int)"  # noqa: E501


def analysed(name: str):
    return analyze(load_trace(os.path.join(FIXTURES, name + ".brrr.gz")))


def kv(a):
    return [f for f in a.findings if f.kind == FindingKind.KV_CACHE]


@pytest.mark.parametrize("name", HF_GPT2)
def test_hf_gpt2_training_builds_the_cache_and_the_finding_costs_it(name):
    a = analysed(name)
    (f,) = kv(a)
    trace, links, steps = a.trace, a.links, a.steps_analysed
    rows = np.asarray(f.kernels)
    assert steps == 2 and len(rows) == 24 * steps  # K and V, 12 layers, each step
    assert {kernel_label(trace.name(int(n))) for n in trace.gpu.name[rows]} == {"CatArrayBatchedCopy"}
    assert {str(trace.lines[i]).rsplit("/", 2)[-1] for i in links.kernel_lib_line[rows]} == {
        "cache_utils.py:146",
        "cache_utils.py:147",
    }
    # the window's other cats, 12 a step, are the backward of the attention's qkv split: not the cache's
    cats = np.nonzero(["CatArrayBatchedCopy" in trace.name(int(n)) for n in trace.gpu.name])[0]
    others = np.setdiff1d(cats, rows)
    assert len(cats) == 36 * steps and len(others) == 12 * steps
    assert {str(trace.lines[i]).rsplit("/", 1)[-1] for i in links.kernel_lib_line[others]} == {
        "modeling_gpt2.py:185"
    }
    measured = float(trace.gpu.dur_ns[rows].sum()) / steps
    assert 0.95e6 < measured < 1.05e6  # 0.99 ms of copies a step on the H200
    # the saving is that GPU time plus 24 launches of an unprofiled step (1–2 µs each on the H200)
    assert measured + 24 * 0.5e3 < f.saving_ns < measured + 24 * 2.5e3
    assert (
        f.action == KV_CACHE_ACTION and "use_cache=False" in f.action and "model.config.use_cache" in f.action
    )
    assert "24 CatArrayBatchedCopy kernels per step from transformers/cache_utils.py:146, 147" in f.message
    assert [(os.path.basename(ln.file), ln.line) for ln in f.lines] == [("hf_gpt2.py", 32)]  # the model call
    assert f.place is not None and f.place.module == "transformer.h.*.attn" and f.place.instances == 12
    assert f.place.module_kind == "GPT2Attention" and f.place.knob is None


@pytest.mark.parametrize("name", ["h200_bert", "h200_gpt_small", "h200_gpt2_eager_before_compile"])
def test_models_without_a_hugging_face_cache_get_no_finding(name):
    assert kv(analysed(name)) == []


def test_a_recording_without_library_lines_gets_no_finding():
    """h200_hf_gpt2_steady was recorded before the capture kept library lines: its 24 forward cats a step are
    the same kernels, but nothing says they are the cache's (a hand-written model's cat looks alike)."""
    a = analysed("h200_hf_gpt2_steady")
    assert (a.links.kernel_lib_line < 0).all()
    assert kv(a) == []


def test_cache_files_are_recognised_wherever_installed():
    assert is_cache_file("/opt/venv/lib/python3.12/site-packages/transformers/cache_utils.py")
    assert is_cache_file("transformers/cache_utils.py")
    assert is_cache_file("C:\\py\\Lib\\site-packages\\transformers\\cache_utils.py")
    assert not is_cache_file("/home/me/cache_utils.py")
    assert not is_cache_file(
        "/opt/venv/lib/python3.12/site-packages/transformers/models/gpt2/modeling_gpt2.py"
    )


# ---------------------------------------------------------------------------------------- hand-built

LIB = "/venv/lib/python3.12/site-packages/transformers/cache_utils.py"
GAP = 1_000  # every kernel starts 1 µs after the previous one ends: the window's launch cost


def cache_trace(backward_in: tuple[int, ...]) -> object:
    """Two windows of one step each: a 100 µs matmul from train.py:20, then K and V appended to the cache
    (60 and 40 µs of cat, cache_utils.py:146/147 under train.py:20), then a 200 µs matmul; the windows in
    `backward_in` hold an autograd node running backward."""
    b = TraceBuilder()
    user = b.line("train.py", 20)
    k_line, v_line = b.line(LIB, 146, "update"), b.line(LIB, 147, "update")
    for w in (0, 1):
        t0 = w * 10_000_000
        b.span(user, t0, 100_000, window=w)
        b.op("aten::mm", t0 + 1_000, 5_000, shapes=[[64, 64], [64, 64]], dtypes=[BF16, BF16], window=w)
        t = t0 + 50_000
        b.launch("sm90_xmma_gemm_bf16bf16", t0 + 2_000, t, 100_000, window=w)
        t += 100_000 + GAP
        for i, (lib, dur) in enumerate(((k_line, 60_000), (v_line, 40_000))):
            b.span(user, t0 + 10_000 + i * 10_000, 5_000, window=w, lib_line=lib)
            b.op("aten::cat", t0 + 11_000 + i * 10_000, 3_000, window=w)
            b.launch(CAT, t0 + 12_000 + i * 10_000, t, dur, window=w)
            t += dur + GAP
        b.launch("sm90_xmma_gemm_bf16bf16", t0 + 40_000, t, 200_000, window=w)
        if w in backward_in:
            b.op(
                "autograd::engine::evaluate_function: MmBackward0",
                t0 + 45_000,
                1_000,
                seq=3,
                fwd_tid=1,
                window=w,
            )
        b.window(t0, t + 200_000 + GAP, first_step=w, last_step=w, window=w)
    return b.build()


def test_hand_built_saving_is_the_copies_and_their_launches_per_step():
    a = analyze(cache_trace(backward_in=(0, 1)), windows=[0, 1])
    (f,) = kv(a)
    # per step: 60 + 40 µs of cat and two launches at the window's 1 µs gap, over 2 steps
    assert a.steps_analysed == 2 and f.saving_ns == (60_000 + 40_000) + 2 * GAP
    assert len(f.kernels) == 4 and f.window == 0
    assert (
        "2 CatArrayBatchedCopy kernels per step from transformers/cache_utils.py:146, 147 (update)"
        in f.message
    )
    assert "100 µs of GPU time per step" in f.message and "train.py:20" in f.message


def test_hand_built_windows_without_a_backward_are_not_training():
    a = analyze(cache_trace(backward_in=(1,)), windows=[0, 1])
    (f,) = kv(a)
    assert len(f.kernels) == 2 and f.window == 1  # only the training window's copies
    assert f.saving_ns == (60_000 + 40_000 + 2 * GAP) / 2
    assert kv(analyze(cache_trace(backward_in=()), windows=[0, 1])) == []  # inference: the cache is the point
