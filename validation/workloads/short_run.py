"""A run too short for a steady state: 20 steps, each with one of every regime on its own line.

    line "matmul"     a 8192x8192 bf16 matmul                      compute-bound (tensor cores)
    lines "pointwise" three chained pointwise ops on 64M floats    memory-bound
    line "tiny ops"   300 additions on a 16-element tensor         overhead-bound (launches)
    line "sync"       .item() on the GPU's result                  a host sync
    line "sleep"      time.sleep(0.02)                             the CPU away from the GPU
    lines "optimizer" a 16-weight SGD step (steps for brrrtui's windows; `--no-optimizer`: time windows)

brrrtui must put every kernel of a captured window on its line and show each of these lines, however few
steps the run has (`--steps`, default 20).
"""

from __future__ import annotations

import argparse
import time

import torch


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__)
    p.add_argument("--steps", type=int, default=20)
    p.add_argument("--size", type=int, default=8192, help="the matmul's side")
    p.add_argument("--elements", type=int, default=64 * 2**20, help="the pointwise ops' tensor size")
    p.add_argument("--no-optimizer", action="store_true", help="no optimizer step: brrrtui windows by time")
    args = p.parse_args()
    dev = "cuda" if torch.cuda.is_available() else "cpu"
    n = args.size if dev == "cuda" else 256
    m = args.elements if dev == "cuda" else 2**16
    a = torch.randn(n, n, device=dev, dtype=torch.bfloat16)
    b = torch.randn(n, n, device=dev, dtype=torch.bfloat16)
    x = torch.randn(m, device=dev)
    tiny = torch.zeros(16, device=dev)
    w = torch.zeros(16, device=dev, requires_grad=True)
    opt = torch.optim.SGD([w], lr=0.1)
    total = 0.0
    for _step in range(args.steps):
        c = a @ b  # matmul
        y = x * 1.0001  # pointwise
        y = y + 0.5  # pointwise
        y = torch.relu(y)  # pointwise
        for _ in range(300):
            tiny = tiny + 1  # tiny ops
        total += float(c[0, 0].item() + y[0].item())  # sync
        time.sleep(0.02)  # sleep
        if not args.no_optimizer:
            (w * tiny).sum().backward()  # optimizer
            opt.step()  # optimizer
            opt.zero_grad()  # optimizer
    print(f"RESULT steps={args.steps} total={total:.3g} tiny={float(tiny[0]):.0f}")


if __name__ == "__main__":
    main()
