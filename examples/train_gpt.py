"""A self-contained GPT-2-small training loop (nanoGPT-like) on random tokens, for brrrtui to record.

12 layers, 12 heads, 768 dim, block 1024, vocab 50304 (GPT-2's 50257 padded to a multiple of 64), bf16
autocast on CUDA, AdamW (fused on CUDA), gradient clipping at 1.0. Tokens are drawn on the device every step,
so there is no data loader and nothing to download. A plain PyTorch script: it knows nothing of brrrtui.

    python examples/train_gpt.py --steps 50                       # GPU: B=16, T=1024 (~44 ms/step on an H200)
    python examples/train_gpt.py --layers 2 --seq 64 --batch 2 --steps 3   # CPU smoke test, a few seconds

Prints `step i loss x.xxx dt_ms y` each step, then one line
`RESULT {"steps": .., "mean_step_ms": .., "median_step_ms": .., "step_ms": [...], ...}` where the mean and
median leave out the first --warmup steps (CUDA/cuBLAS initialisation, autotuning, compilation). Each step is
timed with a device synchronisation at its end, so a step's time is its whole cost, GPU included.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import statistics
import time

import torch
import torch.nn as nn
import torch.nn.functional as F


class CausalSelfAttention(nn.Module):
    def __init__(self, dim: int, heads: int):
        super().__init__()
        self.heads = heads
        self.c_attn = nn.Linear(dim, 3 * dim)
        self.c_proj = nn.Linear(dim, dim)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        b, t, c = x.shape
        q, k, v = self.c_attn(x).split(c, dim=2)
        q = q.view(b, t, self.heads, c // self.heads).transpose(1, 2)
        k = k.view(b, t, self.heads, c // self.heads).transpose(1, 2)
        v = v.view(b, t, self.heads, c // self.heads).transpose(1, 2)
        y = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        y = y.transpose(1, 2).contiguous().view(b, t, c)
        return self.c_proj(y)


class MLP(nn.Module):
    def __init__(self, dim: int):
        super().__init__()
        self.c_fc = nn.Linear(dim, 4 * dim)
        self.c_proj = nn.Linear(4 * dim, dim)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.c_proj(F.gelu(self.c_fc(x), approximate="tanh"))


class Block(nn.Module):
    def __init__(self, dim: int, heads: int):
        super().__init__()
        self.ln_1 = nn.LayerNorm(dim)
        self.attn = CausalSelfAttention(dim, heads)
        self.ln_2 = nn.LayerNorm(dim)
        self.mlp = MLP(dim)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = x + self.attn(self.ln_1(x))
        x = x + self.mlp(self.ln_2(x))
        return x


class GPT(nn.Module):
    def __init__(self, vocab: int, block: int, layers: int, heads: int, dim: int):
        super().__init__()
        self.wte = nn.Embedding(vocab, dim)
        self.wpe = nn.Embedding(block, dim)
        self.h = nn.ModuleList(Block(dim, heads) for _ in range(layers))
        self.ln_f = nn.LayerNorm(dim)
        self.lm_head = nn.Linear(dim, vocab, bias=False)
        self.wte.weight = self.lm_head.weight  # weight tying, as in GPT-2
        self.apply(self._init)
        for name, p in self.named_parameters():
            if name.endswith("c_proj.weight"):
                nn.init.normal_(p, mean=0.0, std=0.02 / math.sqrt(2 * layers))

    @staticmethod
    def _init(m: nn.Module) -> None:
        if isinstance(m, nn.Linear):
            nn.init.normal_(m.weight, mean=0.0, std=0.02)
            if m.bias is not None:
                nn.init.zeros_(m.bias)
        elif isinstance(m, nn.Embedding):
            nn.init.normal_(m.weight, mean=0.0, std=0.02)

    def forward(self, idx: torch.Tensor, targets: torch.Tensor) -> torch.Tensor:
        t = idx.shape[1]
        pos = torch.arange(t, device=idx.device)
        x = self.wte(idx) + self.wpe(pos)
        for block in self.h:
            x = block(x)
        logits = self.lm_head(self.ln_f(x))
        return F.cross_entropy(logits.view(-1, logits.size(-1)), targets.reshape(-1))


def pick_device(name: str) -> torch.device:
    if name == "auto":
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    return torch.device(name)


def sync(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def summarize(step_ms: list[float], warmup: int) -> dict:
    """The RESULT record: mean/median over the steps after `warmup` (all steps if there are no others)."""
    timed = step_ms[warmup:] if len(step_ms) > warmup else step_ms
    return {
        "steps": len(step_ms),
        "warmup": len(step_ms) - len(timed),
        "mean_step_ms": round(statistics.fmean(timed), 4) if timed else None,
        "median_step_ms": round(statistics.median(timed), 4) if timed else None,
        "step_ms": [round(x, 4) for x in step_ms],
    }


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--steps", type=int, default=50)
    p.add_argument("--batch", type=int, default=16)
    p.add_argument("--seq", type=int, default=1024, help="tokens per sequence (<= --block)")
    p.add_argument("--block", type=int, default=1024, help="context length of the position embedding")
    p.add_argument("--layers", type=int, default=12)
    p.add_argument("--heads", type=int, default=12)
    p.add_argument("--dim", type=int, default=768)
    p.add_argument("--vocab", type=int, default=50304)
    p.add_argument("--device", default="auto", help="auto (cuda if available), cuda, cuda:1, cpu")
    p.add_argument("--amp", choices=["auto", "bf16", "none"], default="auto", help="auto: bf16 on CUDA only")
    p.add_argument("--compile", action="store_true", help="torch.compile the model")
    p.add_argument("--lr", type=float, default=6e-4)
    p.add_argument("--warmup", type=int, default=2, help="steps left out of mean/median")
    p.add_argument("--seed", type=int, default=1337)
    p.add_argument("--out", default=os.environ.get("OUT"), help="write <name>_result.json here ($OUT)")
    p.add_argument("--name", default="train_gpt", help="file name stem of the result JSON")
    args = p.parse_args(argv)
    if args.seq > args.block:
        p.error("--seq must be <= --block")

    torch.manual_seed(args.seed)
    device = pick_device(args.device)
    use_bf16 = args.amp == "bf16" or (args.amp == "auto" and device.type == "cuda")
    if device.type == "cuda":
        torch.backends.cuda.matmul.allow_tf32 = True
        torch.backends.cudnn.allow_tf32 = True

    model = GPT(args.vocab, args.block, args.layers, args.heads, args.dim).to(device)
    n_params = sum(p.numel() for p in model.parameters())
    decay = [p for p in model.parameters() if p.dim() >= 2]
    no_decay = [p for p in model.parameters() if p.dim() < 2]
    groups = [{"params": decay, "weight_decay": 0.1}, {"params": no_decay, "weight_decay": 0.0}]
    opt = torch.optim.AdamW(groups, lr=args.lr, betas=(0.9, 0.95), fused=device.type == "cuda")
    step_fn = torch.compile(model) if args.compile else model
    gen = torch.Generator(device=device).manual_seed(args.seed)
    print(
        f"train_gpt: {n_params / 1e6:.1f}M params, layers={args.layers} B={args.batch} T={args.seq} "
        f"device={device} bf16={use_bf16} compile={args.compile}",
        flush=True,
    )

    step_ms: list[float] = []
    sync(device)
    for step in range(args.steps):
        t0 = time.perf_counter()
        data = torch.randint(0, args.vocab, (args.batch, args.seq + 1), device=device, generator=gen)
        x, y = data[:, :-1], data[:, 1:]
        with torch.autocast(device_type=device.type, dtype=torch.bfloat16, enabled=use_bf16):
            loss = step_fn(x, y)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        opt.zero_grad(set_to_none=True)
        sync(device)
        dt_ms = (time.perf_counter() - t0) * 1e3
        step_ms.append(dt_ms)
        print(f"step {step} loss {loss.item():.3f} dt_ms {dt_ms:.2f}", flush=True)

    result = summarize(step_ms, args.warmup)
    result.update(
        script="train_gpt",
        steps_ms=[round(t, 3) for t in step_ms],
        device=str(device),
        batch=args.batch,
        seq=args.seq,
        layers=args.layers,
        bf16=use_bf16,
        compile=args.compile,
        params=n_params,
    )
    print("RESULT " + json.dumps({k: v for k, v in result.items() if k != "steps_ms"}), flush=True)
    if args.out:
        os.makedirs(args.out, exist_ok=True)
        with open(os.path.join(args.out, f"{args.name}_result.json"), "w") as f:
            json.dump(result, f, indent=1)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
