"""Many quick optimizer steps, then a marker file (argv[1]) and a long wait: for the SIGTERM step flush test."""
import sys
import time

import torch

lin = torch.nn.Linear(4, 4)
opt = torch.optim.SGD(lin.parameters(), lr=0.1)
for _ in range(300):
    lin(torch.randn(2, 4)).sum().backward()
    opt.step()
with open(sys.argv[1], "w") as f:
    f.write("300")
time.sleep(120)
