"""An hour of `--stream` on the CPU: the recording's size per hour, the recorder's memory and the time to open
the result, with the stream folded (brrrtui.record.fold) against the same run kept raw, in one call.

    python -m benchmarks.bench_stream_hour                      # one simulated hour, folded and raw
    python -m benchmarks.bench_stream_hour --minutes 5 --modes fold

The run is made of a real H200 recording (the demo's HF GPT-2 small training, bf16, fused AdamW): its steady
window is replayed every `--window-every` seconds (the default duty cycle's spacing on GPT-2) with its ops,
launches and line spans, every step's end time is sent, and between windows the kernels of the window's last
step are streamed step after step, in launch order, durations jittered by 3 %, at `--rate` kernels/s (the
H200's GPT-2 small streamed ~21 k/s), in batches of half a second. Everything goes through the recorder's own
writing path (Sink, StreamSide and, folded, StreamFolder; not the pipe or the CUPTI decoding), as fast as it
can: simulated time, not wall time.

Each mode runs in a fresh process started from a small launcher, whose peak RSS (`os.wait4`) is the recorder's
(with the generator's arrays); RSS is also sampled at a quarter of the run and at its end. Then `brrrtui report
--json FILE` opens the recording in a fresh process (best of --open-repeat). Writes bench_stream_hour.json to
--out (default $OUT, else ./bench_out).
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from typing import Any

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
DEMO = os.path.join(ROOT, "brrrtui", "commands", "demo_data", "h200_hf_gpt2.brrr.gz")


def rss_mb() -> float:
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    return 0.0


def simulate(path: str, fold: bool, minutes: float, rate: float, window_every: float) -> dict[str, Any]:
    """The run, in this process (the launcher's child)."""
    import numpy as np

    from brrrtui.contract.messages import WindowBatch
    from brrrtui.record.fold import StreamFolder
    from brrrtui.record.sink import Sink
    from brrrtui.record.stream_side import StreamSide
    from brrrtui.recording.load import load_gzipped_recording

    # the demo read as a recording, not through load_trace, which tunes the allocator for an analysis
    # (brrrtui.runtime.allocator): this process stands for the recorder, which keeps glibc's defaults
    demo = load_gzipped_recording(DEMO)
    win = int(demo.windows.window.max())
    sel = {t: np.nonzero(getattr(demo, t).window == win)[0] for t in ("gpu", "runtime", "ops", "spans")}
    tables = {t: getattr(demo, t).take(s) for t, s in sel.items()}
    wrow = demo.windows.take(np.nonzero(demo.windows.window == win)[0])
    # the stream's step: the window's last step, in launch order (what its template holds)
    g = tables["gpu"]
    last = int(wrow.last_step[0])
    t_hi = int(demo.steps.t_ns[demo.steps.step == last][0])
    t_lo = int(demo.steps.t_ns[demo.steps.step == last - 1][0])
    rt = tables["runtime"]
    launch = dict(zip(rt.correlation.tolist(), rt.start_ns.tolist(), strict=False))
    at = np.asarray([launch.get(c, -1) for c in g.correlation.tolist()])
    step_rows = np.nonzero((at > t_lo) & (at <= t_hi))[0]
    step_rows = step_rows[np.argsort(g.correlation[step_rows], kind="stable")]
    per_step = len(step_rows)
    step_ns = int(per_step / rate * 1e9)
    s0 = int(g.start_ns[step_rows].min())
    rel = g.start_ns[step_rows] - s0
    rel = (
        rel * min(1.0, step_ns / max(int((g.start_ns[step_rows] + g.dur_ns[step_rows]).max() - s0), 1))
    ).astype(np.int64)
    ncorr = int(g.correlation.max() - g.correlation.min()) + 1
    base = np.column_stack(
        [
            np.zeros(per_step, dtype=np.int64),
            g.kind[step_rows],
            g.name[step_rows],
            rel,
            g.dur_ns[step_rows],
            g.device[step_rows],
            g.stream[step_rows],
            g.correlation[step_rows] - int(g.correlation.min()),
            g.grid[step_rows],
            g.block[step_rows],
            g.bytes[step_rows],
        ]
    ).astype(np.int64)
    rng = np.random.default_rng(0)

    notes: list[str] = []
    sink = Sink(path, notes.append)
    sink.open()
    side = StreamSide(sink, StreamFolder() if fold else None, lambda _: None, None)
    sink.append(
        {
            "strings": list(enumerate(demo.strings)),
            "lines": [(i, ln.file, ln.line, ln.function) for i, ln in enumerate(demo.lines)],
        }
    )
    sink.set_meta(argv=["bench_stream_hour"], status="running", window_config={"stream": True})
    total_steps = int(minutes * 60e9 / step_ns)
    steps_per_window = max(1, int(window_every * 1e9 / step_ns))
    batch_steps = max(1, int(0.5e9 / step_ns))
    first_demo = int(wrow.first_step[0])
    demo_t = dict(zip(demo.steps.step.tolist(), demo.steps.t_ns.tolist(), strict=True))
    window_steps = last - first_demo + 1
    now = 1_800_000_000_000_000_000  # the end of the last step sent
    t0 = time.perf_counter()
    rss_quarter = None
    step = window = rows_streamed = 0
    corr = 10**9
    while step < total_steps:
        # a window: the demo's window replayed here, its steps and launches on this run's clock
        shift = now - demo_t[first_demo - 1]
        batch = _window_batch(
            tables, wrow, window, step, window_steps, shift, corr - int(g.correlation.min())
        )
        steps = [(step + k, demo_t[first_demo + k] + shift) for k in range(window_steps)]
        sink.append({"steps": steps})
        side.on_steps(steps)
        sink.append(batch)
        side.on_window(
            WindowBatch(
                window=tuple(int(v[0]) for v in batch["windows"].values()),
                capture_cost=(window, 0, 0),
                strings=[],
                lines=[],
                line_samples=[],
                gpu=batch["gpu"],
                runtime=batch["runtime"],
                ops=[],
                spans=[],
            )
        )
        corr += ncorr * 4
        step += window_steps
        now = steps[-1][1]
        # the stream until the next window, half a second a batch
        until = min(total_steps, step + steps_per_window)
        while step < until:
            n = min(batch_steps, until - step)
            rows = np.tile(base, (n, 1))
            k = np.repeat(np.arange(n, dtype=np.int64), per_step)
            rows[:, 0] = window
            rows[:, 3] += now + k * step_ns
            rows[:, 4] = (rows[:, 4] * rng.normal(1.0, 0.03, len(rows))).clip(1).astype(np.int64)
            rows[:, 7] += corr + k * ncorr
            side.append_rows(rows, [])
            steps = [(step + j, now + (j + 1) * step_ns) for j in range(n)]
            sink.append({"steps": steps})
            side.on_steps(steps)
            corr += n * ncorr
            step += n
            now = steps[-1][1]
            rows_streamed += len(rows)
            if rss_quarter is None and step >= total_steps / 4:
                rss_quarter = rss_mb()
        window += 1
    wall = time.perf_counter() - t0
    sink.set_meta(status="finished", exit_code=0, ended_at_ns=now)
    side.finish()
    sink.close()
    folder = side.folder
    return {
        "simulated_s": step * step_ns / 1e9,
        "kernels_per_step": per_step,
        "rate_per_s": per_step / (step_ns / 1e9),
        "stream_rows": rows_streamed,
        "windows": window,
        "wall_s": wall,
        "rss_quarter_mb": rss_quarter,
        "rss_end_mb": rss_mb(),
        "fold": folder.meta() if folder is not None else None,
        "notes": notes,
    }


def _window_batch(
    tables, wrow, window: int, step: int, steps: int, shift: int, cshift: int
) -> dict[str, Any]:  # type: ignore[no-untyped-def]
    """The demo's window as window `window` of this run: its rows' times shifted by `shift`, correlation ids by
    `cshift`, its steps renumbered from `step`."""
    import numpy as np

    batch: dict[str, Any] = {}
    for t, tab in tables.items():
        cols = dict(tab.columns)
        cols["window"] = np.full(len(tab), window, dtype=cols["window"].dtype)
        cols["start_ns"] = cols["start_ns"] + shift
        if "correlation" in cols:
            cols["correlation"] = np.where(cols["correlation"] >= 0, cols["correlation"] + cshift, -1)
        batch[t] = cols
    w = dict(wrow.columns)
    w.update(
        window=np.asarray([window]),
        start_ns=w["start_ns"] + shift,
        end_ns=w["end_ns"] + shift,
        first_step=np.asarray([step]),
        last_step=np.asarray([step + steps - 1]),
    )
    batch["windows"] = w
    return batch


def launch(argv: list[str], env: dict[str, str] | None = None) -> tuple[int, float, float]:
    """Run argv; (exit code, wall s, peak RSS MB of that process tree's largest process, from wait4)."""
    t0 = time.perf_counter()
    proc = subprocess.Popen(argv, stdout=subprocess.DEVNULL, env=env)
    _, status, usage = os.wait4(proc.pid, 0)
    return os.waitstatus_to_exitcode(status), time.perf_counter() - t0, usage.ru_maxrss / 1024


def run_mode(mode: str, ns: argparse.Namespace, folder: str) -> dict[str, Any]:
    path = os.path.join(folder, f"{mode}.brrr")
    result = os.path.join(folder, f"{mode}.json")
    argv = [
        sys.executable,
        "-m",
        "benchmarks.bench_stream_hour",
        "--child",
        mode,
        "--file",
        path,
        "--result",
        result,
    ]
    argv += ["--minutes", str(ns.minutes), "--rate", str(ns.rate), "--window-every", str(ns.window_every)]
    code, wall, peak = launch(
        argv, dict(os.environ, PYTHONPATH=ROOT)
    )  # this checkout's benchmarks and brrrtui
    if code:
        raise SystemExit(f"bench_stream_hour: the {mode} run failed (exit {code})")
    with open(result) as f:
        out: dict[str, Any] = json.load(f)
    size = os.path.getsize(path)
    hours = out["simulated_s"] / 3600
    out |= {"file_bytes": size, "bytes_per_hour": size / hours, "peak_rss_mb": peak, "process_wall_s": wall}
    opens = []
    from benchmarks.bench_analyze import (
        compile_checkout,  # here: the --child recorder process imports none of it
    )

    compile_checkout(ROOT)  # bytecode written first, as an installed package has it
    for _ in range(ns.open_repeat):
        rc, t, rss = launch([sys.executable, "-m", "brrrtui", "report", "--json", path])
        if rc:
            raise SystemExit(f"bench_stream_hour: report --json of the {mode} recording failed (exit {rc})")
        opens.append((t, rss))
    out["open_s"], out["open_peak_rss_mb"] = min(opens)
    if not ns.keep:
        os.remove(path)
    return out


def commit() -> str:
    try:
        return subprocess.run(
            ["git", "-C", ROOT, "rev-parse", "--short", "HEAD"], capture_output=True, text=True, check=True
        ).stdout.strip()
    except (OSError, subprocess.CalledProcessError):
        return "?"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--minutes", type=float, default=60.0, help="simulated minutes (default 60)")
    ap.add_argument(
        "--rate", type=float, default=21_000.0, help="streamed kernels per second (default 21000)"
    )
    ap.add_argument("--window-every", type=float, default=35.0, help="seconds between windows (default 35)")
    ap.add_argument("--modes", default="fold,raw", help="fold, raw or both (default fold,raw)")
    ap.add_argument("--open-repeat", type=int, default=2)
    ap.add_argument("--keep", help="keep the recordings in this folder")
    ap.add_argument("--out", default=os.environ.get("OUT") or "bench_out")
    ap.add_argument("--child", help=argparse.SUPPRESS)
    ap.add_argument("--file", help=argparse.SUPPRESS)
    ap.add_argument("--result", help=argparse.SUPPRESS)
    ns = ap.parse_args()
    if ns.child:
        out = simulate(ns.file, ns.child == "fold", ns.minutes, ns.rate, ns.window_every)
        with open(ns.result, "w") as f:
            json.dump(out, f)
        return
    started_at = commit()  # the code measured (HEAD may move while it runs)
    folder = ns.keep or tempfile.mkdtemp(prefix="brrrtui-hour-")
    os.makedirs(folder, exist_ok=True)
    results = {m: run_mode(m, ns, folder) for m in ns.modes.split(",")}
    cmd = "python -m benchmarks.bench_stream_hour " + " ".join(sys.argv[1:])
    print(f"# {cmd}   (commit {started_at})")
    print(
        f"# {ns.minutes:g} simulated minutes at {ns.rate:,.0f} kernels/s, a window every {ns.window_every:g} s"
    )
    print(
        "| mode | stream rows | file | per hour | sim wall s | recorder RSS ¼ → end (peak) | report --json |"
    )
    print("|---|---:|---:|---:|---:|---:|---:|")
    for m, r in results.items():
        print(
            f"| {m} | {r['stream_rows']:,} | {r['file_bytes'] / 1e6:,.0f} MB | {r['bytes_per_hour'] / 1e9:.2f} GB"
            f" | {r['wall_s']:.0f} | {r['rss_quarter_mb']:.0f} → {r['rss_end_mb']:.0f} ({r['peak_rss_mb']:.0f}) MB"
            f" | {r['open_s']:.2f} s, {r['open_peak_rss_mb']:.0f} MB |"
        )
    if "fold" in results and "raw" in results:
        f, r = results["fold"], results["raw"]
        print(
            f"fold / raw: size x{f['file_bytes'] / r['file_bytes']:.3f}, open x{f['open_s'] / r['open_s']:.2f},"
            f" peak RSS x{f['peak_rss_mb'] / r['peak_rss_mb']:.2f}"
        )
    os.makedirs(ns.out, exist_ok=True)
    with open(os.path.join(ns.out, "bench_stream_hour.json"), "w") as fh:
        json.dump({"command": cmd, "commit": started_at, "results": results}, fh, indent=1)


if __name__ == "__main__":
    main()
