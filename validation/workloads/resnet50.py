"""torchvision ResNet-50 image-classification training (random data), bf16 autocast, SGD with momentum."""

from __future__ import annotations

import os
import sys

import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from common import parser, train  # noqa: E402


def main() -> None:
    p = parser(__doc__, steps=150, batch=128)
    p.add_argument("--size", type=int, default=224)
    p.add_argument("--compile", action="store_true", help="torch.compile the model")
    args = p.parse_args()
    import torchvision

    model = torchvision.models.resnet50().to(args.device).train()
    if args.compile:
        model = torch.compile(model)
    x = torch.randn(args.batch, 3, args.size, args.size, device=args.device)
    y = torch.randint(0, 1000, (args.batch,), device=args.device)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)

    def loss_of() -> torch.Tensor:
        with torch.autocast(args.device.split(":")[0], dtype=torch.bfloat16):
            return torch.nn.functional.cross_entropy(model(x), y)

    train("resnet50", args, model, loss_of, optimizer)


if __name__ == "__main__":
    main()
