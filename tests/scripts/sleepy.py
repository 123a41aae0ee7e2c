"""A training loop whose CPU stalls in a line that calls no torch."""
import time

import torch

lin = torch.nn.Linear(8, 8)
opt = torch.optim.SGD(lin.parameters(), lr=0.1)
for step in range(12):
    loss = lin(torch.randn(4, 8)).sum()  # L:forward
    loss.backward()
    time.sleep(0.03)  # L:sleep
    opt.step()
