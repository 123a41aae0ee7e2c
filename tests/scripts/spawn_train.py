"""A DDP training loop on gloo whose ranks the script starts itself, for the mp.spawn tests:
`spawn_train.py STEPS [SLOW_RANK SLEEP_S [HOW]]`. HOW: `spawn` (torch.multiprocessing.spawn, the default) or
`process` (multiprocessing.Process with the fork start method). Every step sleeps 10 ms; SLOW_RANK sleeps
SLEEP_S more before its backward, which makes the other rank wait in the all-reduce."""

import multiprocessing
import os
import socket
import sys
import time

import torch
import torch.distributed as dist
from torch.nn.parallel import DistributedDataParallel as DDP

WORLD = 2


def train(rank: int, port: int, steps: int, slow_rank: int, slow_s: float) -> None:
    dist.init_process_group("gloo", init_method=f"tcp://127.0.0.1:{port}", rank=rank, world_size=WORLD)
    torch.manual_seed(0)
    model = DDP(torch.nn.Sequential(torch.nn.Linear(32, 64), torch.nn.ReLU(), torch.nn.Linear(64, 1)))
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    x, y = torch.randn(16, 32), torch.randn(16, 1)
    for _ in range(steps):
        loss = torch.nn.functional.mse_loss(model(x), y)
        time.sleep(0.01)  # the work every rank does
        if rank == slow_rank:
            time.sleep(slow_s)  # the straggler's extra work  # L:slow
        loss.backward()
        opt.step()
        opt.zero_grad()
    print(f"rank {rank} of {dist.get_world_size()} done, pid {os.getpid()}", flush=True)
    dist.barrier()  # neither rank tears gloo down while the other still talks to it
    dist.destroy_process_group()


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


if __name__ == "__main__":
    steps = int(sys.argv[1]) if len(sys.argv) > 1 else 60
    slow_rank = int(sys.argv[2]) if len(sys.argv) > 2 else -1
    slow_s = float(sys.argv[3]) if len(sys.argv) > 3 else 0.0
    how = sys.argv[4] if len(sys.argv) > 4 else "spawn"
    args = (free_port(), steps, slow_rank, slow_s)
    if how == "spawn":
        torch.multiprocessing.spawn(train, args=args, nprocs=WORLD)
    else:
        ctx = multiprocessing.get_context("fork")
        procs = [ctx.Process(target=train, args=(r, *args)) for r in range(WORLD)]
        for p in procs:
            p.start()
        for p in procs:
            p.join()
        sys.exit(max(p.exitcode or 0 for p in procs))
    print(f"launcher done, pid {os.getpid()}", flush=True)
