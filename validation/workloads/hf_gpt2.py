"""Hugging Face GPT-2 small (randomly initialised, nothing downloaded): causal-LM training, bf16 autocast, AdamW."""

from __future__ import annotations

import os
import sys

import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from common import parser, train  # noqa: E402


def main() -> None:
    p = parser(__doc__, steps=200, batch=8)
    p.add_argument("--seq", type=int, default=1024)
    args = p.parse_args()
    from transformers import GPT2Config, GPT2LMHeadModel

    model = GPT2LMHeadModel(GPT2Config()).to(args.device).train()
    ids = torch.randint(0, 50257, (args.batch, args.seq), device=args.device)
    optimizer = torch.optim.AdamW(model.parameters(), lr=3e-4, fused=args.device.startswith("cuda"))

    def loss_of() -> torch.Tensor:
        with torch.autocast(args.device.split(":")[0], dtype=torch.bfloat16):
            return model(input_ids=ids, labels=ids).loss

    train("hf_gpt2", args, model, loss_of, optimizer)


if __name__ == "__main__":
    main()
