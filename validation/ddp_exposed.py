"""brrrtui's exposed communication of a DDP run against a hand measurement: the same run without its gradient
all-reduce (DDP's `no_sync()`).

    python validation/ddp_exposed.py --nproc 2 -- --steps 300          # 2 GPUs: GPT-2 small DDP (NCCL)
    python validation/ddp_exposed.py --nproc 2 --accum 4 -- --steps 300   # and the cure: 4 micro-batches/step
    python validation/ddp_exposed.py --nproc 2 --smoke                 # CPU, gloo: runs end to end

Three runs of examples/train_gpt_ddp.py under torchrun: plain (A), plain with `--no-sync` (B), and A under
`brrrtui record` (C). Measured exposed all-reduce per step = mean step of A - mean step of B (the all-reduce
time the backward did not hide, plus the wait for the slowest rank). brrrtui's figures, from C's report:

- the ranks table: every rank's `exposed_comm_ns_per_step` (NCCL kernel time no other kernel overlaps), and
  the least of them (the transfer itself, not the wait for a later rank);
- rank 0's breakdown: its communication component per step (NCCL time with no compute or memory kernel
  beside it), the hidden part, and the all-reduce's message size and bus bandwidth; the exposed-communication
  finding, if any.

With `--accum K`, a fourth run (plain, `--accum K`: K micro-batches per optimizer step, the first K-1 under
`no_sync()`, the cure the finding names) gives the time per micro-batch, against the plain step and against
what the measured exposed time predicts: plain step - exposed x (1 - 1/K).

Without NCCL kernels (the CPU, gloo) the GPU figures are absent and gloo's all-reduce time is printed
instead. Prints the measured and brrrtui's figures and their ratios; writes ddp_exposed.json to --out ($OUT,
else ./bench_out). Step times under brrrtui include its windows, so C's own mean step is printed as well.
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
    p.add_argument("--accum", type=int, default=0, help="also run the cure: K micro-batches per step")
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
    full = json.loads(report.stdout)
    ranks = full["ranks"]
    brrrtui_ns = ranks["ranks"][0]["exposed_comm_ns_per_step"]
    measured_ms = plain["mean_step_ms"] - no_sync["mean_step_ms"]
    doc = {
        "command": sys.argv, "script_args": args, "plain_mean_step_ms": plain["mean_step_ms"],
        "no_sync_mean_step_ms": no_sync["mean_step_ms"], "brrrtui_run_mean_step_ms": traced["mean_step_ms"],
        "measured_exposed_ms": measured_ms, "brrrtui_exposed_ms": None if brrrtui_ns is None else brrrtui_ns / 1e6,
        "brrrtui_exposed_ms_by_rank": [ms(r["exposed_comm_ns_per_step"]) for r in ranks["ranks"]],
        "brrrtui_comm_ms": [ms(r["comm_ns_per_step"]) for r in ranks["ranks"]],
        "rank0": rank0_figures(full),
    }  # fmt: skip
    if ns.accum > 1:
        cured = result([sys.executable, *launch, "--accum", str(ns.accum)], env)
        per_micro = cured["mean_step_ms"] / ns.accum
        predicted = plain["mean_step_ms"] - measured_ms * (1 - 1 / ns.accum)
        doc["accum"] = {"k": ns.accum, "mean_step_ms": cured["mean_step_ms"], "per_micro_batch_ms": per_micro,
                        "predicted_per_micro_batch_ms": predicted}  # fmt: skip
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
        least = min(v for v in doc["brrrtui_exposed_ms_by_rank"] if v is not None)
        print(
            f"  per rank {doc['brrrtui_exposed_ms_by_rank']} ms/step; the least {least:.2f} (ratio "
            f"{least / measured_ms:.2f})"
        )
    r0 = doc["rank0"]
    if r0["exposed_ms"] is not None:
        print(
            f"rank 0's breakdown: communication (exposed) {r0['exposed_ms']:.2f} ms/step (ratio "
            f"{r0['exposed_ms'] / measured_ms:.2f}), hidden under compute {r0['hidden_ms']:.2f} ms/step"
        )
    for c in r0["collectives"]:
        print(
            f"  {c['kind']} ({c['side']}): {c['time_ms']:.2f} ms/step, {c['bytes_per_call']} bytes/call, "
            f"busbw {c['busbw_gb_s']} GB/s"
        )
    if r0["finding"]:
        print(f"finding: {r0['finding']}")
    if "accum" in doc:
        a = doc["accum"]
        print(f"the cure, {a['k']} micro-batches per step: {a['per_micro_batch_ms']:.2f} ms per micro-batch, plain "
              f"{plain['mean_step_ms']:.2f}, predicted from the measured exposed time "
              f"{a['predicted_per_micro_batch_ms']:.2f}")  # fmt: skip
    return 0


def ms(ns: float | None) -> float | None:
    return None if ns is None else ns / 1e6


def rank0_figures(doc: dict) -> dict:
    """Rank 0's communication in its own analysis (report --json schema 4): per step where steps are known."""
    comm = doc.get("communication")
    if not comm:
        return {"exposed_ms": None, "hidden_ms": None, "collectives": [], "finding": None}
    per = comm["steps"] or 1
    gpu = comm["kernel_ns"] > 0
    finding = next((f["message"] for f in doc["findings"] if f["kind"] == "communication"), None)
    return {
        "steps": comm["steps"],
        "exposed_ms": comm["exposed_ns"] / per / 1e6 if gpu else None,
        "hidden_ms": comm["hidden_ns"] / per / 1e6 if gpu else None,
        "collectives": [
            {
                "kind": c["kind"],
                "side": c["side"],
                "time_ms": c["time_ns"] / per / 1e6,
                "exposed_ms": ms(c["exposed_ns"] and c["exposed_ns"] / per),
                "bytes_per_call": c["bytes"] / c["sized_calls"] if c["bytes"] is not None else None,
                "busbw_gb_s": None
                if c["busbw_bytes_per_s"] is None
                else round(c["busbw_bytes_per_s"] / 1e9, 3),
            }
            for c in comm["collectives"]
        ],
        "finding": finding,
    }


if __name__ == "__main__":
    raise SystemExit(main())
