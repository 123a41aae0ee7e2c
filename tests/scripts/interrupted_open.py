"""Optimizer steps until brrrtui opens its third window, where a Ctrl-C lands inside the profiler's start (as
a timeout's SIGINT did on the H200). The script then ends in KeyboardInterrupt, as it would without brrrtui;
argv[1] gets the number of steps that returned."""

import sys

import torch

import brrrtui.capture.session as session

real_start = session.ProfilerSession.start
opened = 0


def start(self):
    global opened
    opened += 1
    if opened == 3:
        self._prepare(self.config, self.activities)
        raise KeyboardInterrupt
    real_start(self)


session.ProfilerSession.start = start
lin = torch.nn.Linear(4, 4)
opt = torch.optim.SGD(lin.parameters(), lr=0.1)
done = 0
try:
    for _ in range(100_000):
        lin(torch.randn(2, 4)).sum().backward()
        opt.step()
        done += 1
finally:
    with open(sys.argv[1], "w") as f:
        f.write(str(done))
