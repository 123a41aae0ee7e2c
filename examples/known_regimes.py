"""A training-shaped loop whose lines have known regimes, to check brrrtui's verdicts against ncu.

Every line inside the loop that matters ends in `# expect: compute|memory|overhead`;
validation/ncu_verdicts.py parses those comments, so keep exactly one regime per tagged line.

    python examples/known_regimes.py                    # GPU: ~7 ms per step on an H200, 30 steps
    python examples/known_regimes.py --smoke            # CPU: --scale 0.01, 3 steps

What each tagged line does on an H200 at --scale 1 (measured):
- `torch.mm(a, b, out=c)`: bf16 8192x8192x8192 matmul, 1.1 TFLOP, ~1.4 ms at ~800 TFLOP/s: compute-bound.
- four pointwise ops, one per line, on a 2^28-element fp32 tensor (1 GiB, far above the 60 MiB L2): each
  reads and writes 1 GiB, ~0.5 ms at ~4.3 TB/s: memory-bound. Each one's output feeds the next, so the four
  are a fusion candidate (8 GiB of traffic unfused, 2 GiB fused).
- `.item()`: waits for the device, copies 4 bytes back: a sync (overhead).
- a loop of 200 `tanh`s on 32 elements: ~2 µs kernels behind ~5-10 µs of CPU dispatch each: overhead.
- `time.sleep`: the CPU stalls and the GPU has nothing queued: overhead (host).
- the loss, backward and SGD step over a 32-element dummy parameter: tiny kernels, overhead. The optimizer is
  there so brrrtui's windows align to steps.

Prints `step i dt_ms x` each step, then `RESULT {"steps": .., "mean_step_ms": .., ...}`.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import time

import torch


def sizes(scale: float) -> tuple[int, int]:
    """(matmul side, pointwise element count) at `scale` (1.0: 8192 and 2^28)."""
    side = max(64, int(8192 * scale) // 64 * 64)
    numel = max(4096, int(2**28 * scale))
    return side, numel


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--steps", type=int, default=30)
    p.add_argument("--scale", type=float, default=1.0, help="shrink the matmul and pointwise tensors")
    p.add_argument("--tiny-ops", type=int, default=200, help="tiny tanh ops per step")
    p.add_argument("--sleep-ms", type=float, default=2.0, help="CPU stall per step")
    p.add_argument("--device", default="auto", help="auto (cuda if available), cuda, cpu")
    p.add_argument("--smoke", action="store_true", help="--scale 0.01 --steps 3 (CPU test)")
    p.add_argument("--warmup", type=int, default=2, help="steps left out of mean/median")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--out", default=os.environ.get("OUT"), help="write known_regimes_result.json here ($OUT)")
    args = p.parse_args(argv)
    if args.smoke:
        args.scale, args.steps = 0.01, 3

    torch.manual_seed(args.seed)
    if args.device == "auto":
        device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
    else:
        device = torch.device(args.device)
    side, numel = sizes(args.scale)
    a = torch.randn(side, side, device=device, dtype=torch.bfloat16)
    b = torch.randn(side, side, device=device, dtype=torch.bfloat16)
    c = torch.empty(side, side, device=device, dtype=torch.bfloat16)
    x = torch.randn(numel, device=device, dtype=torch.float32)
    t0_tiny = torch.randn(32, device=device)
    w = torch.nn.Parameter(torch.zeros(32, device=device))
    opt = torch.optim.SGD([w], lr=0.01)
    print(
        f"known_regimes: matmul {side}^3 bf16, pointwise {numel} fp32 ({numel * 4 / 2**20:.0f} MiB), "
        f"{args.tiny_ops} tiny ops, sleep {args.sleep_ms} ms, device={device}",
        flush=True,
    )

    step_ms: list[float] = []
    for step in range(args.steps):
        t0 = time.perf_counter()
        torch.mm(a, b, out=c)  # expect: compute
        y = x * 1.5  # expect: memory
        y = y + 0.25  # expect: memory
        y = torch.abs(y)  # expect: memory
        y = y.sqrt()  # expect: memory
        first = y[0].item()  # expect: overhead
        t = t0_tiny
        for _ in range(args.tiny_ops):
            t = torch.tanh(t)  # expect: overhead
        time.sleep(args.sleep_ms / 1e3)  # expect: overhead
        loss = (w * t).sum()  # expect: overhead
        loss.backward()  # expect: overhead
        opt.step()  # expect: overhead
        opt.zero_grad()  # expect: overhead
        if device.type == "cuda":
            torch.cuda.synchronize(device)
        step_ms.append((time.perf_counter() - t0) * 1e3)
        print(f"step {step} dt_ms {step_ms[-1]:.2f} y0 {first:.3f}", flush=True)

    timed = step_ms[args.warmup :] if len(step_ms) > args.warmup else step_ms
    result = {
        "steps": len(step_ms),
        "warmup": len(step_ms) - len(timed),
        "mean_step_ms": round(statistics.fmean(timed), 4) if timed else None,
        "median_step_ms": round(statistics.median(timed), 4) if timed else None,
        "step_ms": [round(v, 4) for v in step_ms],
        "script": "known_regimes",
        "device": str(device),
        "matmul_side": side,
        "pointwise_numel": numel,
        "tiny_ops": args.tiny_ops,
    }
    print("RESULT " + json.dumps(result), flush=True)
    if args.out:
        os.makedirs(args.out, exist_ok=True)
        with open(os.path.join(args.out, "known_regimes_result.json"), "w") as f:
            json.dump(result, f, indent=1)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
