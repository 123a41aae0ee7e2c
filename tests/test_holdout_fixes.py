"""The hold-out fixes' harness (validation/holdout/fixes.py) on the CPU: graph_step's optimizer is the loop's
own, made again with capturable=True, whatever settings its param group records."""

from __future__ import annotations

import importlib.util
import os

import pytest
import torch

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


@pytest.fixture(scope="module")
def fixes():
    spec = importlib.util.spec_from_file_location("holdout_fixes", os.path.join(ROOT, "validation/holdout/fixes.py"))
    assert spec and spec.loader
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def test_adamw_made_capturable_with_its_settings(fixes):
    model = torch.nn.Linear(3, 2)
    opt = torch.optim.AdamW(model.parameters(), lr=3e-4, betas=(0.8, 0.95), eps=1e-6, weight_decay=0.05)
    copy = fixes.capturable_copy(opt, model.parameters())
    assert type(copy) is torch.optim.AdamW
    group = copy.param_groups[0]
    assert group["capturable"] is True
    assert (group["lr"], group["betas"], group["eps"], group["weight_decay"]) == (3e-4, (0.8, 0.95), 1e-6, 0.05)
    assert [p.data_ptr() for p in group["params"]] == [p.data_ptr() for p in model.parameters()]


def test_graph_step_refuses_the_cpu(fixes):
    import argparse

    model = torch.nn.Linear(3, 2)
    opt = torch.optim.AdamW(model.parameters())
    with pytest.raises(ValueError, match="CUDA"):
        fixes._graph_step(argparse.Namespace(device="cpu"), model, lambda: model(torch.ones(1, 3)).sum(), opt)
