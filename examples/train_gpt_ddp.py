"""examples/train_gpt.py's GPT-2 under torch.distributed: DDP, or FSDP2 (`fully_shard` per block) with --fsdp.
Run it with torchrun; NCCL on GPUs, gloo on the CPU. A plain PyTorch script: it knows nothing of brrrtui.

    torchrun --nproc_per_node=2 examples/train_gpt_ddp.py --steps 500                   # 2 GPUs: DDP, B=16/rank
    torchrun --nproc_per_node=2 examples/train_gpt_ddp.py --fsdp --steps 500            # FSDP2
    torchrun --nproc_per_node=2 examples/train_gpt_ddp.py --slow-rank 1 --slow-ms 20    # a straggler
    torchrun --nproc_per_node=2 examples/train_gpt_ddp.py --no-sync                     # DDP, no all-reduce
    torchrun --nproc_per_node=2 examples/train_gpt_ddp.py --accum 4                     # 4 micro-batches a step
    torchrun --nproc_per_node=2 examples/train_gpt_ddp.py --layers 2 --seq 64 --batch 2 --vocab 4096 --steps 5

`--no-sync` runs every step inside DDP's `no_sync()` (no gradient all-reduce: the ranks drift apart; for
timing only): its step time less the normal run's is the all-reduce time the backward did not hide, the hand
measurement that brrrtui's exposed communication is checked against (validation/ddp_exposed.py).
`--accum K` is the cure brrrtui's exposed-communication finding names: each optimizer step runs K
micro-batches of `--batch` sequences, the first K-1 inside `no_sync()`, so the gradients are all-reduced once
per step instead of once per micro-batch.
Each rank draws its own random tokens. `--slow-rank R --slow-ms X` makes rank R sleep X ms per step before
its backward (a stand-in for a slow data loader or a hotter GPU): the other ranks then wait in the gradient
all-reduce. Rank 0 prints one `RESULT {...}` line (examples/train_gpt.py's fields, its own step times).
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import time

import torch
import torch.distributed as dist
from torch.nn.parallel import DistributedDataParallel as DDP
from train_gpt import GPT, summarize, sync


def wrap(model: torch.nn.Module, fsdp: bool, device: torch.device) -> torch.nn.Module:
    if not fsdp:
        return DDP(model, device_ids=[device.index] if device.type == "cuda" else None)
    from torch.distributed.fsdp import fully_shard

    for block in model.h:
        fully_shard(block)
    fully_shard(model)
    return model


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--steps", type=int, default=50)
    p.add_argument("--batch", type=int, default=16, help="sequences per rank")
    p.add_argument("--seq", type=int, default=1024)
    p.add_argument("--layers", type=int, default=12)
    p.add_argument("--heads", type=int, default=12)
    p.add_argument("--dim", type=int, default=768)
    p.add_argument("--vocab", type=int, default=50304)
    p.add_argument("--fsdp", action="store_true", help="FSDP2 (fully_shard) instead of DDP")
    p.add_argument("--no-sync", action="store_true", help="DDP without its gradient all-reduce (timing only)")
    p.add_argument(
        "--accum", type=int, default=1, help="micro-batches per optimizer step (no_sync but the last)"
    )
    p.add_argument("--slow-rank", type=int, default=-1)
    p.add_argument("--slow-ms", type=float, default=0.0)
    p.add_argument("--warmup", type=int, default=5, help="steps left out of mean/median")
    args = p.parse_args(argv)
    if (args.no_sync or args.accum > 1) and args.fsdp:
        p.error("--no-sync and --accum are DDP's")
    if args.accum < 1:
        p.error("--accum must be at least 1")

    cuda = torch.cuda.is_available()
    dist.init_process_group("nccl" if cuda else "gloo")
    rank, world = dist.get_rank(), dist.get_world_size()
    device = torch.device(f"cuda:{int(os.environ.get('LOCAL_RANK', 0))}" if cuda else "cpu")
    if cuda:
        torch.cuda.set_device(device)
        torch.backends.cuda.matmul.allow_tf32 = True
    torch.manual_seed(1337)  # the same initial weights on every rank
    model = wrap(GPT(args.vocab, args.seq, args.layers, args.heads, args.dim).to(device), args.fsdp, device)
    opt = torch.optim.AdamW(model.parameters(), lr=6e-4, betas=(0.9, 0.95), fused=cuda and not args.fsdp)
    gen = torch.Generator(device=device).manual_seed(1337 + rank)
    step_ms: list[float] = []
    sync(device)
    for _ in range(args.steps):
        t0 = time.perf_counter()
        for micro in range(args.accum):
            data = torch.randint(0, args.vocab, (args.batch, args.seq + 1), device=device, generator=gen)
            last = micro == args.accum - 1
            with model.no_sync() if args.no_sync or not last else contextlib.nullcontext():
                with torch.autocast(device_type=device.type, dtype=torch.bfloat16, enabled=cuda):
                    loss = model(data[:, :-1], data[:, 1:]) / args.accum
                if rank == args.slow_rank and last:
                    time.sleep(args.slow_ms / 1e3)
                loss.backward()
        opt.step()
        opt.zero_grad(set_to_none=True)
        sync(device)
        step_ms.append((time.perf_counter() - t0) * 1e3)
    if rank == 0:
        result = summarize(step_ms, args.warmup)
        result.update(
            script="train_gpt_ddp",
            world_size=world,
            fsdp=args.fsdp,
            no_sync=args.no_sync,
            accum=args.accum,
            device=str(device),
        )
        print("RESULT " + json.dumps({k: v for k, v in result.items() if k != "step_ms"}), flush=True)
    dist.destroy_process_group()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
