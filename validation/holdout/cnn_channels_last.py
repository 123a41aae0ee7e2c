"""torchvision ResNet-18 image-classification training in channels_last memory format (random data), bf16
autocast, SGD with momentum: the layout cuDNN's tensor-core convolutions prefer."""

from __future__ import annotations

import os
import sys

import torch

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "workloads"))
from common import parser, train  # noqa: E402


def main() -> None:
    p = parser(__doc__, steps=60, batch=128)
    p.add_argument("--size", type=int, default=224)
    args = p.parse_args()
    import torchvision

    torch.manual_seed(0)
    model = torchvision.models.resnet18().to(args.device).to(memory_format=torch.channels_last).train()
    x = torch.randn(args.batch, 3, args.size, args.size, device=args.device).to(memory_format=torch.channels_last)
    y = torch.randint(0, 1000, (args.batch,), device=args.device)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)

    def loss_of() -> torch.Tensor:
        with torch.autocast(args.device.split(":")[0], dtype=torch.bfloat16):
            return torch.nn.functional.cross_entropy(model(x), y)

    train("cnn_channels_last", args, model, loss_of, optimizer)


if __name__ == "__main__":
    main()
