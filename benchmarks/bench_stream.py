"""The kernel stream's cost and latency: no brrrtui vs windows only vs windows + stream, in one run.

    python -m benchmarks.bench_stream --rounds 1 --gpt-steps 2500 --tiny-steps 20000     # H200, ~8 min
    python -m benchmarks.bench_stream --smoke                                            # CPU: plumbing

For each subject (examples/train_gpt.py, GPT-2 small; benchmarks/tiny_ops.py, an overhead-bound loop of tiny
ops) and each round, three runs back to back:
  plain   python SCRIPT ...
  cupti   python -m benchmarks.cupti_only SCRIPT ...   (CUPTI kernel activity on, buffers dropped: the floor)
  windows python -m brrrtui record -o FILE SCRIPT ...
  stream  python -m brrrtui record --stream -o FILE SCRIPT ...
Slowdown = mean step time (after the script's warm-up, windows included) / plain's, the baseline measured in
the same run. Latency p50/p99 (recording committed - kernel end) comes from the recording's meta "stream".
Memory: RSS of the recorder (parent) and the script (child), sampled every second; the table gives the
first sample after a quarter of the run and the last one, so a leak shows as growth over the run.
Writes bench_stream.json to --out (default $OUT, else ./bench_out).
"""

from __future__ import annotations

import argparse
import json
import os
import sqlite3
import statistics
import subprocess
import sys
import tempfile
import time
from typing import Any

from benchmarks.bench_overhead import parse_result, recording_stats

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

VARIANTS = ("plain", "cupti", "windows", "stream")


def rss_mb(pid: int) -> float | None:
    try:
        with open(f"/proc/{pid}/status") as f:
            for line in f:
                if line.startswith("VmRSS:"):
                    return int(line.split()[1]) / 1024
    except OSError:
        return None
    return None


def children(pid: int) -> list[int]:
    try:
        with open(f"/proc/{pid}/task/{pid}/children") as f:
            return [int(x) for x in f.read().split()]
    except OSError:
        return []


def parse_cpus(spec: str) -> set[int]:
    """'0-3,8' -> {0, 1, 2, 3, 8} (the format of sysfs' local_cpulist)."""
    cpus: set[int] = set()
    for part in filter(None, spec.split(",")):
        lo, _, hi = part.partition("-")
        cpus.update(range(int(lo), int(hi or lo) + 1))
    return cpus


def run(cmd: list[str], timeout_s: float, cpus: set[int] | None = None) -> dict[str, Any]:
    env = dict(os.environ)
    env.pop("OUT", None)
    env["PYTHONFAULTHANDLER"] = "1"  # a crash in the script leaves its Python stack in stderr_tail
    pin = (lambda: os.sched_setaffinity(0, cpus)) if cpus else None  # the recorder and the script inherit it
    t0 = time.perf_counter()
    proc = subprocess.Popen(cmd, cwd=ROOT, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            preexec_fn=pin)  # fmt: skip
    mem: list[tuple[float, float | None, float | None]] = []  # (t, parent MB, child MB)
    out_parts: list[str] = []
    while True:
        try:
            out, err = proc.communicate(timeout=1.0)
            out_parts.append(out)
            break
        except subprocess.TimeoutExpired:
            kids = children(proc.pid)
            mem.append((time.perf_counter() - t0, rss_mb(proc.pid), rss_mb(kids[0]) if kids else None))
            if time.perf_counter() - t0 > timeout_s:
                proc.kill()
                out, err = proc.communicate()
                break
    wall = time.perf_counter() - t0
    result = parse_result(out) or parse_result(err) or {}
    timed = result.get("step_ms", [])[result.get("warmup", 0) :]  # train_gpt.py gives every step
    longest = result.get("max_step_ms") or (round(max(timed), 1) if timed else None)
    return {"rc": proc.returncode, "wall_s": round(wall, 2), "mean_step_ms": result.get("mean_step_ms"),
            "median_step_ms": result.get("median_step_ms"), "longest_step_ms": longest, "mem": mem,
            "stderr_tail": err[-3000:]}  # fmt: skip


def memory_growth(mem: list[tuple[float, float | None, float | None]]) -> dict[str, Any]:
    if len(mem) < 4:
        return {}
    q = mem[len(mem) // 4]
    last = mem[-2]  # the last sample before the script's exit work
    return {"parent_mb": [q[1], last[1]], "child_mb": [q[2], last[2]], "at_s": [round(q[0]), round(last[0])]}


def stream_meta(path: str) -> dict[str, Any]:
    try:
        con = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
        row = con.execute("SELECT value FROM meta WHERE key='stream'").fetchone()
        n = con.execute("SELECT count(*) FROM stream").fetchone()[0] if row else 0
        con.close()
    except sqlite3.Error:
        return {}
    return {**json.loads(row[0]), "rows": n} if row else {}


def round_ratios(results: dict[str, list[dict[str, Any]]]) -> list[str]:
    """Each recorded run's mean step against the plain run of its own round (the runs of a round are back to
    back), and their median: between processes the same script's step time moves by several percent."""
    lines = []
    for name, runs in results.items():
        plain = {x["round"]: x["mean_step_ms"] for x in runs if x["variant"] == "plain" and x["mean_step_ms"]}
        for v in sorted({x["variant"] for x in runs} - {"plain"}):
            ratios = [x["mean_step_ms"] / plain[x["round"]] for x in runs
                      if x["variant"] == v and x["mean_step_ms"] and x["round"] in plain]  # fmt: skip
            if ratios:
                shown = ", ".join(f"{r:.3f}" for r in ratios)
                lines.append(
                    f"{name} {v} / its round's plain: {shown}; median {statistics.median(ratios):.3f}"
                )
    return lines


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--rounds", type=int, default=1)
    ap.add_argument("--gpt-steps", type=int, default=2500)
    ap.add_argument("--tiny-steps", type=int, default=20000)
    ap.add_argument("--subjects", default="gpt,tiny")
    ap.add_argument("--variants", default=",".join(VARIANTS), help="a subset of " + ",".join(VARIANTS))
    ap.add_argument("--timeout", type=float, default=300)
    ap.add_argument("--smoke", action="store_true", help="CPU: tiny sizes, checks the plumbing only")
    ap.add_argument("--out", default=os.environ.get("OUT") or os.path.join(ROOT, "bench_out"))
    ap.add_argument("--cpus", default="", help="run every variant on these CPUs (e.g. 0-7: the GPU's NUMA node's); "
                    "a loop of tiny ops is as fast as the core it runs on")  # fmt: skip
    a = ap.parse_args()
    cpus = parse_cpus(a.cpus) or None
    py = sys.executable
    subjects = {
        "gpt": ["examples/train_gpt.py", "--steps", str(a.gpt_steps)],
        "tiny": ["benchmarks/tiny_ops.py", "--steps", str(a.tiny_steps)],
    }
    if a.smoke:
        subjects = {"tiny": ["benchmarks/tiny_ops.py", "--steps", "30", "--warmup", "2"]}
    tmp = tempfile.mkdtemp(prefix="bench_stream_")
    results: dict[str, list[dict[str, Any]]] = {}
    for name in [s for s in a.subjects.split(",") if s in subjects]:
        script = subjects[name]
        for r in range(a.rounds):
            for v in [v for v in VARIANTS if v in a.variants.split(",")]:
                rec = os.path.join(tmp, f"{name}_{r}_{v}.brrr")
                extra = {"plain": None, "cupti": None, "windows": [], "stream": ["--stream"]}[v]
                if v == "cupti" and a.smoke:
                    continue  # needs libcupti and a GPU
                wrapper = ["-m", "benchmarks.cupti_only"] if v == "cupti" else []
                cmd = [py, *wrapper, *script] if extra is None else [
                    py, "-m", "brrrtui", "record", "--no-calibrate", *extra, "-o", rec, *script]  # fmt: skip
                res = run(cmd, a.timeout, cpus)
                res.update(variant=v, round=r, memory=memory_growth(res.pop("mem")))
                if extra is not None and os.path.exists(rec):
                    res["recording"] = recording_stats(rec)
                    res["stream"] = stream_meta(rec)
                results.setdefault(name, []).append(res)
                os.makedirs(a.out, exist_ok=True)
                with open(os.path.join(a.out, "bench_stream.partial.json"), "w") as f:  # kept if cut short
                    json.dump({"results": results, "argv": sys.argv}, f, indent=1)
                print(name, r, v, json.dumps({k: res.get(k) for k in ("rc", "wall_s", "mean_step_ms", "longest_step_ms", "memory", "stream")}),
                      flush=True)  # fmt: skip
    table = ["| subject | variant | ms/step (mean) | slowdown vs plain | longest step ms | windows | "
             "longest stall ms | stream rows | latency p50 / p99 ms | recorder RSS MB (¼ → end) | "
             "script RSS MB (¼ → end) |", "|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|"]  # fmt: skip
    for name, runs in results.items():
        base = [x["mean_step_ms"] for x in runs if x["variant"] == "plain" and x["mean_step_ms"]]
        b = statistics.median(base) if base else None
        for x in runs:
            m, st, rc, mem = x["mean_step_ms"], x.get("stream") or {}, x.get("recording") or {}, x["memory"]
            slow = f"{m / b:.3f}" if m and b else "—"
            recorded = x["variant"] in (
                "windows",
                "stream",
            )  # else the script is the process bench_stream started
            lat = f"{st['latency_p50_ms']:.0f} / {st['latency_p99_ms']:.0f}" if st.get("records") else "—"

            def pair(k: str, mem: dict[str, Any] = mem) -> str:
                v = mem.get(k)
                return f"{v[0]:.0f} → {v[1]:.0f}" if v and v[0] and v[1] else "—"

            table.append(f"| {name} | {x['variant']} | {m if m else '—'} | {slow} | {x.get('longest_step_ms') or '—'} | "
                         f"{rc.get('windows', '—')} | "
                         f"{rc.get('longest_stall_ms', '—')} | {st.get('rows', '—')} | {lat} | "
                         f"{pair('parent_mb') if recorded else '—'} | "
                         f"{pair('child_mb') if recorded else pair('parent_mb')} |")  # fmt: skip
    table += ["", *round_ratios(results)]
    text = "\n".join(table)
    print(text)
    os.makedirs(a.out, exist_ok=True)
    with open(os.path.join(a.out, "bench_stream.json"), "w") as f:
        json.dump({"results": results, "table": text, "argv": sys.argv}, f, indent=1)
    return 0 if all(x["rc"] == 0 for runs in results.values() for x in runs) else 1


if __name__ == "__main__":
    sys.exit(main())
