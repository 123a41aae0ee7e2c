"""How long does `brrrtui report --json` take on a big recording, and how much memory, before and after?

    git worktree add /tmp/base <old commit>
    python -m benchmarks.bench_analyze --kernels 100000,300000,1000000 --baseline /tmp/base --repeat 3
    python -m benchmarks.bench_analyze --kernels 200000 --keep /tmp/bench      # no baseline; keep the files

For each size, a synthetic training run (benchmarks/synthetic_run.py: 3 ops, 1 span, 1 launch per kernel) is
written twice: as today's recording (format 2, columnar) and as a format 1 recording (one SQL row per record,
what brrrtui wrote before). Then, each in a fresh process:

- `report --json` of today's code on the format 2 file, and on the format 1 file (the compatibility reader);
- `report --json` of the `--baseline` checkout's code on the format 1 file (the code before, on the files it
  wrote), in the same run, so the ratio compares like with like on this machine's load;
- load_recording + analyze of today's code on the format 2 file, timed apart (where the time goes).

With --repeat N each command runs N times, interleaved, and the fastest run is reported (the machine is
shared: a busy spell slows whichever command it falls on). Wall time is the whole command (interpreter start, imports, load, analysis, JSON to /dev/null); CPU time is the command's user + system time (`os.wait4`), which other sessions' load on the shared cores inflates less than the wall time. Peak RSS is
measured from outside: a small launcher process starts each command and reads its `ru_maxrss` with
`os.wait4`. The launcher matters: Linux carries the peak RSS of the process that forked across `exec`, so
this script (which holds the generated run, hundreds of MB) must not be the parent of the measured command,
and measuring from inside the command (`getrusage(RUSAGE_SELF)`) shows the same inherited peak.

A benchmark, not a test: nothing is asserted.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from typing import Any

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

LAUNCHER = """
import json, os, subprocess, sys, time
t0 = time.perf_counter()
with open(os.devnull, "w") as null:
    p = subprocess.Popen(sys.argv[2:], cwd=sys.argv[1], stdout=null, stderr=subprocess.PIPE)
    err = p.stderr.read()
    _, status, usage = os.wait4(p.pid, 0)
    p.returncode = 0
print(json.dumps({"wall_s": time.perf_counter() - t0, "cpu_s": usage.ru_utime + usage.ru_stime,
                  "peak_rss_mb": usage.ru_maxrss / 1024,
                  "status": status, "stderr": err.decode(errors="replace")[-400:]}))
"""


_COMPILED: set[str] = set()


def compile_checkout(root: str) -> None:
    """Write the bytecode of `root`'s brrrtui and analyzers once, as an installed package has it: where
    PYTHONDONTWRITEBYTECODE is set (as on the CI machines) every run would otherwise compile every module
    it imports (~0.14 s of a report's start)."""
    if root not in _COMPILED:
        folders = [os.path.join(root, d) for d in ("brrrtui", "analyzers")]
        subprocess.run([sys.executable, "-m", "compileall", "-q", *folders], check=True, capture_output=True)
        _COMPILED.add(root)


def commit_of(root: str) -> str:
    """The short commit a checkout is at (empty outside git, or without git: the GPU machine's copy)."""
    try:
        p = subprocess.run(["git", "-C", root, "rev-parse", "--short", "HEAD"], capture_output=True, text=True)
    except OSError:
        return ""
    return p.stdout.strip()


def checkouts(baseline: str | None) -> dict[str, str]:
    """The code each benchmark compares: "today" (this checkout), and "baseline" (another one, a git worktree)
    when given."""
    return {"today": ROOT, **({"baseline": os.path.abspath(baseline)} if baseline else {})}


def child_env(root: str) -> dict[str, str]:
    """The environment of a process that imports brrrtui from checkout `root`: `root` first on its import path,
    and not the current folder before it (`-c` and `-m` put it first otherwise)."""
    return dict(os.environ, PYTHONPATH=root, PYTHONSAFEPATH="1")


def run_child(code: str, root: str, *args: str) -> dict[str, Any]:
    """`python -c code root args...` in a fresh process that imports `root`'s code (bytecode written first),
    run in `root` with the arguments that name files made absolute; the JSON object its last line of output
    prints. A failure ends the benchmark with the child's error."""
    compile_checkout(root)
    args = tuple(os.path.abspath(a) if os.path.exists(a) else a for a in args)
    p = subprocess.run(
        [sys.executable, "-c", code, root, *args], capture_output=True, text=True, env=child_env(root), cwd=root
    )
    if p.returncode != 0:
        raise SystemExit(f"{root} {' '.join(args)}: exit {p.returncode}: {p.stderr.strip()[-600:]}")
    out: dict[str, Any] = json.loads(p.stdout.strip().splitlines()[-1])
    return out


def measure(root: str, args: list[str], python: str = sys.executable) -> dict[str, float] | str:
    """Run `python args...` with `root` as cwd and import path, through the launcher (bytecode written
    first)."""
    compile_checkout(root)
    env = dict(os.environ, PYTHONPATH=root)
    proc = subprocess.run(
        [sys.executable, "-c", LAUNCHER, root, python, *args], capture_output=True, text=True, env=env
    )
    try:
        out = json.loads(proc.stdout.strip().splitlines()[-1])
    except (IndexError, ValueError):
        return f"launcher failed: {proc.stderr.strip()[-300:]}"
    if out["status"] != 0:
        return f"exit status {out['status']}: {out['stderr'].strip().splitlines()[-1:]}"
    return out


def child(path: str) -> None:
    """load_recording + analyze, timed apart (run through the launcher)."""
    t0 = time.perf_counter()
    from analyzers.analyze import analyze
    from brrrtui.recording.store import load_recording

    t1 = time.perf_counter()
    trace = load_recording(path)
    t2 = time.perf_counter()
    analyze(trace)
    t3 = time.perf_counter()
    print(json.dumps({"import_s": t1 - t0, "load_s": t2 - t1, "analyze_s": t3 - t2}), file=sys.stderr)


def split(root: str, path: str) -> dict[str, float] | str:
    r = measure(root, [os.path.abspath(__file__), "--child", path])
    if isinstance(r, str):
        return r
    return {**json.loads(r.pop("stderr").strip().splitlines()[-1]), **r}


def one_size(
    n: int, work: str, baseline: str | None, repeat: int, baseline_v2: bool = False
) -> list[tuple[str, str, float, dict[str, float] | str]]:
    from benchmarks.synthetic_run import generate, write_recording, write_recording_v1

    t = time.perf_counter()
    trace = generate(n)
    print(f"{n:,} kernels: {len(trace.ops):,} ops, {len(trace.runtime):,} launches, {len(trace.spans):,} spans,"
          f" {len(trace.windows)} windows, generated in {time.perf_counter() - t:.1f} s")  # fmt: skip
    v2, v1 = os.path.join(work, f"run{n}.v2.brrr"), os.path.join(work, f"run{n}.v1.brrr")
    for path, write in ((v2, write_recording), (v1, write_recording_v1)):
        if os.path.exists(path):
            os.remove(path)
        t = time.perf_counter()
        write(trace, path)
        print(f"  wrote {path} ({os.path.getsize(path) / 1e6:.0f} MB) in {time.perf_counter() - t:.1f} s")
    del trace
    mb = {v2: os.path.getsize(v2) / 1e6, v1: os.path.getsize(v1) / 1e6}
    report = ["-m", "brrrtui", "report", "--json"]
    commands: list[tuple[str, str, str, Callable[[], dict[str, float] | str]]] = [
        ("today", "1", v1, lambda: measure(ROOT, [*report, v1])),
        ("today", "2", v2, lambda: measure(ROOT, [*report, v2])),
        ("today load|analyze", "2", v2, lambda: split(ROOT, v2)),
    ]
    if baseline:
        commands.insert(0, ("baseline", "1", v1, lambda: measure(baseline, [*report, v1])))
        if baseline_v2:  # the baseline's code reads format 2 too: the same file, only the code differs
            commands.insert(1, ("baseline", "2", v2, lambda: measure(baseline, [*report, v2])))
    results: list[list[dict[str, float] | str]] = [[] for _ in commands]
    for _ in range(repeat):  # interleaved, so that a busy spell of the machine hits every command alike
        for i, (*_, command) in enumerate(commands):
            results[i].append(command())
    return [(code, fmt, mb[path], best(r)) for (code, fmt, path, _), r in zip(commands, results, strict=True)]


def best(runs: list[dict[str, float] | str]) -> dict[str, float] | str:
    """The fastest of repeated runs (the least disturbed by other work on the machine), or the first error."""
    done = [r for r in runs if isinstance(r, dict)]
    return min(done, key=lambda r: r["wall_s"]) if done else runs[0]


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--kernels", default="1000000", help="comma-separated sizes (default 1000000)")
    p.add_argument("--baseline", metavar="DIR", help="a checkout of the code to compare with (git worktree)")
    p.add_argument("--keep", metavar="DIR", help="write the files here and keep them")
    p.add_argument("--repeat", type=int, default=1, help="run each command N times, report the fastest")
    p.add_argument("--baseline-v2", action="store_true", help="also the baseline's code on the format 2 file")
    p.add_argument("--child", metavar="PATH", help=argparse.SUPPRESS)
    ns = p.parse_args()
    if ns.child:
        child(ns.child)
        return 0
    work = ns.keep or tempfile.mkdtemp(prefix="brrr-bench-")
    os.makedirs(work, exist_ok=True)
    base = commit_of(ns.baseline) if ns.baseline else "-"
    print(f"today: {ROOT} at {commit_of(ROOT)} (plus uncommitted changes, if any); "
          f"baseline: {ns.baseline or '-'} at {base}")  # fmt: skip
    table = []
    for n in (int(k) for k in ns.kernels.split(",")):
        table += [(n, *r) for r in one_size(n, work, ns.baseline, ns.repeat, ns.baseline_v2)]
    print(f"\n{'kernels':>9} {'code':<19} {'format':>6} {'file MB':>8} {'wall s':>7} {'CPU s':>6} {'peak RSS MB':>12}"
          f" {'RSS/file':>9}  split")  # fmt: skip
    for n, code, fmt, mb, r in table:
        if isinstance(r, str):
            print(f"{n:>9,} {code:<19} {fmt:>6} {mb:>8.0f} failed: {r}")
            continue
        extra = (
            f" import {r['import_s']:.2f} + load {r['load_s']:.2f} + analyze {r['analyze_s']:.2f} s"
            if "load_s" in r
            else ""
        )
        print(f"{n:>9,} {code:<19} {fmt:>6} {mb:>8.0f} {r['wall_s']:>7.2f} {r['cpu_s']:>6.2f} {r['peak_rss_mb']:>12.0f}"
              f" {r['peak_rss_mb'] / mb:>9.2f} {extra}")  # fmt: skip
    for n in sorted({row[0] for row in table}):
        got = {(code, fmt): r for k, code, fmt, _, r in table if k == n and isinstance(r, dict)}
        after = got.get(("today", "2"))
        for fmt in ("2", "1"):
            before = got.get(("baseline", fmt))
            if before and after:
                print(f"{n:>9,} kernels: report --json baseline (format {fmt}) / today (format 2) ="
                      f" {before['wall_s'] / after['wall_s']:.2f}x wall, {before['cpu_s'] / after['cpu_s']:.2f}x CPU,"
                      f" {before['peak_rss_mb'] / after['peak_rss_mb']:.2f}x peak RSS")  # fmt: skip
    if not ns.keep:
        for f in os.listdir(work):
            os.remove(os.path.join(work, f))
        os.rmdir(work)
    return 0


if __name__ == "__main__":
    sys.exit(main())
