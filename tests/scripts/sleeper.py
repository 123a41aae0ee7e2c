"""Trains slowly forever (until interrupted): for Ctrl-C and kill tests."""

import time

import torch

lin = torch.nn.Linear(8, 8)
opt = torch.optim.SGD(lin.parameters(), lr=0.1)
step = 0
while True:
    lin(torch.randn(4, 8)).sum().backward()
    opt.step()
    step += 1
    print("step", step, flush=True)
    time.sleep(0.05)
