"""A recurrent language model: token embedding, a two-layer LSTM (cuDNN), a linear read-out over the
vocabulary; random tokens, fp32 with TF32 matmuls off (as PyTorch ships), Adam."""

from __future__ import annotations

import os
import sys

import torch
from torch import nn
from torch.nn import functional as F

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "workloads"))
from common import parser, train  # noqa: E402


class LSTMLanguageModel(nn.Module):
    def __init__(self, vocab: int, dim: int, hidden: int, layers: int):
        super().__init__()
        self.embed = nn.Embedding(vocab, dim)
        self.rnn = nn.LSTM(dim, hidden, num_layers=layers, batch_first=True, dropout=0.1)
        self.head = nn.Linear(hidden, vocab)

    def forward(self, ids: torch.Tensor) -> torch.Tensor:
        out, _ = self.rnn(self.embed(ids))
        return self.head(out)


def main() -> None:
    p = parser(__doc__, steps=60, batch=64)
    p.add_argument("--seq", type=int, default=128)
    p.add_argument("--dim", type=int, default=512)
    p.add_argument("--hidden", type=int, default=1024)
    p.add_argument("--layers", type=int, default=2)
    p.add_argument("--vocab", type=int, default=10000)
    args = p.parse_args()
    torch.manual_seed(0)
    model = LSTMLanguageModel(args.vocab, args.dim, args.hidden, args.layers).to(args.device).train()
    ids = torch.randint(0, args.vocab, (args.batch, args.seq + 1), device=args.device)
    optimizer = torch.optim.Adam(model.parameters(), lr=1e-3)

    def loss_of() -> torch.Tensor:
        logits = model(ids[:, :-1])
        return F.cross_entropy(logits.reshape(-1, args.vocab), ids[:, 1:].reshape(-1))

    train("lstm_lm", args, model, loss_of, optimizer)


if __name__ == "__main__":
    main()
