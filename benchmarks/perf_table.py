"""The table of docs/performance.md, made from the benchmarks' own output files.

Two kinds of input:

- `bench_stream.py`'s JSON (`--out DIR` writes DIR/bench_stream.json): each subject run plain and under
  brrrtui in the same call, round after round. A row per (subject, variant): the mean step of every run of that
  variant against the plain run of the same call and round, as the median and the range over all the runs given.
  The commit is read from the file name (`..._<commit>.json`, as validation/results/ names them);
  `FILE#cupti,stream` takes only those variants from FILE (an older call kept for the variants it measured).
- `bench_report_pairs.py`'s text output (a `$ python -m benchmarks.bench_report_pairs REC ...` line, then its
  `REC: SIZE MB; today COMMIT, ...` and `today wall ... (medians; walls W1 W2 ...)` lines): `report --json`'s
  wall time on a recording, median and range of the repeated runs. The last block for each recording counts.

    python -m benchmarks.perf_table validation/results/bench_stream_*.json validation/results/scale_cpu_*.txt
    python -m benchmarks.perf_table ... --write docs/performance.md   # replaces the table between its markers
"""

from __future__ import annotations

import argparse
import json
import os
import re
import statistics
from collections import defaultdict
from typing import Any

START, END = "<!-- perf-table:start -->", "<!-- perf-table:end -->"
SUBJECTS = {"gpt": "GPT-2 small (examples/train_gpt.py, B=16, T=1024, bf16)", "tiny": "tiny-op loop (benchmarks/tiny_ops.py)"}
VARIANTS = {
    "cupti": "CUPTI kernel activity alone (the floor of any kernel stream)",
    "windows": "brrrtui, default capture",
    "stream": "brrrtui `--stream`",
}


def commit_of(path: str) -> str:
    m = re.search(r"_([0-9a-f]{7,40})\.(json|txt)$", os.path.basename(path))
    return m.group(1) if m else "?"


def spread(values: list[float], fmt: str) -> str:
    """median (min–max, n runs)"""
    med = statistics.median(values)
    if len(values) == 1:
        return f"{fmt.format(med)} (1 run)"
    return f"{fmt.format(med)} ({fmt.format(min(values))}–{fmt.format(max(values))}, {len(values)} runs)"


def steps_of(argv: list[str], subject: str) -> int | None:
    flag = f"--{subject}-steps"
    return int(argv[argv.index(flag) + 1]) if flag in argv else None


def stream_rows(specs: list[str]) -> list[list[str]]:
    ratios: dict[tuple[str, str], list[float]] = defaultdict(list)
    stalls: dict[tuple[str, str], list[float]] = defaultdict(list)
    plain: dict[str, list[float]] = defaultdict(list)
    steps: dict[tuple[str, str], set[int]] = defaultdict(set)
    commits: dict[tuple[str, str], set[str]] = defaultdict(set)
    for spec in specs:
        path, _, only = spec.partition("#")
        keep = set(only.split(",")) if only else set(VARIANTS)
        with open(path) as f:
            doc: dict[str, Any] = json.load(f)
        argv = doc.get("argv") or []
        for subject, runs in doc["results"].items():
            base = {r["round"]: r["mean_step_ms"] for r in runs if r["variant"] == "plain" and r.get("rc") == 0}
            plain[subject] += list(base.values())
            for r in runs:
                key = (subject, r["variant"])
                if r["variant"] not in keep or r.get("rc") != 0 or r["round"] not in base:
                    continue
                ratios[key].append(r["mean_step_ms"] / base[r["round"]])
                stall = (r.get("recording") or {}).get("longest_stall_ms")
                if stall is not None:
                    stalls[key].append(stall)
                n = steps_of(argv, subject)
                if n:
                    steps[key].add(n)
                commits[key].add(commit_of(path))
    rows = []
    for subject in SUBJECTS:
        for variant in VARIANTS:
            key = (subject, variant)
            if not ratios[key]:
                continue
            length = " or ".join(f"{n:,}" for n in sorted(steps[key]))
            rows.append([
                "H200", f"{SUBJECTS[subject]}, {length} steps: {VARIANTS[variant]}",
                "mean step / plain's in the same call: " + spread(ratios[key], "×{:.3f}"),
                "longest stall " + spread(stalls[key], "{:.0f} ms") if stalls[key] else "",
                ", ".join(sorted(commits[key])),
            ])
    return rows


PAIRS = re.compile(r"^\$ python benchmarks/bench_report_pairs\.py (\S+)")
HEAD = re.compile(r"^(\S+): ([\d.]+) MB; today (\w+)")
WALL = re.compile(r"^today\s+wall [\d.]+ s\s+CPU [\d.]+ s\s+peak RSS (\d+) MiB\s+\(medians; walls ([\d. ]+)\)")
RECORDINGS = {
    "run1000000.v2.brrr": "1 M kernels, synthetic (`benchmarks/bench_analyze.py --kernels 1000000`)",
    "tiled1m.brrr": "1 M kernels, the H200 HF GPT-2 window tiled (`benchmarks/tiled_recording.py`)",
    "real_gpt2.brrr": "a real H200 GPT-2 recording: 528 k kernels, 276 windows",
    "fold.brrr": "a simulated hour of `--stream`, folded (`benchmarks/bench_stream_hour.py`)",
}


def report_rows(paths: list[str]) -> list[list[str]]:
    last: dict[str, list[str]] = {}
    for path in paths:
        rec = size = commit = None
        with open(path) as f:
            for line in f:
                if m := PAIRS.match(line):
                    rec, size, commit = os.path.basename(m.group(1)), None, None
                elif (m := HEAD.match(line)) and rec:
                    size, commit = m.group(2), m.group(3)
                elif (m := WALL.match(line)) and rec and size:
                    walls = [float(w) for w in m.group(2).split()]
                    last[rec] = [
                        "2-core CPU (shared)", f"`report --json` of {RECORDINGS.get(rec, rec)}, {size} MB",
                        "wall " + spread(walls, "{:.2f} s"), f"peak RSS {m.group(1)} MiB (median)", commit or "?",
                    ]
                    rec = None
    return [last[r] for r in RECORDINGS if r in last]


def table(stream_files: list[str], text_files: list[str]) -> str:
    head = "| machine | what | figure: median (range, runs) | also | commit |"
    rows = stream_rows(stream_files) + report_rows(text_files)
    return "\n".join([head, "|---|---|---|---|---|"] + ["| " + " | ".join(r) + " |" for r in rows])


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("files", nargs="+", help="bench_stream JSON files and bench_report_pairs text outputs")
    p.add_argument("--write", metavar="MD", help=f"replace the table between {START} and {END} in this file")
    args = p.parse_args(argv)
    json_files = [f for f in args.files if f.partition("#")[0].endswith(".json")]
    out = table(json_files, [f for f in args.files if f not in json_files])
    if not args.write:
        print(out)
        return 0
    with open(args.write) as f:
        text = f.read()
    if START not in text or END not in text:
        raise SystemExit(f"perf_table: error: {args.write} has no {START} ... {END} block")
    before, rest = text.split(START, 1)
    after = rest.split(END, 1)[1]
    with open(args.write, "w") as f:
        f.write(f"{before}{START}\n{out}\n{END}{after}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
