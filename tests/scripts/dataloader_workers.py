"""DataLoader workers with fork and spawn behave as without brrrtui."""

import torch
from torch.utils.data import DataLoader, TensorDataset


def main() -> None:
    ds = TensorDataset(torch.arange(64, dtype=torch.float32).view(32, 2))
    lin = torch.nn.Linear(2, 1)
    opt = torch.optim.SGD(lin.parameters(), lr=0.01)
    for context in ("fork", "spawn"):
        total = 0.0
        for (batch,) in DataLoader(ds, batch_size=8, num_workers=2, multiprocessing_context=context):
            loss = lin(batch).sum()
            loss.backward()
            opt.step()
            total += float(batch.sum())
        print(context, total)


if __name__ == "__main__":
    main()
