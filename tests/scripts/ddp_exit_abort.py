"""Two gloo ranks whose scripts finish, then die as their interpreters exit (tests/test_ranks_e2e.py): an
atexit handler aborts, as torch's gloo teardown sometimes does (docs/guide.md, Multi-GPU). brrrtui's own
exit hook has said goodbye before the handlers registered with atexit run."""

import atexit
import os

import torch
import torch.distributed as dist

dist.init_process_group("gloo")
model = torch.nn.parallel.DistributedDataParallel(torch.nn.Linear(8, 1))
opt = torch.optim.SGD(model.parameters(), lr=0.1)
for _ in range(3):
    model(torch.randn(4, 8)).sum().backward()
    opt.step()
    opt.zero_grad()
dist.barrier()
dist.destroy_process_group()
atexit.register(os.abort)
