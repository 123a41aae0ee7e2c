"""A small MLP trained through torch.compile (backend from argv: aot_eager by default, fast on a CPU;
"none": eager with torch._dynamo imported; a second argument "head": only the module `head` compiled, with
nn.Module.compile, inside an eager model); prints Dynamo's own counters at the end so a test can compare runs
with and without brrrtui."""
import json
import sys

import torch


class Head(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = torch.nn.Linear(256, 64)

    def forward(self, h):
        return self.fc(h).tanh()


class MLP(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.fc1 = torch.nn.Linear(64, 256)
        self.head = Head()

    def forward(self, x):
        h = self.fc1(x)
        h = torch.nn.functional.gelu(h)
        return self.head(h)


model = MLP()
opt = torch.optim.SGD(model.parameters(), lr=0.01)
backend = sys.argv[1] if len(sys.argv) > 1 else "aot_eager"
if backend == "none":  # eager, but torch._dynamo imported (as CUDA training with a fused optimizer does)
    import torch._dynamo  # noqa: F401
    step_fn = model
elif sys.argv[2:] == ["head"]:
    model.head.compile(backend=backend)
    step_fn = model
else:
    step_fn = torch.compile(model, backend=backend)
x = torch.randn(32, 64)
for step in range(60):
    loss = step_fn(x).pow(2).mean()
    loss.backward()
    opt.step()
    opt.zero_grad()
from torch._dynamo.utils import counters

print("COUNTERS " + json.dumps({k: dict(v) for k, v in counters.items() if k in ("graph_break", "stats", "recompiles")}))
