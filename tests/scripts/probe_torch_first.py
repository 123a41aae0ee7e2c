"""Looks torch up before importing it, as transformers does on import (`importlib.util.find_spec("torch")`),
then trains a small model: brrrtui must still see the import and record the steps."""
import importlib.util

assert importlib.util.find_spec("torch") is not None

import torch  # noqa: E402

lin = torch.nn.Linear(64, 64)
opt = torch.optim.SGD(lin.parameters(), lr=0.1)
for _ in range(200):
    lin(torch.randn(32, 64)).tanh().sum().backward()
    opt.step()
    opt.zero_grad()
