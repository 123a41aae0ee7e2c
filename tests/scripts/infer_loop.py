"""No optimizer: brrrtui must fall back to time-based windows."""

import sys
import time

import torch

seconds = float(sys.argv[1]) if len(sys.argv) > 1 else 3.0
x = torch.randn(64, 64)
t0 = time.time()
n = 0
with torch.no_grad():
    while time.time() - t0 < seconds:
        y = torch.tanh(x @ x)  # L:tanh
        n += 1
print("iterations", n)
