"""Kernel verdicts against Nsight Compute, summed over workloads: the table of docs/validation.md.

Reads the `ncu_compare.json` (its `ground_truth` member, which keeps every kernel's row) that `validation/ncu_verdicts.py --csv ... --report ... --out DIR` writes for
each workload and splits the scored GPU time (brrrtui's time on the kernel names ncu profiled) by ncu's verdict:

- clear: ncu calls the kernel compute-bound (tensor pipe >= 50 %) or memory-bound (memory throughput >= 60 %
  of peak and above SM throughput, or DRAM >= 2.4 TB/s); brrrtui agrees only with the same regime;
- either: ncu finds the kernel under-utilised (neither unit near its peak); brrrtui agrees when it shows the
  kernel below 60 % of its roof, whatever regime it names. This bucket is lenient by construction.

    python validation/ncu_summary.py NAME=DIR [NAME=DIR ...] [--json OUT.json]
"""

from __future__ import annotations

import argparse
import json
import os
from typing import Any

CLEAR = ("compute", "memory")


def summarise(ground_truth: dict[str, Any]) -> dict[str, Any]:
    """Shares of the report's GPU time, and agreement within each bucket, from one workload's rows."""
    rows = [r for r in ground_truth["kernels"] if r["agree"] is not None]
    total = sum(r["gpu_ns"] / r["gpu_share"] for r in rows if r["gpu_share"]) / max(len(rows), 1)

    def bucket(pick: tuple[str, ...]) -> dict[str, Any]:
        sel = [r for r in rows if r["ncu"] in pick]
        ns = sum(r["gpu_ns"] for r in sel)
        agree = sum(r["gpu_ns"] for r in sel if r["agree"])
        return {
            "kernel_names": len(sel),
            "share_of_gpu_time": ns / total if total else None,
            "agreement": agree / ns if ns else None,
        }

    return {
        "scored": bucket(("compute", "memory", "under")),
        "clear": bucket(CLEAR),
        "either": bucket(("under",)),
        "disagreeing": [
            {"kernel": r["short"], "share": r["gpu_share"], "brrrtui": r["brrrtui"], "ncu": r["ncu"]}
            for r in ground_truth["disagreeing"]
        ],
    }


def pct(v: float | None) -> str:
    return "—" if v is None else f"{100 * v:.1f} %"


def table(summaries: dict[str, dict[str, Any]]) -> str:
    out = [
        "| workload | scored (share of GPU time) | clear verdict: share | agreement on clear | "
        "either: share | agreement on either | agreement, all scored |",
        "|---|---:|---:|---:|---:|---:|---:|",
    ]
    for name, s in summaries.items():
        sc, cl, ei = s["scored"], s["clear"], s["either"]
        out.append(
            f"| {name} | {pct(sc['share_of_gpu_time'])} | {pct(cl['share_of_gpu_time'])} | {pct(cl['agreement'])} "
            f"| {pct(ei['share_of_gpu_time'])} | {pct(ei['agreement'])} | {pct(sc['agreement'])} |"
        )
    return "\n".join(out)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("workloads", nargs="+", metavar="NAME=DIR", help="a workload and its ncu_verdicts.py --out folder")
    p.add_argument("--json", help="also write the figures as JSON")
    args = p.parse_args(argv)
    summaries = {}
    for spec in args.workloads:
        name, _, folder = spec.partition("=")
        with open(os.path.join(folder, "ncu_compare.json")) as f:
            summaries[name] = summarise(json.load(f)["ground_truth"])
    print(table(summaries))
    if args.json:
        with open(args.json, "w") as f:
            json.dump(summaries, f, indent=1)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
