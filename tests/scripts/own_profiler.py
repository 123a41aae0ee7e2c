"""The script profiles itself: brrrtui must step aside without breaking it."""

import torch
from torch.profiler import ProfilerActivity, profile

lin = torch.nn.Linear(8, 8)
opt = torch.optim.SGD(lin.parameters(), lr=0.1)
for _ in range(3):
    lin(torch.randn(4, 8)).sum().backward()
    opt.step()
with profile(activities=[ProfilerActivity.CPU]) as prof:
    for _ in range(3):
        lin(torch.randn(4, 8)).sum().backward()
        opt.step()
names = {e.key for e in prof.key_averages()}
print("own profiler saw aten::addmm:", "aten::addmm" in names)
