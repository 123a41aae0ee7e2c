"""A stack of mixture-of-experts feed-forward layers (a learned router, top-2 of E experts per token, each
expert a GELU MLP; tokens gathered per expert and scattered back with index_add_), with a load-balancing
loss; random tokens, bf16 autocast, AdamW."""

from __future__ import annotations

import os
import sys

import torch
from torch import nn
from torch.nn import functional as F

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "workloads"))
from common import parser, train  # noqa: E402


class Expert(nn.Module):
    def __init__(self, dim: int, hidden: int):
        super().__init__()
        self.fc1 = nn.Linear(dim, hidden)
        self.fc2 = nn.Linear(hidden, dim)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.fc2(F.gelu(self.fc1(x)))


class MoELayer(nn.Module):
    def __init__(self, dim: int, hidden: int, experts: int, top_k: int = 2):
        super().__init__()
        self.norm = nn.LayerNorm(dim)
        self.router = nn.Linear(dim, experts, bias=False)
        self.experts = nn.ModuleList(Expert(dim, hidden) for _ in range(experts))
        self.top_k = top_k

    def forward(self, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        tokens = self.norm(x).reshape(-1, x.shape[-1])
        probs = F.softmax(self.router(tokens).float(), dim=-1)
        weight, chosen = probs.topk(self.top_k, dim=-1)
        weight = (weight / weight.sum(-1, keepdim=True)).to(tokens.dtype)
        out = torch.zeros_like(tokens)
        for e, expert in enumerate(self.experts):
            rows, slot = torch.where(chosen == e)
            if rows.numel():
                out.index_add_(0, rows, expert(tokens[rows]) * weight[rows, slot, None])
        # the load-balancing loss of Switch Transformer: fraction routed times mean probability, per expert
        routed = F.one_hot(chosen[:, 0], probs.shape[-1]).float().mean(0)
        balance = probs.shape[-1] * (routed * probs.mean(0)).sum()
        return x + out.view_as(x), balance


class MoEStack(nn.Module):
    def __init__(self, vocab: int, dim: int, hidden: int, experts: int, layers: int):
        super().__init__()
        self.embed = nn.Embedding(vocab, dim)
        self.layers = nn.ModuleList(MoELayer(dim, hidden, experts) for _ in range(layers))
        self.head = nn.Linear(dim, vocab, bias=False)

    def forward(self, ids: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        x, aux = self.embed(ids), torch.zeros((), device=ids.device)
        for layer in self.layers:
            x, balance = layer(x)
            aux = aux + balance
        return self.head(x), aux


def main() -> None:
    p = parser(__doc__, steps=60, batch=8)
    p.add_argument("--seq", type=int, default=1024)
    p.add_argument("--dim", type=int, default=1024)
    p.add_argument("--hidden", type=int, default=2048)
    p.add_argument("--experts", type=int, default=8)
    p.add_argument("--layers", type=int, default=4)
    p.add_argument("--vocab", type=int, default=8192)
    args = p.parse_args()
    torch.manual_seed(0)
    model = MoEStack(args.vocab, args.dim, args.hidden, args.experts, args.layers).to(args.device).train()
    ids = torch.randint(0, args.vocab, (args.batch, args.seq + 1), device=args.device)
    optimizer = torch.optim.AdamW(model.parameters(), lr=3e-4)

    def loss_of() -> torch.Tensor:
        with torch.autocast(args.device.split(":")[0], dtype=torch.bfloat16):
            logits, aux = model(ids[:, :-1])
            return F.cross_entropy(logits.reshape(-1, args.vocab).float(), ids[:, 1:].reshape(-1)) + 0.01 * aux

    train("moe_layer", args, model, loss_of, optimizer)


if __name__ == "__main__":
    main()
