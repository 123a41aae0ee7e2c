"""brrrtui's exposed communication of a DDP run against a hand measurement: the same run without its gradient
all-reduce (DDP's `no_sync()`).

    python validation/ddp_exposed.py --nproc 2 -- --steps 300          # 2 GPUs: GPT-2 small DDP (NCCL)
    python validation/ddp_exposed.py --nproc 2 --smoke                 # CPU, gloo: runs end to end

Three runs of examples/train_gpt_ddp.py under torchrun: plain (A), plain with `--no-sync` (B), and A under
`brrrtui record` (C). Measured exposed all-reduce per step = mean step of A - mean step of B (the all-reduce
time the backward did not hide, plus the wait for the slowest rank). brrrtui's figure: rank 0's
`exposed_comm_ns_per_step` in C's report (NCCL kernel time no other kernel overlaps; absent without NCCL
kernels, as on the CPU). Prints both and their ratio; writes ddp_exposed.json to --out ($OUT, else
./bench_out). Step times under brrrtui include its windows, so C's own mean step is printed as well.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SCRIPT = os.path.join(ROOT, "examples", "train_gpt_ddp.py")
SMOKE = ["--layers", "2", "--seq", "64", "--batch", "2", "--vocab", "4096", "--heads", "4", "--dim", "128",
         "--steps", "60"]  # fmt: skip


def result(cmd: list[str], env: dict[str, str]) -> dict:
    proc = subprocess.run(cmd, env=env, capture_output=True, text=True, cwd=ROOT)
    if proc.returncode != 0:
        sys.exit(f"ddp_exposed: {' '.join(cmd)} failed ({proc.returncode}):\n{proc.stderr[-2000:]}")
    lines = [line for line in proc.stdout.splitlines() if line.startswith("RESULT ")]
    return json.loads(lines[-1][len("RESULT ") :])


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--nproc", type=int, default=2)
    p.add_argument("--smoke", action="store_true", help="a tiny GPT on the CPU (gloo)")
    p.add_argument("--out", default=os.environ.get("OUT") or os.path.join(ROOT, "bench_out"))
    p.add_argument("script_args", nargs="*", help="after --: arguments for examples/train_gpt_ddp.py")
    ns = p.parse_args()
    args = (SMOKE if ns.smoke else []) + ns.script_args
    os.makedirs(ns.out, exist_ok=True)
    env = dict(os.environ, PYTHONPATH=ROOT + os.pathsep + os.environ.get("PYTHONPATH", ""))
    launch = ["-m", "torch.distributed.run", f"--nproc_per_node={ns.nproc}", SCRIPT, *args]
    plain = result([sys.executable, *launch], env)
    no_sync = result([sys.executable, *launch, "--no-sync"], env)
    rec = os.path.join(ns.out, "ddp_exposed.brrr")
    traced = result([sys.executable, "-m", "brrrtui", "record", "-o", rec, *launch], env)
    report = subprocess.run([sys.executable, "-m", "brrrtui", "report", "--json", rec], env=env, capture_output=True,
                            text=True, cwd=ROOT, check=True)  # fmt: skip
    ranks = json.loads(report.stdout)["ranks"]
    brrrtui_ns = ranks["ranks"][0]["exposed_comm_ns_per_step"]
    measured_ms = plain["mean_step_ms"] - no_sync["mean_step_ms"]
    doc = {
        "command": sys.argv, "script_args": args, "plain_mean_step_ms": plain["mean_step_ms"],
        "no_sync_mean_step_ms": no_sync["mean_step_ms"], "brrrtui_run_mean_step_ms": traced["mean_step_ms"],
        "measured_exposed_ms": measured_ms, "brrrtui_exposed_ms": None if brrrtui_ns is None else brrrtui_ns / 1e6,
        "brrrtui_comm_ms": [r["comm_ns_per_step"] and r["comm_ns_per_step"] / 1e6 for r in ranks["ranks"]],
    }  # fmt: skip
    with open(os.path.join(ns.out, "ddp_exposed.json"), "w") as f:
        json.dump(doc, f, indent=1)
    print(f"mean step: plain {plain['mean_step_ms']:.2f} ms, no_sync {no_sync['mean_step_ms']:.2f} ms, "
          f"under brrrtui {traced['mean_step_ms']:.2f} ms")  # fmt: skip
    if brrrtui_ns is None:
        print(
            f"exposed all-reduce measured {measured_ms:.2f} ms/step; brrrtui: none (no NCCL kernels recorded)"
        )
    else:
        print(f"exposed all-reduce measured {measured_ms:.2f} ms/step, brrrtui {brrrtui_ns / 1e6:.2f} ms/step "
              f"(ratio {brrrtui_ns / 1e6 / measured_ms:.2f})")  # fmt: skip
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
