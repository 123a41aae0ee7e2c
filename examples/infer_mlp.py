"""Inference without an optimizer: a residual MLP evaluated under torch.no_grad, for time-based windows.

brrrtui aligns its capture windows to optimizer steps; this script has none, so it exercises the time-based
fallback. Each iteration runs a batch through pre-norm residual MLP blocks (bf16 on CUDA), then does what an
eval loop does: softmax, top-5, and a copy of the predictions to the host (a device synchronisation).

    python examples/infer_mlp.py --seconds 10            # GPU: ~2-3 ms per iteration on an H200
    python examples/infer_mlp.py --smoke                 # CPU: tiny sizes, 3 iterations

Prints a progress line about once a second (and every iteration with --iters), then
`RESULT {"steps": iterations, "mean_step_ms": .., "median_step_ms": .., "step_ms": [...], ...}`.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import time

import torch
import torch.nn as nn
import torch.nn.functional as F


class Block(nn.Module):
    def __init__(self, dim: int, hidden: int):
        super().__init__()
        self.norm = nn.LayerNorm(dim)
        self.fc1 = nn.Linear(dim, hidden)
        self.fc2 = nn.Linear(hidden, dim)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x + self.fc2(F.gelu(self.fc1(self.norm(x))))


class ResMLP(nn.Module):
    def __init__(self, dim: int, hidden: int, blocks: int, classes: int):
        super().__init__()
        self.blocks = nn.Sequential(*(Block(dim, hidden) for _ in range(blocks)))
        self.head = nn.Linear(dim, classes)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.head(self.blocks(x))


def summarize(step_ms: list[float], warmup: int) -> dict:
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
    p.add_argument("--seconds", type=float, default=10.0, help="run this long (ignored with --iters)")
    p.add_argument("--iters", type=int, default=None, help="run exactly this many iterations")
    p.add_argument("--batch", type=int, default=4096)
    p.add_argument("--dim", type=int, default=2048)
    p.add_argument("--hidden", type=int, default=8192)
    p.add_argument("--blocks", type=int, default=6)
    p.add_argument("--classes", type=int, default=1000)
    p.add_argument("--device", default="auto", help="auto (cuda if available), cuda, cpu")
    p.add_argument("--amp", choices=["auto", "bf16", "none"], default="auto", help="auto: bf16 on CUDA only")
    p.add_argument("--smoke", action="store_true", help="tiny sizes and 3 iterations (CPU test)")
    p.add_argument("--warmup", type=int, default=2, help="iterations left out of mean/median")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--out", default=os.environ.get("OUT"), help="write infer_mlp_result.json here ($OUT)")
    args = p.parse_args(argv)
    if args.smoke:
        args.batch, args.dim, args.hidden, args.blocks, args.classes = 16, 64, 256, 2, 10
        args.iters = args.iters or 3
    if args.iters is not None and args.iters < 1:
        p.error("--iters must be >= 1")

    torch.manual_seed(args.seed)
    if args.device == "auto":
        device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
    else:
        device = torch.device(args.device)
    use_bf16 = args.amp == "bf16" or (args.amp == "auto" and device.type == "cuda")
    dtype = torch.bfloat16 if use_bf16 else torch.float32
    model = ResMLP(args.dim, args.hidden, args.blocks, args.classes).to(device=device, dtype=dtype).eval()
    gen = torch.Generator(device=device).manual_seed(args.seed)
    print(
        f"infer_mlp: dim={args.dim} hidden={args.hidden} blocks={args.blocks} B={args.batch} "
        f"device={device} dtype={dtype}",
        flush=True,
    )

    step_ms: list[float] = []
    start = last_print = time.perf_counter()
    with torch.no_grad():
        while True:
            t0 = time.perf_counter()
            x = torch.randn(args.batch, args.dim, device=device, dtype=dtype, generator=gen)
            probs = model(x).float().softmax(dim=-1)
            top = probs.topk(5, dim=-1).indices
            preds = top[:, 0].cpu()  # the host needs the answer: synchronises with the device
            now = time.perf_counter()
            step_ms.append((now - t0) * 1e3)
            n = len(step_ms)
            if args.iters is not None or now - last_print >= 1.0:
                print(
                    f"iter {n - 1} elapsed_s {now - start:.2f} dt_ms {step_ms[-1]:.2f} pred0 {int(preds[0])}",
                    flush=True,
                )
                last_print = now
            if (args.iters is not None and n >= args.iters) or (
                args.iters is None and now - start >= args.seconds
            ):
                break

    result = summarize(step_ms, args.warmup)
    result.update(
        script="infer_mlp",
        device=str(device),
        batch=args.batch,
        dim=args.dim,
        blocks=args.blocks,
        dtype=str(dtype),
    )
    print("RESULT " + json.dumps(result), flush=True)
    if args.out:
        os.makedirs(args.out, exist_ok=True)
        with open(os.path.join(args.out, "infer_mlp_result.json"), "w") as f:
            json.dump(result, f, indent=1)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
