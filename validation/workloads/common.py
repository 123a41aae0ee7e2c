"""The training loop every workload shares: forward, loss, backward, optimizer step, a logged loss every 10 steps.

Step times are taken on the host right after `optimizer.step()` (no extra synchronisation, as brrrtui's own
step hook sees them), and written as JSON to `--out` (default `$OUT`, else nothing) for comparison with a
recording of the same script. `median_step_ms` is over the second half of the steps, or over the steps after
`--warmup` when given. `--sync-steps` (off by default; validation/savings.py's A/B timing) synchronises with
the GPU at the end of every step, so each step's time is its whole cost, GPU included.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import time
from collections.abc import Callable

import torch


def parser(doc: str, steps: int, batch: int) -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(description=doc)
    p.add_argument("--steps", type=int, default=steps)
    p.add_argument("--batch", type=int, default=batch)
    p.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    p.add_argument("--out", default=os.environ.get("OUT"), help="folder for <name>_steps.json")
    p.add_argument("--name", default=None, help="file name stem of the step-time JSON")
    p.add_argument("--warmup", type=int, default=None, help="steps left out of the median (default: half)")
    p.add_argument("--sync-steps", action="store_true", help="synchronise with the GPU at each step's end")
    return p


def train(name: str, args: argparse.Namespace, model: torch.nn.Module,
          loss_of: Callable[[], torch.Tensor], optimizer: torch.optim.Optimizer) -> None:
    times = [time.perf_counter()]
    for step in range(args.steps):
        loss = loss_of()
        loss.backward()
        optimizer.step()
        optimizer.zero_grad(set_to_none=True)
        if args.sync_steps and args.device.startswith("cuda"):
            torch.cuda.synchronize()
        times.append(time.perf_counter())
        if step % 10 == 0:
            print(f"step {step} loss {loss.item():.4f}", flush=True)
    if args.device.startswith("cuda"):
        torch.cuda.synchronize()
    steps_ms = [1e3 * (b - a) for a, b in zip(times[:-1], times[1:], strict=True)]
    warmup = len(steps_ms) // 2 if args.warmup is None else min(args.warmup, len(steps_ms) - 1)
    steady = steps_ms[warmup:]
    result = {"workload": args.name or name, "steps": args.steps, "batch": args.batch, "warmup": warmup,
              "sync_steps": args.sync_steps, "median_step_ms": statistics.median(steady),
              "mean_step_ms": statistics.fmean(steady), "steps_ms": [round(t, 3) for t in steps_ms]}
    print("RESULT", json.dumps({k: v for k, v in result.items() if k != "steps_ms"}), flush=True)
    if args.out:
        with open(os.path.join(args.out, f"{args.name or name}_steps.json"), "w") as f:
            json.dump(result, f)
