"""Two gloo ranks that each feed their steps from a DataLoader with a spawned worker process
(tests/test_ranks_e2e.py): the workers inherit the rank variables, yet only the ranks are traced."""

import os
import sys

import torch
import torch.distributed as dist
from torch.utils.data import DataLoader, TensorDataset


def main() -> None:
    dist.init_process_group("gloo")
    model = torch.nn.parallel.DistributedDataParallel(torch.nn.Linear(8, 1))
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    data = DataLoader(
        TensorDataset(torch.randn(64, 8)), batch_size=4, num_workers=1, multiprocessing_context="spawn"
    )
    for (x,) in data:
        model(x).sum().backward()
        opt.step()
        opt.zero_grad()
    own = sorted(k for k in os.environ if k.startswith("BRRRTUI"))
    print(f"rank {dist.get_rank()} PYTHONPATH={os.environ.get('PYTHONPATH')} brrrtui env {own}", flush=True)
    # A collective before the teardown, for torch's gloo exit abort (tests/scripts/ddp_train.py says why)
    dist.barrier()
    dist.destroy_process_group()


if __name__ == "__main__":
    sys.exit(main())
