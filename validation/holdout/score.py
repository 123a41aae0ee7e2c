"""Score brrrtui's kernel verdicts on the hold-out workloads against Nsight Compute.

    python validation/holdout/score.py                         # the committed data/: recordings reported now
    python validation/holdout/score.py RESULTS_DIR             # a device run: <name>.report.json, ncu_<name>/
    python validation/holdout/score.py --old-four validation/results/ncu_h200_inputs.tar.gz   # the four scored
                                                               # before these rules (or the folder it unpacks to)
    python validation/holdout/score.py --all ...               # every disagreeing kernel, not the top 8

--old-four: the H200 recordings under tests/fixtures reported by this checkout, against the Nsight Compute CSVs
of validation/results/ncu_h200_inputs.tar.gz (the archive itself, or a folder it was unpacked into: its
ncu_h200/ folder, the files gzipped or not). HF BERT's Nsight Compute run has no recording kept (tests/fixtures/h200_bert.brrr.gz is an fp32 BERT of
other kernels), so three of the four are scored.

Per workload, weighted by brrrtui's GPU time over the kernels matched to an ncu row:
- clear: kernels where ncu gives a clear verdict: tensor pipe >= 50 % (compute), memory >= 60 % and above SM or
  DRAM >= 2.4 TB/s (memory) — validation/ncu_verdicts.py's ground-truth rule — and, here, SM >= 60 % with the
  tensor pipe below 50 % (compute on the SIMT units: batch-norm statistics, pooling, fp32 GEMMs);
- agreement: the share of the clear kernels' time where brrrtui's verdict is the same;
- either: the rest of the scored time (both units under 60 %), where either verdict is acceptable;
- on a line: the share of the report's kernel time (every kernel of the analysed windows) that its lines hold.
Prints a Markdown table and writes holdout_scores.json beside the inputs.
"""

from __future__ import annotations

import gzip
import json
import os
import subprocess
import sys
import tarfile
from typing import Any

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
import ncu_verdicts as nv  # noqa: E402

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
DATA = os.path.join(HERE, "data")

SM_BOUND_PCT = 60.0
CSV_SEPARATOR = "\n\x00\n"  # between two ncu CSVs of one workload (a run, then a run of every call of a few names)

# (workload, recording under tests/fixtures, ncu CSVs in ncu_h200/): the workloads docs/validation.md scores
OLD_FOUR = (
    ("gpt2_eager", "h200_gpt_small.brrr.gz", ("ncu_gpt2_eager_raw.csv", "ncu_gpt2_eager_named_raw.csv")),
    ("hf_gpt2", "h200_hf_gpt2_vocab50257.brrr.gz", ("ncu_hf_gpt2_raw.csv", "ncu_hf_gpt2_named_raw.csv")),
    ("resnet50", "h200_resnet50_modules.brrr.gz", ("ncu_resnet50_raw.csv",)),
)


def clear_verdict(row: dict[str, Any]) -> str | None:
    """compute | memory for a clear kernel, None for the either bucket."""
    if row["ncu"] in ("compute", "memory"):
        return str(row["ncu"])
    if row["ncu"] == "under" and row.get("sm_pct") is not None and row["sm_pct"] >= SM_BOUND_PCT:
        return "compute"
    return None


def score(report: dict[str, Any], csv_text: str, top: int | None = 8) -> dict[str, Any]:
    kernels: list[nv.NcuKernel] = []
    for part in csv_text.split(CSV_SEPARATOR):  # a later CSV's names replace their launches in the earlier
        extra = nv.parse_ncu_csv(part)
        sigs = {nv.signature(k.name) for k in extra}
        kernels = [k for k in kernels if nv.signature(k.name) not in sigs] + extra
    gt = nv.compare_ground_truth(kernels, report)
    rows = [r for r in gt["kernels"] if r["agree"] is not None]
    scored_ns = sum(r["gpu_ns"] for r in rows)
    clear = [(r, v) for r in rows if (v := clear_verdict(r)) is not None]
    clear_ns = sum(r["gpu_ns"] for r, _ in clear)
    agree_ns = sum(r["gpu_ns"] for r, v in clear if r["brrrtui"] == v)
    kernel_ns = sum(k.get("gpu_ns") or 0 for k in report.get("kernels", []))
    line_ns = sum(line.get("gpu_ns") or 0 for line in report.get("lines", []))
    wrong = sorted(((r, v) for r, v in clear if r["brrrtui"] != v), key=lambda rv: -rv[0]["gpu_ns"])
    return {
        "kernels_in_report": len(report.get("kernels", [])),
        "kernels_scored": len(rows),
        "scored_share_of_report_gpu": gt["scored_gpu_share"],
        "clear_share": clear_ns / scored_ns if scored_ns else None,
        "clear_agreement": agree_ns / clear_ns if clear_ns else None,
        "either_share": 1 - clear_ns / scored_ns if scored_ns else None,
        "either_agreement_lenient": gt["agreement"],
        "on_a_line_share": line_ns / kernel_ns if kernel_ns else None,
        "phase": report.get("phase"),
        "disagreeing": [
            {"short": r["short"], "gpu_share": r["gpu_share"], "brrrtui": r["brrrtui"], "ncu": v,
             "sm_pct": r["sm_pct"], "mem_pct": r["mem_pct"], "tensor_pct": r["tensor_pct"], "roof": r["roof"]}
            for r, v in wrong[:top]
        ],
    }


def pct(v: float | None) -> str:
    return "—" if v is None else f"{100 * v:.1f} %"


def report_now(recording: str) -> dict[str, Any]:
    """`brrrtui report --json` of a recording with the brrrtui this checkout holds."""
    run = subprocess.run([sys.executable, "-m", "brrrtui", "report", "--json", "--top", "1000", recording],
                         capture_output=True, text=True, check=True, cwd=ROOT)
    return dict(json.loads(run.stdout))


def inputs(folder: str | None) -> dict[str, tuple[dict[str, Any], str | None]]:
    """Each workload's report and ncu CSV text: from a device run's folder, or the committed data/."""
    out: dict[str, tuple[dict[str, Any], str | None]] = {}
    if folder is None:
        for name in sorted(f.removesuffix(".brrr.gz") for f in os.listdir(DATA) if f.endswith(".brrr.gz")):
            with gzip.open(os.path.join(DATA, f"{name}.ncu.csv.gz"), "rt") as f:
                out[name] = (report_now(os.path.join(DATA, f"{name}.brrr.gz")), f.read())
        return out
    for name in sorted(f.removesuffix(".report.json") for f in os.listdir(folder) if f.endswith(".report.json")):
        with open(os.path.join(folder, f"{name}.report.json")) as f:
            report = json.load(f)
        csv = os.path.join(folder, f"ncu_{name}", "ncu_raw.csv")
        text = None
        if os.path.exists(csv):
            with open(csv) as f:
                text = f.read()
        out[name] = (report, text)
    return out


def _read(path: str) -> str | None:
    for p, opener in ((path, open), (path + ".gz", gzip.open)):
        if os.path.exists(p):
            with opener(p, "rt") as f:
                return str(f.read())
    return None


def _read_tar(archive: str, name: str) -> str | None:
    with tarfile.open(archive) as tar:
        for member in (f"ncu_h200/{name}.gz", f"ncu_h200/{name}"):
            try:
                f = tar.extractfile(member)
            except KeyError:
                continue
            if f is not None:
                data = f.read()
                return (gzip.decompress(data) if member.endswith(".gz") else data).decode()
    return None


def _read_csv(source: str, folder: str, name: str) -> str | None:
    return _read_tar(source, name) if os.path.isfile(source) else _read(os.path.join(folder, name))


def old_four(source: str) -> dict[str, tuple[dict[str, Any], str | None]]:
    """The old four's reports (their recordings reported now) and ncu CSV texts, from the archive `source` or
    the folder it was unpacked into."""
    out: dict[str, tuple[dict[str, Any], str | None]] = {}
    folder = os.path.join(source, "ncu_h200") if os.path.isdir(os.path.join(source, "ncu_h200")) else source
    for name, recording, csvs in OLD_FOUR:
        texts = [t for c in csvs if (t := _read_csv(source, folder, c)) is not None]
        report = report_now(os.path.join(ROOT, "tests", "fixtures", recording))
        out[name] = (report, CSV_SEPARATOR.join(texts) if texts else None)
    return out


def main() -> int:
    args = sys.argv[1:]
    top: int | None = 8
    if "--all" in args:
        args.remove("--all")
        top = None
    old = "--old-four" in args
    if old:
        args.remove("--old-four")
    folder = args[0] if args else None
    if old and folder is None:
        print("score.py: error: --old-four needs validation/results/ncu_h200_inputs.tar.gz (or the folder it "
              "was unpacked into)", file=sys.stderr)
        return 2
    out: dict[str, Any] = {}
    for name, (report, csv_text) in (old_four(folder) if old and folder else inputs(folder)).items():
        out[name] = score(report, csv_text, top) if csv_text is not None else {"missing": "no ncu_raw.csv"}
    print("| workload | GPU time scored by ncu | clear-verdict share | agreement on clear | either bucket "
          "| GPU time on a line | phase |")
    print("|---|---:|---:|---:|---:|---:|---|")
    for name, s in out.items():
        if "missing" in s:
            print(f"| {name} | {s['missing']} | | | | | |")
            continue
        print(f"| {name} | {pct(s['scored_share_of_report_gpu'])} | {pct(s['clear_share'])} | {pct(s['clear_agreement'])} | {pct(s['either_share'])} "
              f"| {pct(s['on_a_line_share'])} | {s['phase']} |")
    for name, s in out.items():
        for d in s.get("disagreeing", []):
            print(f"  {name}: {d['short']} {pct(d['gpu_share'])} brrrtui={d['brrrtui']} ncu={d['ncu']} "
                  f"SM={d['sm_pct']} Mem={d['mem_pct']} Tensor={d['tensor_pct']} roof={d['roof']}")
    if folder is not None and not old:
        with open(os.path.join(folder, "holdout_scores.json"), "w") as f:
            json.dump(out, f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
