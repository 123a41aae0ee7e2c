"""No optimizer; a slow set-up (a torch call every 20 ms for 2 s), then a tight loop of torch calls for argv[1]
seconds: the first time window sees a trickle, the next one a flood."""

import sys
import time

import torch

x = torch.randn(8, 8)
end = time.time() + 2.0
while time.time() < end:
    x = torch.tanh(x)
    time.sleep(0.02)
end = time.time() + float(sys.argv[1])
calls = 0
while time.time() < end:
    x = torch.tanh(x)
    calls += 1
print("fast calls", calls)
