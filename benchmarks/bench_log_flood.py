"""Does a script that floods stdout starve the live UI? Key-to-handled latency with and without a flood.

    python -m benchmarks.bench_log_flood [--flood-s 10] [--after-s 5] [--every-ms 50] [--repeat N]
                                         [--baseline DIR] [--control]

The live pipeline as `brrrtui SCRIPT` builds it (a Recorder capturing the script's output into a Feed, the app
draining it), the app headless (Textual's run_test, 120x40), in a fresh process per run. The script writes
64-byte lines to stdout as fast as it can for `--flood-s` seconds, then sleeps `--after-s` seconds; the
baseline run ("no flood") is the same script writing nothing, measured in the same run.

Every `--every-ms` a key (`p`, pause: an app-level key handled whatever pane has focus) is queued as the
terminal driver queues one (App.simulate_key); its latency is the time from then to its action running
(key-to-handled), and, apart, to the end of the screen refresh after it (key-to-repainted, a
call_after_refresh made in the action). Percentiles are given during the flood and after
it (until the end of the run), with the peak RSS of the process and how many lines the script printed and the
log pane wrote. Target: p99 under 100 ms during and after the flood. A benchmark, not a test: nothing is
asserted.

`--repeat N` measures N times; `--baseline DIR` (a checkout of another commit: `git worktree add DIR COMMIT`)
runs the same flood with that code right after each of this tree's, and `--control` a script as busy for as
long that prints nothing (what a busy neighbour alone costs the keys, on this machine, then); a last table
gives every run's p99 during and after the flood, with their median and worst. The machine's load changes
from run to run: compare within a run.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
from statistics import median

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

FLOOD = """
import sys, time
flood_s, after_s = float(sys.argv[1]), float(sys.argv[2])
line = "step 123 loss 0.1234567 " + "x" * 39 + "\\n"
spin = sys.argv[4:] == ["spin"]  # the control: as busy, printing nothing
n, w = 0, (lambda s: None) if spin else sys.stdout.write
t_end = time.monotonic() + flood_s
while time.monotonic() < t_end:
    for _ in range(1000):
        w(line)
    n += 1000
sys.stdout.flush()
open(sys.argv[3], "w").write(str(0 if spin else n))
time.sleep(after_s)
"""

CHILD = """
import asyncio, json, os, resource, sys, time
from brrrtui.record.feed import Feed
from brrrtui.record.recorder import Recorder, RunSpec
from brrrtui.tui.app import make_app
script, out, flood_s, after_s, every = sys.argv[2], sys.argv[3], float(sys.argv[4]), float(sys.argv[5]), float(sys.argv[6])

async def main():
    feed = Feed()
    rec = Recorder(RunSpec([script, str(flood_s), str(after_s), out + ".printed", *sys.argv[7:]], out, capture_output=True), feed=feed)
    rec.start()
    rec.wait_in_background()
    app = make_app(out, feed=feed, script="flood.py")
    sent, handled, painted = [], [], []
    real = app.action_toggle_pause
    def timed():
        handled.append(time.perf_counter())
        app.call_after_refresh(lambda: painted.append(time.perf_counter()))
        real()
    app.action_toggle_pause = timed
    ticks = []
    real_drain = app.drain_feed
    def timed_drain():
        t = time.perf_counter()
        real_drain()
        ticks.append((t, time.perf_counter() - t))
    app.drain_feed = timed_drain
    try:
        async with app.run_test(size=(120, 40)) as pilot:
            t0 = time.perf_counter()
            end = t0 + flood_s + after_s
            while time.perf_counter() < end:
                sent.append(time.perf_counter())
                app.simulate_key("p")  # queued as a key from the terminal is
                await asyncio.sleep(every)
            deadline = time.perf_counter() + 10
            while len(painted) < len(sent) and time.perf_counter() < deadline:
                await asyncio.sleep(0.05)
            log = app.main.log_pane.lines_written
    finally:
        rec.finish()
    keys = [(s - t0, handled[k] - s if k < len(handled) else None, painted[k] - s if k < len(painted) else None)
            for k, s in enumerate(sent)]
    printed = int(open(out + ".printed").read()) if os.path.exists(out + ".printed") else 0
    rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    ticks = [(t - t0, d) for t, d in ticks if t >= t0]
    print(json.dumps({"keys": keys, "log_lines": log, "printed": printed, "peak_rss_mb": rss, "ticks": ticks}))

asyncio.run(main())
"""


def run(
    flood_s: float, after_s: float, every_s: float, work: str, root: str = ROOT, spin: bool = False
) -> dict:
    script = os.path.join(work, "flood.py")
    with open(script, "w") as f:
        f.write(FLOOD)
    out = os.path.join(work, f"flood{flood_s}-{len(os.listdir(work))}.brrr")
    args = [sys.executable, "-c", CHILD, root, script, out, str(flood_s), str(after_s), str(every_s)]
    args += ["spin"] if spin else []
    env = dict(os.environ, PYTHONPATH=root, PYTHONSAFEPATH="1")  # `root`'s brrrtui, not the current folder's
    p = subprocess.run(args, capture_output=True, text=True, cwd=work, env=env)
    if p.returncode != 0:
        raise SystemExit(f"exit {p.returncode}: {p.stderr.strip()[-800:]}")
    return json.loads(p.stdout.strip().splitlines()[-1])


def pct(xs: list[float], q: float) -> float:
    xs = sorted(xs)
    return xs[min(len(xs) - 1, int(round(q / 100 * (len(xs) - 1))))] if xs else float("nan")


def summary(label: str, keys: list[tuple], col: int) -> tuple[str, float]:
    xs = [k[col] * 1e3 for k in keys if k[col] is not None]
    lost = sum(1 for k in keys if k[col] is None)
    p99 = pct(xs, 99)
    text = (f"{label:34} {len(xs):5d} {pct(xs, 50):8.1f} {pct(xs, 95):8.1f} {p99:8.1f} {max(xs, default=0):8.1f}"
            + (f"  ({lost} keys not handled)" if lost else ""))  # fmt: skip
    return text, p99


def report(base: dict, flood: dict, flood_s: float, after_s: float) -> None:
    during = [k for k in flood["keys"] if k[0] < flood_s]
    after = [k for k in flood["keys"] if k[0] >= flood_s]
    for col, what in ((1, "key sent -> its action ran"), (2, "key sent -> the screen repainted")):
        print(f"\n{what} (ms){'':10} {'keys':>5} {'p50':>8} {'p95':>8} {'p99':>8} {'max':>8}")
        b, pb = summary("no flood (baseline)", base["keys"], col)
        d, pd = summary(f"flood, first {flood_s:g} s", during, col)
        a, pa = summary(f"flood, the {after_s:g} s after", after, col)
        print(b, d, a, sep="\n")
        print(f"p99 ratio to the baseline: during {pd / pb:.2f}, after {pa / pb:.2f}")
    print(f"\n{'feed drain (ms, every 0.15 s)':34} {'ticks':>5} {'p50':>8} {'p95':>8} {'p99':>8} {'max':>8}")
    for label, rows in (
        ("no flood (baseline)", base["ticks"]),
        (f"flood, first {flood_s:g} s", [t for t in flood["ticks"] if t[0] < flood_s]),
        (f"flood, the {after_s:g} s after", [t for t in flood["ticks"] if t[0] >= flood_s]),
    ):
        print(summary(label, [(t, d) for t, d in rows], 1)[0])
    print(f"\nthe script printed {flood['printed']:,} lines; the log pane took {flood['log_lines']:,}")
    print(f"peak RSS: flood {flood['peak_rss_mb']:.0f} MB, no flood {base['peak_rss_mb']:.0f} MB")


def p99s(flood: dict, flood_s: float) -> tuple[float, float, int]:
    """Key-to-handled p99 during and after the flood (ms), and the lines the script printed."""
    during = [k[1] * 1e3 for k in flood["keys"] if k[0] < flood_s and k[1] is not None]
    after = [k[1] * 1e3 for k in flood["keys"] if k[0] >= flood_s and k[1] is not None]
    return pct(during, 99), pct(after, 99), flood["printed"]


def runs_table(rows: dict[str, list[tuple[float, float, int]]]) -> None:
    print(f"\n{'key sent -> its action ran, p99 (ms)':40} {'during':>8} {'after':>8} {'printed':>11}")
    for label, runs in rows.items():
        for k, (d, a, n) in enumerate(runs, 1):
            print(f"{label + f', run {k}':40} {d:8.1f} {a:8.1f} {n:11,}")
    for label, runs in rows.items():
        d, a = sorted(r[0] for r in runs), sorted(r[1] for r in runs)
        print(f"{label}: during median {median(d):.1f}, worst {d[-1]:.1f}; after median {median(a):.1f}, "
              f"worst {a[-1]:.1f} (ms, {len(runs)} runs)")  # fmt: skip


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--flood-s", type=float, default=10.0)
    ap.add_argument("--after-s", type=float, default=5.0)
    ap.add_argument("--every-ms", type=float, default=50.0)
    ap.add_argument("--repeat", type=int, default=1)
    ap.add_argument(
        "--baseline", help="a checkout of another commit, measured after each of this tree's runs"
    )
    ap.add_argument(
        "--control", action="store_true", help="also: the script as busy for --flood-s, printing nothing"
    )
    ns = ap.parse_args()
    work = tempfile.mkdtemp(prefix="brrrtui-flood-")
    every = ns.every_ms / 1e3
    rows: dict[str, list[tuple[float, float, int]]] = {"this tree": []}
    if ns.baseline:
        rows[f"baseline {os.path.basename(os.path.abspath(ns.baseline))}"] = []
    for k in range(ns.repeat):
        base = run(0.0, ns.flood_s + ns.after_s, every, work)
        flood = run(ns.flood_s, ns.after_s, every, work)
        print(f"\n=== run {k + 1} of {ns.repeat}: this tree")
        report(base, flood, ns.flood_s, ns.after_s)
        rows["this tree"].append(p99s(flood, ns.flood_s))
        if ns.baseline:
            old = run(ns.flood_s, ns.after_s, every, work, os.path.abspath(ns.baseline))
            print(f"\n=== run {k + 1} of {ns.repeat}: baseline {ns.baseline}")
            report(base, old, ns.flood_s, ns.after_s)
            rows[list(rows)[1]].append(p99s(old, ns.flood_s))
        if ns.control:
            busy = run(ns.flood_s, ns.after_s, every, work, spin=True)
            print(f"\n=== run {k + 1} of {ns.repeat}: this tree, the script busy printing nothing (control)")
            report(base, busy, ns.flood_s, ns.after_s)
            rows.setdefault("control: busy, no output", []).append(p99s(busy, ns.flood_s))
    runs_table(rows)
    return 0


if __name__ == "__main__":
    sys.exit(main())
