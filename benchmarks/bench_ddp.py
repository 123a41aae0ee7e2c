"""brrrtui's slowdown of a torchrun job: plain `torchrun` runs and `brrrtui torchrun` runs, alternated.

    python -m benchmarks.bench_ddp --nproc 2 --pairs 2 -- --steps 500              # 2 GPUs: GPT-2 small DDP
    python -m benchmarks.bench_ddp --nproc 2 --pairs 2 -- --fsdp --steps 500       # FSDP2
    python -m benchmarks.bench_ddp --nproc 2 --pairs 1 --smoke                     # CPU, gloo: a tiny GPT

Each pair runs `python -m torch.distributed.run --nproc_per_node=N examples/train_gpt_ddp.py ARGS` (A, the
baseline, in the same call) and then the same under `python -m brrrtui record -o FILE torchrun ...` (B), so
drift hits both alike. Rank 0's `RESULT` line gives the mean and median step time after its warm-up; the
slowdown is B / A of the mean (windows included). From the recording: windows per rank, and whether every
rank's step windows cover the same steps. Prints a markdown table and writes bench_ddp.json to --out
(default $OUT, else ./bench_out).
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from typing import Any

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SCRIPT = os.path.join(ROOT, "examples", "train_gpt_ddp.py")
SMOKE = ["--layers", "2", "--seq", "64", "--batch", "2", "--vocab", "4096", "--heads", "4", "--dim", "128",
         "--steps", "200"]  # fmt: skip


def result_of(output: str) -> dict[str, Any] | None:
    lines = [line for line in output.splitlines() if line.startswith("RESULT ")]
    return json.loads(lines[-1][len("RESULT ") :]) if lines else None


def run(cmd: list[str], env: dict[str, str]) -> tuple[dict[str, Any] | None, float, str]:
    t0 = time.perf_counter()
    proc = subprocess.run(cmd, env=env, capture_output=True, text=True, cwd=ROOT)
    wall = time.perf_counter() - t0
    if proc.returncode != 0:
        sys.exit(f"bench_ddp: {' '.join(cmd)} failed ({proc.returncode}):\n{proc.stderr[-2000:]}")
    return result_of(proc.stdout), wall, proc.stderr


def aligned(run_file: str) -> tuple[list[int], bool]:
    from brrrtui.recording.load import load_trace
    from brrrtui.session import compare_rank_set

    got = compare_rank_set(load_trace(run_file))
    if got is None:
        return [], False
    comparison = got[0]
    return [r.windows for r in comparison.ranks], comparison.unaligned_windows == 0


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--nproc", type=int, default=2)
    p.add_argument("--pairs", type=int, default=2)
    p.add_argument("--smoke", action="store_true", help="a tiny GPT on the CPU (gloo)")
    p.add_argument("--out", default=os.environ.get("OUT") or os.path.join(ROOT, "bench_out"))
    p.add_argument("script_args", nargs="*", help="after --: arguments for examples/train_gpt_ddp.py")
    ns = p.parse_args()
    args = (SMOKE if ns.smoke else []) + ns.script_args
    os.makedirs(ns.out, exist_ok=True)
    env = dict(os.environ, PYTHONPATH=ROOT + os.pathsep + os.environ.get("PYTHONPATH", ""))
    launch = ["-m", "torch.distributed.run", f"--nproc_per_node={ns.nproc}", SCRIPT, *args]
    rows = []
    for i in range(ns.pairs):
        plain, plain_wall, _ = run([sys.executable, *launch], env)
        rec = os.path.join(ns.out, f"ddp_{i}.brrr")
        traced, traced_wall, _ = run([sys.executable, "-m", "brrrtui", "record", "-o", rec, *launch], env)
        windows, same_steps = aligned(rec)
        rows.append({
            "pair": i, "plain_mean_ms": plain and plain["mean_step_ms"], "brrrtui_mean_ms": traced and traced["mean_step_ms"],
            "plain_median_ms": plain and plain["median_step_ms"], "brrrtui_median_ms": traced and traced["median_step_ms"],
            "slowdown": traced["mean_step_ms"] / plain["mean_step_ms"] if plain and traced else None,
            "wall_ratio": traced_wall / plain_wall, "windows_per_rank": windows, "windows_on_same_steps": same_steps,
        })  # fmt: skip
    print(
        "| pair | mean step plain → brrrtui | median step plain → brrrtui | slowdown | wall ratio | windows per rank | same steps |"
    )
    print("|---|---:|---:|---:|---:|---|---|")
    for r in rows:
        print(f"| {r['pair']} | {r['plain_mean_ms']:.2f} → {r['brrrtui_mean_ms']:.2f} ms | {r['plain_median_ms']:.2f} → "
              f"{r['brrrtui_median_ms']:.2f} ms | {r['slowdown']:.3f} | {r['wall_ratio']:.3f} | {r['windows_per_rank']} | "
              f"{r['windows_on_same_steps']} |")  # fmt: skip
    with open(os.path.join(ns.out, "bench_ddp.json"), "w") as f:
        json.dump({"command": sys.argv, "nproc": ns.nproc, "script_args": args, "pairs": rows}, f, indent=1)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
