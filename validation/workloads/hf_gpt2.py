"""Hugging Face GPT-2 small (randomly initialised, nothing downloaded): causal-LM training, bf16 autocast, AdamW.

--vocab sets GPT2Config(vocab_size=...) (default GPT-2's 50257; 50304 pads it to a multiple of 64); the token
ids and labels are drawn below 50257 whatever the vocabulary, so both sizes train on the same data."""

from __future__ import annotations

import os
import sys

import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from common import parser, train  # noqa: E402


def main() -> None:
    p = parser(__doc__, steps=200, batch=8)
    p.add_argument("--seq", type=int, default=1024)
    p.add_argument("--vocab", type=int, default=50257, help="vocab_size (50304: padded to a multiple of 64)")
    p.add_argument("--seed", type=int, default=1337)
    args = p.parse_args()
    from transformers import GPT2Config, GPT2LMHeadModel

    torch.manual_seed(args.seed)
    model = GPT2LMHeadModel(GPT2Config(vocab_size=args.vocab)).to(args.device).train()
    ids = torch.randint(0, min(50257, args.vocab), (args.batch, args.seq), device=args.device)
    optimizer = torch.optim.AdamW(model.parameters(), lr=3e-4, fused=args.device.startswith("cuda"))

    def loss_of() -> torch.Tensor:
        with torch.autocast(args.device.split(":")[0], dtype=torch.bfloat16):
            return model(input_ids=ids, labels=ids).loss

    train("hf_gpt2", args, model, loss_of, optimizer)


if __name__ == "__main__":
    main()
