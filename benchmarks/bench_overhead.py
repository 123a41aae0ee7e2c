"""brrrtui's average slowdown of a training script: plain runs and recorded runs, alternated.

    python -m benchmarks.bench_overhead --pairs 3 --steps 100                 # GPU: GPT-2 small, ~2 min
    python -m benchmarks.bench_overhead --smoke                               # CPU: tiny GPT, fake recorder
    python -m benchmarks.bench_overhead -- --batch 8 --compile                # args after -- go to the script

Each pair runs `python SCRIPT --steps N ARGS` (A) and then
`python -m brrrtui record -o FILE SCRIPT --steps N ARGS` (B), so drift in clocks or temperature hits both
alike. The script prints `RESULT {"mean_step_ms": ...}` (steps after its warm-up; examples/train_gpt.py does).
Per pair: mean step time of each, slowdown = B / A, wall-time ratio (process start to exit, so start-up and
brrrtui's own set-up are in it), and from the recording (SQLite: `windows` start_ns/end_ns/stall_ns, `steps`
step/t_ns) the number of windows, the longest and total stall, the share of the run inside windows, and the
median step interval inside and outside windows.

Prints a markdown table and writes bench_overhead.json (+ logs/) to --out (default $OUT, else ./bench_out).
With --smoke, or --fake-recorder, B runs a stand-in recorder in this file that writes a recording with the
same two tables (steps from an optimizer hook, a window every 10 steps), so the parsing is tested without
brrrtui's CLI.
"""

from __future__ import annotations

import argparse
import json
import os
import shlex
import sqlite3
import statistics
import subprocess
import sys
import tempfile
import time
from typing import Any

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SMOKE_ARGS = ["--layers", "2", "--seq", "64", "--batch", "2", "--vocab", "4096", "--warmup", "1"]


def parse_result(output: str) -> dict[str, Any] | None:
    """The last `RESULT {...}` line of a script's output, or None."""
    found = None
    for line in output.splitlines():
        if line.startswith("RESULT "):
            try:
                found = json.loads(line[len("RESULT ") :])
            except json.JSONDecodeError:
                continue
    return found


def recording_stats(path: str) -> dict[str, Any]:
    """Windows, stalls and step intervals from a recording's `windows` and `steps` tables, read through the
    recording's own loader (its tables are not rows of SQL); --fake-record's files are plain SQL tables."""
    from brrrtui.recording.store import RecordingError, load_recording

    costs: list[int] = []
    try:
        trace = load_recording(path, stream_tail=0)
    except RecordingError:
        con = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
        try:
            windows = con.execute("SELECT start_ns, end_ns, stall_ns FROM windows ORDER BY start_ns").fetchall()
            steps = con.execute("SELECT step, t_ns FROM steps ORDER BY step").fetchall()
        finally:
            con.close()
    else:
        w, st = trace.windows, trace.steps
        order = w.start_ns.argsort()
        columns = (w.start_ns[order].tolist(), w.end_ns[order].tolist(), w.stall_ns[order].tolist())
        windows = list(zip(*columns, strict=True))
        steps = sorted(zip(st.step.tolist(), st.t_ns.tolist(), strict=True))
        costs = trace.capture_costs.cost_ns.tolist()
    stalls = [s for _, _, s in windows if s is not None and s >= 0]
    inside, outside = [], []
    for (_, t_prev), (_, t) in zip(steps, steps[1:], strict=False):
        dt_ms = (t - t_prev) / 1e6
        in_window = any(t > start and t_prev < end for start, end, _ in windows)
        (inside if in_window else outside).append(dt_ms)
    span_ns = steps[-1][1] - steps[0][1] if len(steps) > 1 else 0
    windowed_ns = sum(max(0, end - start) for start, end, _ in windows)
    return {
        "windows": len(windows),
        "longest_stall_ms": round(max(stalls) / 1e6, 3) if stalls else None,
        "total_stall_ms": round(sum(stalls) / 1e6, 3) if stalls else None,
        "steps_recorded": len(steps),
        "window_share": round(windowed_ns / span_ns, 4) if span_ns > 0 else None,
        "median_step_ms_in_windows": round(statistics.median(inside), 3) if inside else None,
        "median_step_ms_outside": round(statistics.median(outside), 3) if outside else None,
        "measured_cost_ms": round(sum(costs) / 1e6, 1),  # what the scheduler charged at each conversion's end
    }


def summarize(pairs: list[dict[str, Any]]) -> dict[str, Any]:
    ok = [p for p in pairs if p.get("slowdown") is not None]

    def med(key: str) -> float | None:
        vals = [p[key] for p in ok if p.get(key) is not None]
        return round(statistics.median(vals), 4) if vals else None

    stalls = [
        p["recording"]["longest_stall_ms"] for p in ok if p.get("recording", {}).get("longest_stall_ms")
    ]
    return {
        "pairs_ok": len(ok),
        "pairs": len(pairs),
        "slowdown_median": med("slowdown"),
        "slowdown_min": round(min(p["slowdown"] for p in ok), 4) if ok else None,
        "slowdown_max": round(max(p["slowdown"] for p in ok), 4) if ok else None,
        "wall_ratio_median": med("wall_ratio"),
        "longest_stall_ms": max(stalls) if stalls else None,
        "windows_median": med("windows"),
    }


def markdown(pairs: list[dict[str, Any]], summary: dict[str, Any]) -> str:
    def f(v: Any, nd: int = 2) -> str:
        return "—" if v is None else (f"{v:.{nd}f}" if isinstance(v, float) else str(v))

    rows = [
        "| pair | plain ms/step | recorded ms/step | slowdown | plain wall s | recorded wall s | wall ratio "
        "| windows | longest stall ms | in-window ms/step | outside ms/step |",
        "|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for p in pairs:
        rec = p.get("recording") or {}
        rows.append(
            f"| {p['pair']} | {f(p['plain'].get('mean_step_ms'))} | {f(p['recorded'].get('mean_step_ms'))} "
            f"| {f(p.get('slowdown'), 3)} | {f(p['plain'].get('wall_s'), 1)} | {f(p['recorded'].get('wall_s'), 1)} "
            f"| {f(p.get('wall_ratio'), 3)} | {f(rec.get('windows'))} | {f(rec.get('longest_stall_ms'), 1)} "
            f"| {f(rec.get('median_step_ms_in_windows'))} | {f(rec.get('median_step_ms_outside'))} |"
        )
    rows.append("")
    rows.append(
        f"slowdown median {f(summary['slowdown_median'], 3)} (min {f(summary['slowdown_min'], 3)}, "
        f"max {f(summary['slowdown_max'], 3)}); wall ratio median {f(summary['wall_ratio_median'], 3)}; "
        f"longest stall {f(summary['longest_stall_ms'], 1)} ms; {summary['pairs_ok']}/{summary['pairs']} pairs ok"
    )
    return "\n".join(rows)


def run_once(cmd: list[str], log_path: str, timeout_s: float) -> dict[str, Any]:
    env = dict(os.environ)
    env.pop("OUT", None)  # the script would write its result file there on every run
    t0 = time.perf_counter()
    try:
        proc = subprocess.run(cmd, cwd=ROOT, env=env, capture_output=True, text=True, timeout=timeout_s)
        rc, out, err = proc.returncode, proc.stdout, proc.stderr
    except subprocess.TimeoutExpired as e:
        rc = 124
        out = e.stdout.decode(errors="replace") if isinstance(e.stdout, bytes) else (e.stdout or "")
        err = e.stderr.decode(errors="replace") if isinstance(e.stderr, bytes) else (e.stderr or "")
    wall_s = time.perf_counter() - t0
    with open(log_path, "w") as f:
        f.write(f"$ {shlex.join(cmd)}\n# rc={rc} wall_s={wall_s:.2f}\n--- stdout\n{out}\n--- stderr\n{err}")
    result = parse_result(out) or parse_result(err) or {}
    info = {
        "rc": rc,
        "wall_s": round(wall_s, 3),
        "mean_step_ms": result.get("mean_step_ms"),
        "median_step_ms": result.get("median_step_ms"),
        "steps": result.get("steps"),
    }
    if rc != 0 or not result:
        info["error"] = (err or out)[-2000:]
    return info


def fake_record(argv: list[str]) -> int:
    """Stand-in for `brrrtui record -o FILE SCRIPT ARGS`: steps from an optimizer hook, a window per 10."""
    import runpy

    from torch.optim.optimizer import register_optimizer_step_post_hook

    if len(argv) < 3 or argv[0] != "-o":
        print("usage: bench_overhead.py --fake-record -o FILE SCRIPT ARGS...", file=sys.stderr)
        return 2
    path, script, args = argv[1], argv[2], argv[3:]
    con = sqlite3.connect(path)
    con.execute("CREATE TABLE windows(window INTEGER, start_ns INTEGER, end_ns INTEGER, stall_ns INTEGER)")
    con.execute("CREATE TABLE steps(step INTEGER, t_ns INTEGER)")
    state = {"step": 0, "window_start": None}

    def hook(opt: Any, a: Any, kw: Any) -> None:
        t = time.time_ns()
        con.execute("INSERT INTO steps VALUES (?, ?)", (state["step"], t))
        if state["step"] % 10 == 2:
            state["window_start"] = t
        elif state["step"] % 10 == 4 and state["window_start"] is not None:
            stall_t0 = time.perf_counter_ns()
            con.commit()
            stall = time.perf_counter_ns() - stall_t0
            con.execute(
                "INSERT INTO windows VALUES (?, ?, ?, ?)",
                (state["step"] // 10, state["window_start"], t, stall),
            )
            state["window_start"] = None
        state["step"] += 1

    register_optimizer_step_post_hook(hook)
    sys.argv = [script, *args]
    try:
        runpy.run_path(script, run_name="__main__")
    except SystemExit as e:
        if e.code not in (0, None):
            raise
    finally:
        con.commit()
        con.close()
    return 0


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if argv[:1] == ["--fake-record"]:
        return fake_record(argv[1:])
    extra: list[str] = []
    if "--" in argv:
        i = argv.index("--")
        argv, extra = argv[:i], argv[i + 1 :]
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--pairs", type=int, default=3)
    p.add_argument("--steps", type=int, default=100)
    p.add_argument("--script", default="examples/train_gpt.py", help="relative to the repository root")
    p.add_argument("--out", default=os.environ.get("OUT") or "bench_out")
    p.add_argument("--timeout", type=float, default=300, help="seconds per run")
    p.add_argument("--keep", action="store_true", help="keep the recordings in --out")
    p.add_argument("--record-args", default="", help='options for `brrrtui record`, e.g. "--no-calibrate"')
    p.add_argument("--fake-recorder", action="store_true", help="B runs this file's stand-in recorder")
    p.add_argument(
        "--smoke",
        action="store_true",
        help="tiny CPU GPT, 1 pair, 12 steps, fake recorder if brrrtui has no CLI yet",
    )
    args = p.parse_args(argv)
    if args.smoke:
        args.pairs, args.steps = 1, 12
        extra = SMOKE_ARGS + extra
        import importlib.util

        if importlib.util.find_spec("brrrtui.__main__") is None:
            args.fake_recorder = True

    os.makedirs(os.path.join(args.out, "logs"), exist_ok=True)
    rec_dir = args.out if args.keep else tempfile.mkdtemp(prefix="bench_overhead_")
    script_cmd = [args.script, "--steps", str(args.steps), *extra]
    pairs: list[dict[str, Any]] = []
    for i in range(args.pairs):
        rec_path = os.path.join(rec_dir, f"pair{i}.brrr")
        if os.path.exists(rec_path):
            os.remove(rec_path)
        if args.fake_recorder:
            recorder = [sys.executable, os.path.abspath(__file__), "--fake-record", "-o", rec_path]
        else:
            recorder = [
                sys.executable,
                "-m",
                "brrrtui",
                "record",
                "-o",
                rec_path,
                *shlex.split(args.record_args),
            ]
        plain = run_once(
            [sys.executable, *script_cmd], os.path.join(args.out, "logs", f"pair{i}_plain.log"), args.timeout
        )
        recorded = run_once(
            [*recorder, *script_cmd], os.path.join(args.out, "logs", f"pair{i}_recorded.log"), args.timeout
        )
        pair: dict[str, Any] = {"pair": i, "plain": plain, "recorded": recorded}
        if plain.get("mean_step_ms") and recorded.get("mean_step_ms"):
            pair["slowdown"] = round(recorded["mean_step_ms"] / plain["mean_step_ms"], 4)
            pair["wall_ratio"] = round(recorded["wall_s"] / plain["wall_s"], 4)
        if os.path.exists(rec_path):
            try:
                pair["recording"] = recording_stats(rec_path)
                pair["windows"] = pair["recording"]["windows"]
            except sqlite3.Error as e:
                pair["recording"] = {"error": str(e)}
        for label, r in (("plain", plain), ("recorded", recorded)):
            status = (
                "ok" if "error" not in r else f"FAILED rc={r['rc']}: {r['error'].strip().splitlines()[-1:]}"
            )
            print(
                f"pair {i} {label}: {r.get('mean_step_ms')} ms/step, wall {r['wall_s']:.1f} s, {status}",
                flush=True,
            )
        pairs.append(pair)

    summary = summarize(pairs)
    table = markdown(pairs, summary)
    print(table)
    report = {
        "script": args.script,
        "steps": args.steps,
        "script_args": extra,
        "fake_recorder": args.fake_recorder,
        "record_args": args.record_args,
        "pairs": pairs,
        "summary": summary,
    }
    with open(os.path.join(args.out, "bench_overhead.json"), "w") as f:
        json.dump(report, f, indent=1)
    with open(os.path.join(args.out, "bench_overhead.md"), "w") as f:
        f.write(table + "\n")
    return 0 if summary["pairs_ok"] else 1


if __name__ == "__main__":
    raise SystemExit(main())
