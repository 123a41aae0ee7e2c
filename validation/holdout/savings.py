"""Predicted vs measured savings on the hold-out workloads: each top finding's advised fix (validation/holdout/
fixes.py) timed against the unfixed workload, beside the saving brrrtui predicted for it.

    python validation/holdout/savings.py --reports DIR --out $OUT          # GPU: all five workloads
    python validation/holdout/savings.py --reports DIR --measured a/runs.json b/runs.json --out D   # no runs
    python validation/holdout/savings.py --smoke --out /tmp/s llama_decoder lstm_lm    # CPU: tiny sizes

Predictions: the workload's `brrrtui report --json` (DIR/<workload>.report.json; made from the committed
recordings validation/holdout/data/<workload>.brrr.gz when DIR has none). Its three largest findings are the
table's rows; a row's fix is the one in FIXES whose kinds and advice match it (`overhead` and
`small_kernels` share CUDA graphs, so one measurement answers both).

Timing, as validation/savings.py: separate processes on one GPU, the same seed, every step ended by
torch.cuda.synchronize() (`--sync-steps`); a run's step time is the median over its steps after the warm-up
(the mean, for `slow_steps`: that finding's saving is the mean step's excess over the median). The unfixed run
and each fix run --repeats times, interleaved (A B C A B C ...); the saving of repeat i is unfixed_i - fixed_i,
and the table gives their median and range, every repeat counted. --prewarm first runs every compiled fix once,
all at once and untimed, so that the timed runs find Inductor's caches filled (compile time is not a saving).
--deadline stops starting runs after that many seconds; runs not made are listed as such.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import statistics
import subprocess
import sys
import time
from dataclasses import dataclass
from typing import Any

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
if ROOT not in sys.path:  # run as `python validation/holdout/savings.py`: the validation package beside it
    sys.path.insert(0, ROOT)
from validation.savings import timed_run  # noqa: E402

FIXES_PY = os.path.join(HERE, "fixes.py")


@dataclass(frozen=True)
class Fix:
    name: str  # fixes.py --fix NAME
    kinds: tuple[str, ...]  # finding kinds it answers
    advice: str = ""  # regex the finding's action must match (empty: any)
    compiled: bool = False


FIXES: dict[str, tuple[Fix, ...]] = {
    "llama_decoder": (
        Fix("compile_forward", ("fusion",), r"`forward`", True),
        Fix("compile_loss", ("fusion",), r"`loss_of`", True),
    ),
    "unet_diffusion": (
        Fix("graph_step", ("overhead", "small_kernels")),
        Fix("compile_forward", ("fusion",), r"`forward`", True),
    ),
    "lstm_lm": (
        Fix("tf32", ("no_tensor_cores",)),
        Fix("compile_forward", ("fusion",), r"`forward`", True),
        Fix("compile_loss", ("fusion",), r"`loss_of`", True),
        Fix("autocast_rnn", ("slow_gemm",), r"autocast"),
    ),
    "cnn_channels_last": (
        Fix("gc_freeze", ("slow_steps",)),
        Fix("compile_loss", ("fusion",), r"`loss_of`", True),
        Fix("pad_channels", ("slow_gemm",)),
        Fix("cuda_graphs", ("overhead", "small_kernels"), "", True),
    ),
    "moe_layer": (
        Fix("compile_forward", ("fusion",), r"`forward`", True),
        Fix("static_experts", ("overhead", "small_kernels"), r"static size", True),
    ),  # last: its data-dependent shapes make its compiled runs the slowest
}
WARMUP = {"moe_layer": 20}  # its recording reached a steady step only from step 17
SMOKE_ARGS = {  # run.sh's SMOKE sizes
    "llama_decoder": "--seq 32 --dim 64 --layers 2 --heads 4 --vocab 100 --batch 2",
    "unet_diffusion": "--size 16 --ch 32 --batch 2",
    "lstm_lm": "--seq 16 --dim 32 --hidden 32 --vocab 100 --batch 2",
    "moe_layer": "--seq 16 --dim 32 --hidden 64 --vocab 100 --batch 2",
    "cnn_channels_last": "--size 32 --batch 2",
}
TOP = 3
WITHIN = 0.30


# --- predictions --------------------------------------------------------------------------------------------


def report_of(workload: str, reports: str | None) -> dict[str, Any]:
    if reports:
        path = os.path.join(reports, f"{workload}.report.json")
        if os.path.exists(path):
            with open(path) as f:
                return json.load(f)
    rec = os.path.join(HERE, "data", f"{workload}.brrr.gz")
    proc = subprocess.run([sys.executable, "-m", "brrrtui", "report", "--json", "--top", "1000", rec],
                          cwd=ROOT, capture_output=True, text=True, timeout=600, check=True)  # fmt: skip
    return dict(json.loads(proc.stdout))


def fix_for(workload: str, finding: dict[str, Any]) -> Fix | None:
    for fix in FIXES.get(workload, ()):
        if finding.get("kind") in fix.kinds and re.search(fix.advice, str(finding.get("action", ""))):
            return fix
    return None


def top_findings(report: dict[str, Any], n: int = TOP) -> list[dict[str, Any]]:
    found = [f for f in report.get("findings", []) if f.get("saving_ns") is not None]
    return sorted(found, key=lambda f: -float(f["saving_ns"]))[:n]


# --- measurements -------------------------------------------------------------------------------------------


def child_env() -> dict[str, str]:
    env = dict(os.environ)
    env.pop("OUT", None)  # the scripts would write into the caller's $OUT
    env["PYTHONUNBUFFERED"] = "1"
    return env


def command(args: argparse.Namespace, workload: str, fix: str | None, name: str, steps: int) -> list[str]:
    cmd = [sys.executable, FIXES_PY, workload, *(["--fix", fix] if fix else [])]
    cmd += ["--steps", str(steps), "--warmup", str(warmup_of(args, workload)), "--sync-steps"]
    cmd += ["--out", args.logs, "--name", name]
    return cmd + (SMOKE_ARGS[workload].split() if args.smoke else [])


def warmup_of(args: argparse.Namespace, workload: str) -> int:
    return WARMUP.get(workload, args.warmup) if not args.smoke else args.warmup


def run_once(args: argparse.Namespace, workload: str, fix: str | None, repeat: int) -> dict[str, Any]:
    name = f"{workload}__{fix or 'unfixed'}__{repeat}"
    warm = warmup_of(args, workload)
    cmd = command(args, workload, fix, name, warm + args.steps)
    rc, log, wall = timed_run(cmd, args.timeout, child_env())
    with open(os.path.join(args.logs, f"{name}.log"), "w") as f:
        f.write(" ".join(cmd) + "\n" + log)
    out: dict[str, Any] = {
        "workload": workload,
        "fix": fix,
        "repeat": repeat,
        "rc": rc,
        "wall_s": round(wall, 1),
    }
    path = os.path.join(args.logs, f"{name}_steps.json")
    if rc == 0 and os.path.exists(path):
        with open(path) as f:
            steps = [float(x) for x in json.load(f)["steps_ms"]]
        timed = steps[warm:]
        out.update(steps=len(steps), median_ms=statistics.median(timed), mean_ms=statistics.fmean(timed),
                   first_step_ms=steps[0])  # fmt: skip
    print(
        f"  {name}: rc={rc} {wall:.0f} s median {out.get('median_ms')} mean {out.get('mean_ms')}", flush=True
    )
    return out


def prewarm(args: argparse.Namespace, workloads: list[str]) -> list[dict[str, Any]]:
    """Every compiled fix, a few steps each, all at once: fills Inductor's caches for the timed runs."""
    procs = []
    env = child_env()  # the timed runs' settings: Inductor's cache keys include its config
    t0 = time.perf_counter()
    for w in workloads:
        for fix in FIXES[w]:
            if fix.compiled:
                name = f"{w}__{fix.name}__prewarm"
                log = open(os.path.join(args.logs, f"{name}.log"), "w")  # noqa: SIM115 (closed below)
                cmd = command(args, w, fix.name, name, 4)
                procs.append(
                    (w, fix.name, subprocess.Popen(cmd, cwd=ROOT, stdout=log, stderr=log, env=env), log)
                )
    out = []
    for w, fix_name, proc, log in procs:
        left = max(1.0, args.prewarm_timeout - (time.perf_counter() - t0))
        try:
            rc = proc.wait(timeout=left)
        except subprocess.TimeoutExpired:
            proc.kill()
            rc = proc.wait()
        log.close()
        out.append({"workload": w, "fix": fix_name, "rc": rc})
    print(f"prewarm: {len(procs)} runs in {time.perf_counter() - t0:.0f} s: {[(o['fix'], o['rc']) for o in out]}",
          flush=True)  # fmt: skip
    return out


def measure(args: argparse.Namespace, workloads: list[str]) -> dict[str, Any]:
    start = time.perf_counter()
    doc: dict[str, Any] = {"steps": args.steps, "warmup": {w: warmup_of(args, w) for w in workloads},
                           "repeats": args.repeats, "runs": [], "not_run": []}  # fmt: skip
    if args.prewarm:
        doc["prewarm"] = prewarm(args, workloads)
    timed_out: set[tuple[str, str | None]] = set()
    for repeat in range(args.repeats):
        for w in workloads:
            for fix in (None, *(f.name for f in FIXES[w])):
                key = (w, fix)
                why = None
                if time.perf_counter() - start > args.deadline:
                    why = f"deadline ({args.deadline:.0f} s) passed"
                elif key in timed_out:
                    why = "an earlier repeat timed out"
                if why:
                    doc["not_run"].append({"workload": w, "fix": fix, "repeat": repeat, "why": why})
                    continue
                r = run_once(args, w, fix, repeat)
                if r["rc"] == 124:
                    timed_out.add(key)
                doc["runs"].append(r)
                write_json(os.path.join(args.out, "runs.json"), doc)
    doc["wall_s"] = round(time.perf_counter() - start, 1)
    write_json(os.path.join(args.out, "runs.json"), doc)
    return doc


def merge_runs(paths: list[str]) -> dict[str, Any]:
    """The runs of several calls' runs.json as one: a call's repeat i becomes (repeats so far) + i."""
    doc: dict[str, Any] = {"runs": [], "not_run": [], "sources": paths}
    offset = 0
    for path in paths:
        with open(path) as f:
            part = json.load(f)
        for key in ("runs", "not_run"):
            doc[key] += [dict(r, repeat=r["repeat"] + offset, source=path) for r in part.get(key, [])]
        offset += int(part.get("repeats", 1))
    return doc


def write_json(path: str, doc: Any) -> None:
    with open(path + ".tmp", "w") as f:
        json.dump(doc, f, indent=1)
    os.replace(path + ".tmp", path)


# --- the table ----------------------------------------------------------------------------------------------


def step_of(run: dict[str, Any], kind: str) -> float | None:
    v = run.get("mean_ms" if kind == "slow_steps" else "median_ms")
    return None if v is None else float(v)


def rows_for(workload: str, report: dict[str, Any], runs: list[dict[str, Any]]) -> list[dict[str, Any]]:
    rows = []
    for rank, finding in enumerate(top_findings(report), 1):
        kind = str(finding.get("kind"))
        fix = fix_for(workload, finding)
        row: dict[str, Any] = {"workload": workload, "rank": rank, "kind": kind, "fix": fix.name if fix else None,
                               "predicted_ms": float(finding["saving_ns"]) / 1e6, "action": finding.get("action"),
                               "savings_ms": [], "repeats": 0}  # fmt: skip
        if fix:
            by_repeat: dict[int, dict[str | None, dict[str, Any]]] = {}
            for r in runs:
                if r["workload"] == workload and r["fix"] in (None, fix.name):
                    by_repeat.setdefault(r["repeat"], {})[r["fix"]] = r
            savings, unfixed, fixed = [], [], []
            for _, pair in sorted(by_repeat.items()):
                b = step_of(pair.get(None, {}), kind)
                f = step_of(pair.get(fix.name, {}), kind)
                if b is not None and f is not None:
                    savings.append(b - f)
                    unfixed.append(b)
                    fixed.append(f)
            row.update(savings_ms=savings, repeats=len(by_repeat), unfixed_ms=unfixed, fixed_ms=fixed)
            if savings:
                med = statistics.median(savings)
                row.update(measured_ms=med, low_ms=min(savings), high_ms=max(savings),
                           ratio=med / row["predicted_ms"] if row["predicted_ms"] else None)  # fmt: skip
        rows.append(row)
    return rows


def within(row: dict[str, Any]) -> bool:
    r = row.get("ratio")
    return r is not None and abs(r - 1) <= WITHIN


def format_table(rows: list[dict[str, Any]]) -> str:
    def ms(v: Any, fmt: str = "{:.2f}") -> str:
        return "—" if v is None else fmt.format(v)

    out = ["| workload | # | finding | fix | predicted ms/step | unfixed ms/step | measured saving ms/step: median"
           " [range] | timed pairs | measured/predicted | within ±30 % |",
           "|---|---:|---|---|---:|---:|---|---:|---:|---|"]  # fmt: skip
    for r in rows:
        got = len(r["savings_ms"])
        rng = f"{ms(r.get('measured_ms'))} [{ms(r.get('low_ms'))} … {ms(r.get('high_ms'))}]" if got else "—"
        base = statistics.median(r["unfixed_ms"]) if r.get("unfixed_ms") else None
        out.append(f"| {r['workload']} | {r['rank']} | {r['kind']} | {r['fix'] or 'none'} | {ms(r['predicted_ms'])}"
                   f" | {ms(base)} | {rng} | {got} | {ms(r.get('ratio'), '{:.2f}')} |"
                   f" {'yes' if within(r) else 'no'} |")  # fmt: skip
    out.append("")
    for w in dict.fromkeys(r["workload"] for r in rows):
        ws = [r for r in rows if r["workload"] == w]
        out.append(f"- {w}: {sum(within(r) for r in ws)} of {len(ws)} top findings within ±30 %")
    return "\n".join(out)


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("workloads", nargs="*", default=list(FIXES))
    p.add_argument("--out", default=os.environ.get("OUT") or "holdout_savings")
    p.add_argument("--logs", default=None, help="folder for the runs' logs and step files (default OUT/logs)")
    p.add_argument(
        "--reports", help="folder of <workload>.report.json (default: report the committed recordings)"
    )
    p.add_argument("--measured", nargs="+", help="runs.json of earlier calls: the table again, no runs (the"
                   " repeats of each later file numbered after those of the ones before it)")  # fmt: skip
    p.add_argument("--repeats", type=int, default=3)
    p.add_argument("--steps", type=int, default=25, help="timed steps per run, after the warm-up")
    p.add_argument("--warmup", type=int, default=8, help="warm-up steps per run (moe_layer: 20)")
    p.add_argument("--timeout", type=float, default=150, help="seconds per run")
    p.add_argument("--deadline", type=float, default=1e9, help="start no run after this many seconds")
    p.add_argument("--prewarm", action="store_true", help="run the compiled fixes once, at once, untimed")
    p.add_argument("--prewarm-timeout", type=float, default=150)
    p.add_argument("--smoke", action="store_true", help="tiny sizes (CPU); no reports needed")
    p.add_argument("--fixes", help="comma-separated: time only these fixes (and the unfixed runs)")
    return p.parse_args(argv)


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    for w in args.workloads:
        if w not in FIXES:
            print(f"savings: error: unknown workload {w!r}", file=sys.stderr)
            return 2
    if args.fixes:
        keep = set(args.fixes.split(","))
        for w in list(FIXES):
            FIXES[w] = tuple(f for f in FIXES[w] if f.name in keep)
    os.makedirs(args.out, exist_ok=True)
    args.logs = args.logs or os.path.join(args.out, "logs")
    os.makedirs(args.logs, exist_ok=True)
    if args.measured:
        doc = merge_runs(args.measured)
    else:
        doc = measure(args, args.workloads)
    rows: list[dict[str, Any]] = []
    for w in args.workloads:
        try:
            report = report_of(w, args.reports)
        except (OSError, ValueError, subprocess.SubprocessError) as e:
            print(f"{w}: no report: {e}", flush=True)
            continue
        rows += rows_for(w, report, doc["runs"])
    table = format_table(rows)
    print(table)
    write_json(os.path.join(args.out, "savings.json"), {"rows": rows, "not_run": doc.get("not_run", [])})
    with open(os.path.join(args.out, "savings_table.md"), "w") as f:
        f.write(table + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
