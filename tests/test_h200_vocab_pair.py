"""Two real runs of one script on the H200, before and after the fix brrrtui advises: Hugging Face GPT-2 small
(validation/workloads/hf_gpt2.py, 120 steps, default `brrrtui record`) with its vocabulary of 50257, then padded
to 50304 (`--vocab 50304`). Recorded by `python -m validation.run verdicts`."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from analyzers.analyze import analyze
from analyzers.cost.gemm_shapes import narrow_load_bytes
from analyzers.results import Regime
from brrrtui.present.finding_words import message
from brrrtui.recording.load import load_trace

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
BEFORE = os.path.join(ROOT, "tests", "fixtures", "h200_hf_gpt2_vocab50257.brrr.gz")
AFTER = os.path.join(ROOT, "tests", "fixtures", "h200_hf_gpt2_vocab50304.brrr.gz")
MS = 1e6


@pytest.fixture(scope="module")
def both():
    return analyze(load_trace(BEFORE)), analyze(load_trace(AFTER))


def test_diff_shows_the_padded_vocabulary_saving_on_the_step_line_and_its_kernels():
    cmd = [sys.executable, "-m", "brrrtui", "diff", "--json", BEFORE, AFTER]
    r = subprocess.run(cmd, capture_output=True, text=True, cwd=ROOT, timeout=300)
    assert r.returncode == 0, r.stderr
    d = json.loads(r.stdout)
    step = d["run"][0]
    assert step["what"] == "step time" and step["beyond_noise"] is True
    assert round(step["before"] / MS, 1) == 57.9 and round(step["after"] / MS, 1) == 44.9
    top = d["lines"][0]
    assert (os.path.basename(top["before"]["file"]), top["before"]["line"]) == ("hf_gpt2.py", 32)
    assert top["change_ns"] < -12 * MS and top["beyond_noise"] is True
    gone = [k for k in d["kernels"] if k["calls"]["after"] == 0 and "cutlass_75_tensorop" in k["name"]]
    assert len(gone) == 3 and sum(k["change_ns"] for k in gone) < -15 * MS
    assert all(k["regime"]["before"] == "memory" for k in gone)  # on chip: unaligned operands


def test_the_slow_gemm_finding_predicted_the_measured_saving(both):
    before, after = both
    (finding,) = [f for f in before.findings if f.kind == "slow_gemm"]
    assert finding.saving_ns is not None
    measured = before.overhead.unprofiled_step_ns - after.overhead.unprofiled_step_ns  # medians, 12.94 ms
    assert finding.saving_ns == pytest.approx(measured, rel=0.05)
    assert not [f for f in after.findings if f.kind == "slow_gemm"]


def test_unaligned_vocabulary_gemms_are_memory_bound_on_chip(both):
    before, _ = both
    unaligned = [k for k in before.kernels if narrow_load_bytes(k.name)]
    assert len(unaligned) == 3 and all(k.regime is Regime.MEMORY for k in unaligned)
    assert all(k.roof_fraction is not None and k.roof_fraction < 0.25 for k in unaligned)


def test_the_fusion_estimate_does_not_depend_on_how_much_the_profiler_starved_the_window(both):
    # the padded run's window starved the GPU more (median gap between kernels 28 us against 1.9 us): the same
    # chain (the loss function's scope, the same kernels in both) must still be credited what a launch costs
    # without the profiler
    before, after = both
    (a,) = [f for f in before.findings if f.kind == "fusion" and "pointwise (" in message(f)]
    (b,) = [f for f in after.findings if f.kind == "fusion" and "pointwise (" in message(f)]
    assert a.facts.kernels == b.facts.kernels
    assert a.saving_ns is not None and b.saving_ns is not None
    assert b.saving_ns == pytest.approx(a.saving_ns, rel=0.05)
