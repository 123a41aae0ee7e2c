"""Predicted vs measured savings: three fixes brrrtui advises, each timed A/B on the GPU beside the saving
brrrtui predicted for it (the finding's saving_ns in a report of the unfixed run).

    python validation/savings.py --out $OUT                                    # H200: ~3-4 min
    python validation/savings.py --out $OUT --report-gpt2-eager g.json --report-hf-gpt2 h.json   # reuse reports
    python validation/savings.py --smoke --out /tmp/savings                    # CPU: matching + table only

The cases (the unfixed run is each workload's default; the fix is one opt-in flag):

  vocab          HF GPT-2 (validation/workloads/hf_gpt2.py): --vocab 50257 -> --vocab 50304. brrrtui's
                 `slow_gemm` finding whose message names 50257 (the lm_head GEMMs fall off the Hopper kernels
                 to cutlass_75 ones at 12-19 % of the roof): "pad 50257 to 50304".
  fusion_block   GPT-2 eager (examples/train_gpt.py; the fixed run is validation/workloads/gpt2_eager_fixes.py,
                 train_gpt.py with the fix patched in): --compile-block. brrrtui's `fusion` finding on the lines
                 of Block.forward, whose advice is "torch.compile the function `forward`": each Block's forward
                 is compiled, as advised. Its saving is estimated over the block's whole scope (its own lines
                 and, with module chains recorded, its attention and MLP; analyzers/fusion/scope.py).
  cross_entropy  GPT-2 eager: --compile-loss. brrrtui's `fusion` finding on the cross-entropy line of
                 GPT.forward (_log_softmax, copy_, nll_loss_forward and their backward; the scope of a root
                 model's forward is its own lines, so also the embedding and final norm's kernels on lines 98
                 and 101): only F.cross_entropy is compiled.

Timing: separate processes, run back to back on one GPU with the same seed (the unfixed run once per
workload, shared by its cases); each runs --warmup + --steps steps, every step ended by
torch.cuda.synchronize() (train_gpt.py always; the HF workloads with --sync-steps), and the step time is the
median over the --steps steps after the warm-up. Measured saving = median(unfixed) - median(fixed).

Prediction: the sum of saving_ns over the report's findings of the case's kind that match it (line or
message), per step. The report is brrrtui's `report --json` of a recording of the unfixed workload: given with
--report-*, else recorded here (`brrrtui record` + `report --json`).

Writes to --out: savings.json (everything), savings_table.md, savings_<run>.log / _steps.json per run,
savings_<workload>_report.json when recorded here. Prints the table and one `SAVINGS {json}` line.
"""

from __future__ import annotations

import argparse
import ast
import json
import os
import re
import statistics
import subprocess
import sys
import time
from dataclasses import dataclass, field
from typing import Any

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
TRAIN_GPT = os.path.join("examples", "train_gpt.py")
HF_GPT2 = os.path.join("validation", "workloads", "hf_gpt2.py")
GPT2_FIXES = os.path.join("validation", "workloads", "gpt2_eager_fixes.py")

WORKLOADS = {  # name: (script, arguments of the unfixed run)
    "gpt2_eager": (TRAIN_GPT, []),
    "hf_gpt2": (HF_GPT2, ["--vocab", "50257", "--sync-steps"]),
}


@dataclass(frozen=True)
class Case:
    name: str
    workload: str
    fix: list[str]  # arguments added to the workload's (an option given twice: the last one wins)
    kind: str  # the finding kind
    advice: str
    lines: tuple[int, ...] = ()  # the finding has a line of the workload's script among these
    message: str | None = None  # or its message matches this regex
    fixed_run: str = field(default="")
    fixed_script: str | None = None  # default: the workload's script

    @property
    def run(self) -> str:
        return self.fixed_run or f"{self.workload}_{self.name}"


def function_lines(path: str, cls: str, func: str) -> tuple[int, int]:
    """(first, last) line of cls.func in a source file."""
    with open(path, encoding="utf-8") as f:
        tree = ast.parse(f.read())
    for node in ast.walk(tree):
        if isinstance(node, ast.ClassDef) and node.name == cls:
            for item in node.body:
                if isinstance(item, ast.FunctionDef) and item.name == func:
                    return item.lineno, item.end_lineno or item.lineno
    raise ValueError(f"{cls}.{func} not found in {path}")


def cross_entropy_lines(path: str) -> tuple[int, ...]:
    """The lines of GPT.forward that call the cross-entropy."""
    first, last = function_lines(path, "GPT", "forward")
    with open(path, encoding="utf-8") as f:
        src = f.read().splitlines()
    return tuple(i for i in range(first, last + 1) if "cross_entropy(" in src[i - 1])


def cases(root: str = ROOT) -> list[Case]:
    script = os.path.join(root, TRAIN_GPT)
    b0, b1 = function_lines(script, "Block", "forward")
    return [
        Case(
            "vocab",
            "hf_gpt2",
            ["--vocab", "50304"],
            "slow_gemm",
            "pad the vocabulary 50257 -> 50304",
            message=r"(?<!\d)50257(?!\d)",
            fixed_run="hf_gpt2_vocab50304",
        ),
        Case(
            "fusion_block",
            "gpt2_eager",
            ["--compile-block"],
            "fusion",
            "torch.compile Block.forward",
            lines=tuple(range(b0 + 1, b1 + 1)),
            fixed_script=GPT2_FIXES,
        ),
        Case(
            "cross_entropy",
            "gpt2_eager",
            ["--compile-loss"],
            "fusion",
            "torch.compile the cross-entropy",
            lines=cross_entropy_lines(script),
            fixed_script=GPT2_FIXES,
        ),
    ]


# --- predictions --------------------------------------------------------------------------------------------


def matches(finding: dict[str, Any], case: Case) -> bool:
    if finding.get("kind") != case.kind:
        return False
    script = os.path.basename(WORKLOADS[case.workload][0])
    if case.lines:
        return any(
            os.path.basename(str(ln.get("file", ""))) == script and int(ln.get("line", -1)) in case.lines
            for ln in finding.get("lines", [])
        )
    return bool(case.message and re.search(case.message, finding.get("message", "")))


def predict(report: dict[str, Any] | None, case: Case) -> dict[str, Any]:
    """The case's findings in the report and their summed saving per step (ms)."""
    if report is None:
        return {"predicted_ms": None, "findings": [], "note": "no report"}
    found = [f for f in report.get("findings", []) if matches(f, case)]
    savings = [f.get("saving_ns") for f in found if f.get("saving_ns") is not None]
    same_kind = [f for f in report.get("findings", []) if f.get("kind") == case.kind and f not in found]
    return {
        "predicted_ms": sum(savings) / 1e6 if savings else None,
        "findings": [_finding_brief(f) for f in found],
        "other_findings_of_kind": [_finding_brief(f) for f in same_kind],
        "report_phase": report.get("phase"),
        "note": None
        if found
        else f"no {case.kind} finding matches (lines {list(case.lines)} / {case.message})",
    }


def _finding_brief(f: dict[str, Any]) -> dict[str, Any]:
    return {
        "kind": f.get("kind"),
        "lines": [f"{os.path.basename(str(ln.get('file')))}:{ln.get('line')}" for ln in f.get("lines", [])],
        "saving_ms": None if f.get("saving_ns") is None else f["saving_ns"] / 1e6,
        "message": f.get("message"),
        "action": f.get("action"),
    }


# --- measurements -------------------------------------------------------------------------------------------


def median_after(steps_ms: list[float], warmup: int) -> float | None:
    timed = steps_ms[warmup:]
    return statistics.median(timed) if timed else None


def child_env() -> dict[str, str]:
    env = dict(os.environ)
    env.pop("OUT", None)  # the scripts would write into the lead's $OUT
    return env


def timed_run(cmd: list[str], timeout: float, env: dict[str, str]) -> tuple[int, str, float]:
    """Run `cmd` from the repository root: (exit code, its stdout and stderr, wall seconds); 124 when it ran past
    `timeout` seconds (what it printed by then kept)."""
    t0 = time.perf_counter()
    try:
        proc = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True, timeout=timeout, env=env)
        rc, log = proc.returncode, proc.stdout + "\n--- stderr\n" + proc.stderr
    except subprocess.TimeoutExpired as e:
        rc, log = 124, f"timed out after {timeout} s\n{_text(e.stdout)}\n--- stderr\n{_text(e.stderr)}"
    return rc, log, time.perf_counter() - t0


def run_workload(args: argparse.Namespace, run: str, script: str, extra: list[str]) -> dict[str, Any]:
    """One timed run; its per-step times come from the script's own JSON (steps_ms)."""
    cmd = [sys.executable, script, *extra, "--steps", str(args.warmup + args.steps)]
    cmd += ["--warmup", str(args.warmup), "--out", args.out, "--name", f"savings_{run}"]
    print("$ " + " ".join(cmd), flush=True)
    rc, log, wall = timed_run(cmd, args.timeout, child_env())
    with open(os.path.join(args.out, f"savings_{run}.log"), "w") as f:
        f.write(log)
    out = {"run": run, "cmd": " ".join(cmd[1:]), "rc": rc, "wall_s": round(wall, 1), "median_ms": None}
    data = _steps_json(args.out, run)
    if data:
        steps = [float(x) for x in data.get("steps_ms") or data.get("step_ms") or []]
        out.update(steps=len(steps), median_ms=median_after(steps, args.warmup))
        out["iqr_ms"] = _iqr(steps[args.warmup :])
    print(f"  rc={rc} {wall:.0f} s median {out['median_ms']} ms", flush=True)
    return out


def _text(x: str | bytes | None) -> str:
    return x.decode(errors="replace") if isinstance(x, bytes) else (x or "")


def _steps_json(folder: str, run: str) -> dict[str, Any] | None:
    for suffix in ("_result.json", "_steps.json"):  # train_gpt.py / validation/workloads
        path = os.path.join(folder, f"savings_{run}{suffix}")
        if os.path.exists(path):
            with open(path) as f:
                return json.load(f)
    return None


def _iqr(xs: list[float]) -> float | None:
    if len(xs) < 4:
        return None
    q = statistics.quantiles(xs, n=4)
    return q[2] - q[0]


def record_report(args: argparse.Namespace, workload: str) -> dict[str, Any] | None:
    """brrrtui record + report --json of the unfixed workload (when no report was given)."""
    script, extra = WORKLOADS[workload]
    extra = [a for a in extra if a != "--sync-steps"]  # record the loop as it is
    rec = os.path.join(args.out, f"savings_{workload}.brrr")
    cmd = [
        sys.executable,
        "-m",
        "brrrtui",
        "record",
        "-o",
        rec,
        script,
        *extra,
        "--steps",
        str(args.record_steps),
    ]
    print("$ " + " ".join(cmd[1:]), flush=True)
    try:
        proc = subprocess.run(
            cmd, cwd=ROOT, capture_output=True, text=True, timeout=args.timeout, env=child_env()
        )
        with open(os.path.join(args.out, f"savings_{workload}_record.log"), "w") as f:
            f.write(proc.stdout + "\n--- stderr\n" + proc.stderr)
        rep = subprocess.run(
            [sys.executable, "-m", "brrrtui", "report", "--json", rec],
            cwd=ROOT, capture_output=True, text=True, timeout=args.timeout,
        )  # fmt: skip
        report = json.loads(rep.stdout)
    except (subprocess.TimeoutExpired, json.JSONDecodeError, OSError) as e:
        print(f"  no report for {workload}: {e}", flush=True)
        return None
    with open(os.path.join(args.out, f"savings_{workload}_report.json"), "w") as f:
        json.dump(report, f, indent=1)
    return report


def load_report(path: str) -> dict[str, Any]:
    if path.endswith(".json"):
        with open(path) as f:
            return json.load(f)
    proc = subprocess.run(
        [sys.executable, "-m", "brrrtui", "report", "--json", path],
        cwd=ROOT, capture_output=True, text=True, timeout=300, check=True,
    )  # fmt: skip
    return json.loads(proc.stdout)


# --- the table ----------------------------------------------------------------------------------------------


def combine(case: Case, pred: dict[str, Any], base: dict[str, Any], fixed: dict[str, Any]) -> dict[str, Any]:
    b, f = base.get("median_ms"), fixed.get("median_ms")
    measured = b - f if b is not None and f is not None else None
    p = pred.get("predicted_ms")
    return {
        "case": case.name,
        "workload": case.workload,
        "fix": case.advice,
        "fix_args": case.fix,
        "predicted_ms": p,
        "baseline_ms": b,
        "fixed_ms": f,
        "measured_ms": measured,
        "ratio_measured_over_predicted": measured / p if measured is not None and p else None,
        "baseline_run": base.get("run"),
        "fixed_run": fixed.get("run"),
        "prediction": pred,
    }


def format_table(rows: list[dict[str, Any]]) -> str:
    def ms(v: float | None, fmt: str = "{:.2f}") -> str:
        return "—" if v is None else fmt.format(v)

    out = [
        "| case | workload | fix | predicted ms/step | unfixed ms | fixed ms | measured ms/step | measured/predicted |",
        "|---|---|---|---:|---:|---:|---:|---:|",
    ]
    for r in rows:
        out.append(
            f"| {r['case']} | {r['workload']} | {r['fix']} | {ms(r['predicted_ms'])} | {ms(r['baseline_ms'])}"
            f" | {ms(r['fixed_ms'])} | {ms(r['measured_ms'])} | {ms(r['ratio_measured_over_predicted'], '{:.2f}x')} |"
        )
    for r in rows:
        fs = r["prediction"]["findings"]
        what = "; ".join(f"[{f['kind']}] {','.join(f['lines'])} ~{ms(f['saving_ms'])} ms" for f in fs)
        out.append(f"- {r['case']}: {what or r['prediction'].get('note')}")
    return "\n".join(out)


# --- main ---------------------------------------------------------------------------------------------------


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--out", default=os.environ.get("OUT") or "savings_out")
    p.add_argument("--cases", default="vocab,fusion_block,cross_entropy")
    p.add_argument("--steps", type=int, default=50, help="timed steps per run (after the warm-up)")
    p.add_argument("--warmup", type=int, default=10, help="warm-up steps per run, left out of the median")
    p.add_argument("--report-gpt2-eager", help="brrrtui report JSON (or .brrr) of examples/train_gpt.py")
    p.add_argument("--report-hf-gpt2", help="brrrtui report JSON (or .brrr) of hf_gpt2.py at vocab 50257")
    p.add_argument("--record-steps", type=int, default=100, help="steps of a recording made here")
    p.add_argument("--timeout", type=float, default=240, help="seconds per run")
    p.add_argument("--smoke", action="store_true", help="CPU: a synthetic report and step times, no runs")
    p.add_argument("--measured", help="savings.json of an earlier run: its timed runs, no new ones (CPU: the"
                   " predictions again, from --report-* made with the code as it is now)")  # fmt: skip
    return p.parse_args(argv)


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    os.makedirs(args.out, exist_ok=True)
    todo = [c for c in cases() if c.name in args.cases.split(",")]
    reports = smoke_reports() if args.smoke else given_reports(args)
    runs: dict[str, dict[str, Any]] = {}
    if args.measured:
        with open(args.measured) as f:
            runs = json.load(f)["runs"]
    rows: list[dict[str, Any]] = []
    method = (
        "separate processes back to back, same seed; median step time over the timed steps after the warm-up,"
        " each step ended by torch.cuda.synchronize()"
    ) + (f"; timed runs from {args.measured}, predictions made again" if args.measured else "")
    for case in todo:
        script, base_args = WORKLOADS[case.workload]
        if case.workload not in reports and not args.smoke and not args.measured:
            reports[case.workload] = record_report(args, case.workload)
        fixed = case.fixed_script or script
        for run, path, extra in (
            (case.workload, script, base_args),
            (case.run, fixed, [*base_args, *case.fix]),
        ):
            if run not in runs and args.measured:
                runs[run] = {"run": run, "median_ms": None, "note": f"not in {args.measured}"}
            elif run not in runs:
                runs[run] = smoke_run(run, args) if args.smoke else run_workload(args, run, path, extra)
        rows.append(
            combine(case, predict(reports.get(case.workload), case), runs[case.workload], runs[case.run])
        )
        write(args, rows, runs, method)
    table = format_table(rows)
    print(table)
    print("SAVINGS " + json.dumps({r["case"]: _summary(r) for r in rows}), flush=True)
    return 0 if all(r["measured_ms"] is not None for r in rows) else 1


def _summary(r: dict[str, Any]) -> dict[str, Any]:
    keys = ("predicted_ms", "measured_ms", "ratio_measured_over_predicted")
    return {k: None if r[k] is None else round(r[k], 3) for k in keys}


def given_reports(args: argparse.Namespace) -> dict[str, dict[str, Any] | None]:
    out: dict[str, dict[str, Any] | None] = {}
    for workload, path in (("gpt2_eager", args.report_gpt2_eager), ("hf_gpt2", args.report_hf_gpt2)):
        if path:
            try:
                out[workload] = load_report(path)
            except (OSError, ValueError, subprocess.CalledProcessError) as e:
                print(f"report {path}: {e}; recording instead", flush=True)
    return out


def write(args: argparse.Namespace, rows: list[dict[str, Any]], runs: dict[str, Any], method: str) -> None:
    """After every case, so a run cut short keeps what it measured."""
    doc = {"method": method, "steps": args.steps, "warmup": args.warmup, "cases": rows, "runs": runs}
    with open(os.path.join(args.out, "savings.json"), "w") as f:
        json.dump(doc, f, indent=1)
    with open(os.path.join(args.out, "savings_table.md"), "w") as f:
        f.write(format_table(rows) + "\n")


# --- smoke (CPU): the matching and the table on synthetic inputs --------------------------------------------


def smoke_reports() -> dict[str, dict[str, Any] | None]:
    """Reports shaped like brrrtui's (schema 2), with findings as the H200 recordings phrase them."""
    cs = {c.name: c for c in cases()}
    f = "/work/main/.snap/examples/train_gpt.py"
    block, ce = cs["fusion_block"].lines, cs["cross_entropy"].lines
    gpt = {
        "schema": 2,
        "phase": "steady",
        "findings": [
            {"kind": "fusion", "lines": [{"file": f, "line": ce[0]}], "saving_ns": 2_070_000.0,
             "message": "4 memory-bound kernels (nll_loss_backward, copy_, _log_softmax_backward_data) ...",
             "action": "torch.compile the function `forward` (Inductor fuses these into one kernel)"},
            {"kind": "fusion", "lines": [{"file": f, "line": ce[0]}], "saving_ns": 1_720_000.0,
             "message": "4 memory-bound kernels (_log_softmax, copy_, nll_loss_forward) ...", "action": "..."},
            {"kind": "fusion", "lines": [{"file": f, "line": block[0]}, {"file": f, "line": block[1]}],
             "saving_ns": 581_000.0, "message": "4 memory-bound kernels (native_layer_norm_backward, add_, "
             "copy_) on lines ...", "action": "torch.compile the function `forward`"},
            {"kind": "fusion", "lines": [{"file": "/x/other.py", "line": block[0]}], "saving_ns": 9e9,
             "message": "another file's line: not matched", "action": "..."},
            {"kind": "sync", "lines": [{"file": f, "line": ce[0]}], "saving_ns": 723_000.0,
             "message": "not a fusion finding: not matched", "action": "..."},
        ],
    }  # fmt: skip
    hf = {
        "schema": 2,
        "phase": "steady",
        "findings": [
            {"kind": "slow_gemm", "lines": [{"file": "/w/validation/workloads/hf_gpt2.py", "line": 34}],
             "saving_ns": 19_500_000.0, "message": "6 matmul kernels per step on ... (8192x768x50257 ...) have a"
             " dimension of 50257, not a multiple of 8 ...", "action": "pad 50257 to 50304 (a multiple of 64)"},
            {"kind": "slow_gemm", "lines": [], "saving_ns": 1e6, "message": "a dimension of 502570", "action": ""},
        ],
    }  # fmt: skip
    return {"gpt2_eager": gpt, "hf_gpt2": hf}


def smoke_run(run: str, args: argparse.Namespace) -> dict[str, Any]:
    base = {"gpt2_eager": 44.0, "gpt2_eager_fusion_block": 42.9, "gpt2_eager_cross_entropy": 41.2}
    base |= {"hf_gpt2": 58.0, "hf_gpt2_vocab50304": 41.5}
    ms = base[run]
    steps = [1500.0] + [ms * 3] * (args.warmup - 1) + [ms + 0.01 * (i % 5 - 2) for i in range(args.steps)]
    return {"run": run, "cmd": "(smoke)", "rc": 0, "wall_s": 0.0, "steps": len(steps),
            "median_ms": median_after(steps, args.warmup), "iqr_ms": _iqr(steps[args.warmup :])}  # fmt: skip


if __name__ == "__main__":
    raise SystemExit(main())
