"""A training loop over a library model (tests/scripts/fake_site) wrapped in a module of the script's own:
module paths and library lines on CPU."""

import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "fake_site", "site-packages"))

import torch  # noqa: E402
from modellib.blocks import Net  # noqa: E402
from torch import nn  # noqa: E402


class Wrapper(nn.Module):
    def __init__(self):
        super().__init__()
        self.body = Net()
        self.scale = nn.Parameter(torch.ones(1))

    def forward(self, x):
        y = self.body(x)
        return y * self.scale  # the script's own line inside its own module


model = Wrapper()
opt = torch.optim.SGD(model.parameters(), lr=0.01)
for step in range(int(sys.argv[1]) if len(sys.argv) > 1 else 60):
    x = torch.randn(64, 32)
    loss = model(x).pow(2).mean()
    loss.backward()
    opt.step()
    opt.zero_grad()
