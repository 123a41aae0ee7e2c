"""A DDP training loop on gloo for the multi-rank tests: `torchrun --nproc_per_node=2 ddp_train.py STEPS
[SLOW_RANK SLEEP_S]`. Every step sleeps 10 ms (a stand-in for GPU work, so step times are steady on a busy
CPU); SLOW_RANK sleeps SLEEP_S more before its backward, which makes the other ranks wait in the all-reduce.
With DDP_FAIL_AT=STEP:HOW in the environment, SLOW_RANK ends at that step: HOW is `kill` (SIGKILL itself) or
`raise` (an uncaught exception)."""

import os
import signal
import sys
import time

import torch
import torch.distributed as dist
from torch.nn.parallel import DistributedDataParallel as DDP

steps = int(sys.argv[1]) if len(sys.argv) > 1 else 60
slow_rank = int(sys.argv[2]) if len(sys.argv) > 2 else -1
slow_s = float(sys.argv[3]) if len(sys.argv) > 3 else 0.0
fail_at, _, how = os.environ.get("DDP_FAIL_AT", "-1:").partition(":")
dist.init_process_group("gloo")
rank = dist.get_rank()
torch.manual_seed(0)
model = DDP(torch.nn.Sequential(torch.nn.Linear(32, 64), torch.nn.ReLU(), torch.nn.Linear(64, 1)))
opt = torch.optim.SGD(model.parameters(), lr=0.01)
x, y = torch.randn(16, 32), torch.randn(16, 1)
for step in range(steps):
    if rank == slow_rank and step == int(fail_at):
        if how == "kill":
            os.kill(os.getpid(), signal.SIGKILL)
        raise RuntimeError(f"rank {rank} fails at step {step}")
    loss = torch.nn.functional.mse_loss(model(x), y)
    time.sleep(0.01)  # the work every rank does
    if rank == slow_rank:
        time.sleep(slow_s)  # the straggler's extra work  # L:slow
    loss.backward()
    opt.step()
    opt.zero_grad()
print(f"rank {rank} of {dist.get_world_size()} done, pid {os.getpid()}, argv {sys.argv[1:]}", flush=True)
# A collective before the teardown: torch's gloo worker thread may still be freeing the last all-reduce,
# whose captured state holds a Python object (torch stashes one during backward); freed after the
# interpreter starts finalizing, it aborts the rank ("terminate called without an active exception",
# 4 of 25 plain torchrun runs on a 2-core CPU; 0 of 25 with the barrier).
dist.barrier()
dist.destroy_process_group()
