"""Ignores the first Ctrl-C, like a script stuck in a loop that swallows KeyboardInterrupt."""
import time

import torch

lin = torch.nn.Linear(8, 8)
opt = torch.optim.SGD(lin.parameters(), lr=0.1)
while True:
    try:
        while True:
            lin(torch.randn(4, 8)).sum().backward()
            opt.step()
            print("step", flush=True)
            time.sleep(0.05)
    except KeyboardInterrupt:
        print("ignoring Ctrl-C", flush=True)
