"""Hugging Face BERT-base masked-LM training (randomly initialised), bf16 autocast, AdamW; the library's
default attention implementation."""

from __future__ import annotations

import os
import sys

import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from common import parser, train  # noqa: E402


def main() -> None:
    p = parser(__doc__, steps=200, batch=32)
    p.add_argument("--seq", type=int, default=512)
    args = p.parse_args()
    from transformers import BertConfig, BertForMaskedLM

    model = BertForMaskedLM(BertConfig()).to(args.device).train()
    ids = torch.randint(0, 30522, (args.batch, args.seq), device=args.device)
    labels = torch.where(torch.rand(ids.shape, device=args.device) < 0.15, ids, -100)
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-4, fused=args.device.startswith("cuda"))

    def loss_of() -> torch.Tensor:
        with torch.autocast(args.device.split(":")[0], dtype=torch.bfloat16):
            return model(input_ids=ids, labels=labels).loss

    train("hf_bert", args, model, loss_of, optimizer)


if __name__ == "__main__":
    main()
