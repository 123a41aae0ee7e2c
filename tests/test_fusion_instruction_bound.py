"""Pointwise kernels bound by their instructions (compute on the SIMT units: a long kernel far under the memory
roof) are still fusion candidates: fused, their arithmetic runs once in one kernel, without the intermediates
and the launches. Hugging Face GPT-2 on the H200 (`h200_hf_gpt2_steady`): the loss function's chain keeps its
instruction-bound kernels, and the finding says how many there are."""

from __future__ import annotations

import os

import numpy as np

from analyzers.results import REGIME_CODES, FindingKind, Regime
from brrrtui import session
from brrrtui.present.finding_words import message

FIXTURES = os.path.join(os.path.dirname(__file__), "fixtures")


def test_instruction_bound_pointwise_kernels_stay_in_their_fusion_chain():
    a, _ = session.analyse_phases(session.read(os.path.join(FIXTURES, "h200_hf_gpt2_steady.brrr.gz")))  # as `report`
    fusion = [f for f in a.findings if f.kind is FindingKind.FUSION]
    with_instr = [f for f in fusion if f.facts.instruction_bound]
    assert with_instr, [message(f) for f in fusion]
    f = with_instr[0]
    rows = np.asarray(f.kernels)
    compute = a.kernel_regime[rows] == REGIME_CODES[Regime.COMPUTE]
    assert compute.any()  # the finding's own kernels include them
    assert a.kernel_tensor_cores is not None and (a.kernel_tensor_cores[rows[compute]] == 0).all()
    assert f"{f.facts.instruction_bound} instruction-bound" in message(f)
    assert f.facts.memory_bound + f.facts.instruction_bound <= f.facts.kernels
