"""What `use_cache=False` changes in a Hugging Face GPT-2 training step, on a GPU (why no finding advises it:
docs/concepts.md, "Advice not given").

HF GPT-2 small as validation/workloads/hf_gpt2.py trains it (random init, batch 8 x 1024, bf16 autocast, fused
AdamW), no profiler: `use_cache=True` (the config's default) and `use_cache=False` on the model call, warmed up,
then rounds of N steps of each, interleaved, timed with time.perf_counter around N steps and a synchronize.
Then a few steps of each under torch.profiler (CUDA activity only) for the GPU time of the cache's
CatArrayBatchedCopy kernels.

    python validation/kv_cache_saving.py [--rounds 8] [--steps 20] [--json out.json]
"""

from __future__ import annotations

import argparse
import json
import statistics
import time

import torch
from transformers import GPT2Config, GPT2LMHeadModel


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--rounds", type=int, default=8)
    p.add_argument("--steps", type=int, default=20)
    p.add_argument("--batch", type=int, default=8)
    p.add_argument("--json")
    ns = p.parse_args()
    torch.manual_seed(0)
    model = GPT2LMHeadModel(GPT2Config()).cuda().train()
    ids = torch.randint(0, 50257, (ns.batch, 1024), device="cuda")
    opt = torch.optim.AdamW(model.parameters(), lr=3e-4, fused=True)

    def step(use_cache: bool) -> None:
        with torch.autocast("cuda", dtype=torch.bfloat16):
            loss = model(input_ids=ids, labels=ids, use_cache=use_cache).loss
        loss.backward()
        opt.step()
        opt.zero_grad(set_to_none=True)

    for use_cache in (True, False):
        for _ in range(10):
            step(use_cache)
    torch.cuda.synchronize()
    step_ms: dict[bool, list[float]] = {True: [], False: []}
    for _ in range(ns.rounds):
        for use_cache in (True, False):
            t0 = time.perf_counter()
            for _ in range(ns.steps):
                step(use_cache)
            torch.cuda.synchronize()
            step_ms[use_cache].append((time.perf_counter() - t0) / ns.steps * 1e3)
    cat_us: dict[bool, float] = {}
    kernel_us: dict[bool, dict[str, float]] = {}
    for use_cache in (True, False):
        with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CUDA]) as prof:
            for _ in range(3):
                step(use_cache)
            torch.cuda.synchronize()
        kernel_us[use_cache] = {
            e.key: e.device_time_total / 3 for e in prof.key_averages() if e.device_time_total
        }
        cat_us[use_cache] = sum(v for k, v in kernel_us[use_cache].items() if "CatArrayBatchedCopy" in k)
    names = set(kernel_us[True]) | set(kernel_us[False])
    delta = sorted(
        ((kernel_us[False].get(k, 0.0) - kernel_us[True].get(k, 0.0), k) for k in names),
        key=lambda x: -abs(x[0]),
    )
    for d, k in delta[:12]:  # what use_cache=False changes on the GPU, per step
        print(f"{d:+10.1f} us  {k[:110]}")
    result = {
        "torch": torch.__version__,
        "device": torch.cuda.get_device_name(),
        "rounds": ns.rounds,
        "steps_per_round": ns.steps,
        "step_ms": {str(k): v for k, v in step_ms.items()},
        "median_step_ms": {str(k): statistics.median(v) for k, v in step_ms.items()},
        "cat_kernel_us_per_step": {str(k): v for k, v in cat_us.items()},
        "kernel_us_per_step_change": [[k, d] for d, k in delta[:40]],  # use_cache=False minus True
    }
    saved = result["median_step_ms"]["True"] - result["median_step_ms"]["False"]
    print(f"use_cache=True {result['median_step_ms']['True']:.3f} ms, use_cache=False "
          f"{result['median_step_ms']['False']:.3f} ms a step: saved {saved:.3f} ms; CatArrayBatchedCopy "
          f"{cat_us[True]:.1f} -> {cat_us[False]:.1f} us a step")  # fmt: skip
    if ns.json:
        with open(ns.json, "w") as f:
            json.dump(result | {"saved_ms": saved}, f, indent=1)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
