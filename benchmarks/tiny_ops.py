"""An overhead-bound training loop of tiny ops (a subject for bench_stream.py): a narrow, deep MLP on a small
batch with Adam (foreach off), so each step launches a few hundred microsecond kernels and the GPU mostly
waits on Python. Prints `RESULT {"mean_step_ms": ...}` like examples/train_gpt.py."""

import argparse
import json
import statistics
import time

import torch

p = argparse.ArgumentParser()
p.add_argument("--steps", type=int, default=2000)
p.add_argument("--warmup", type=int, default=5)
p.add_argument("--dim", type=int, default=64)
p.add_argument("--layers", type=int, default=8)
args = p.parse_args()
dev = "cuda" if torch.cuda.is_available() else "cpu"
model = torch.nn.Sequential(*[torch.nn.Sequential(torch.nn.Linear(args.dim, args.dim), torch.nn.GELU())
                              for _ in range(args.layers)]).to(dev)  # fmt: skip
opt = torch.optim.Adam(model.parameters(), lr=1e-3, foreach=False)
x = torch.randn(32, args.dim, device=dev)
times = []
for _step in range(args.steps):
    t0 = time.perf_counter()
    loss = model(x).square().mean()
    loss.backward()
    opt.step()
    opt.zero_grad(set_to_none=True)
    if dev == "cuda":
        torch.cuda.synchronize()
    times.append((time.perf_counter() - t0) * 1e3)
timed = times[args.warmup :] or times
print("RESULT " + json.dumps({"steps": args.steps, "mean_step_ms": round(statistics.fmean(timed), 4),
                              "median_step_ms": round(statistics.median(timed), 4), "max_step_ms": round(max(timed), 1),
                              "max_step_at": times.index(max(timed))}), flush=True)  # fmt: skip
