"""`brrrtui export --perfetto` of a big recording: wall time, CPU time and peak RSS, today's code against a
baseline checkout's, in the same run.

    python -m benchmarks.bench_analyze --kernels 1000000 --keep /tmp/ba      # writes run1000000.v2.brrr
    python -m benchmarks.bench_export /tmp/ba/run1000000.v2.brrr --baseline <a checkout> [--repeat 1] [--gzip]

Each export runs in a fresh process started by bench_analyze's launcher (`os.wait4`: the command's own CPU time
and peak RSS), today's and the baseline's alternating, and writes the trace under a temporary folder (removed
after). Printed per side: the fastest wall time, its CPU time, the lowest peak RSS and the file's size; then
baseline / today. A benchmark, not a test: nothing is asserted.
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile

from benchmarks.bench_analyze import checkouts, commit_of, measure


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("recording")
    ap.add_argument("--baseline", metavar="DIR", help="a checkout of the code to compare with")
    ap.add_argument("--repeat", type=int, default=1, help="exports of each (default 1)")
    ap.add_argument("--gzip", action="store_true", help="write .json.gz instead of .json")
    ns = ap.parse_args()
    path = os.path.abspath(ns.recording)
    roots = checkouts(ns.baseline)
    runs: dict[str, list[dict[str, float]]] = {k: [] for k in roots}
    sizes: dict[str, int] = {}
    with tempfile.TemporaryDirectory(prefix="brrrtui-export-") as work:
        for _ in range(ns.repeat):
            for name, root in roots.items():  # alternating: the machine's load falls on both alike
                out = os.path.join(work, f"{name}.json" + (".gz" if ns.gzip else ""))
                r = measure(root, ["-m", "brrrtui", "export", "--perfetto", out, path])
                if isinstance(r, str):
                    raise SystemExit(f"{name}: {r}")
                runs[name].append(r)
                sizes[name] = os.path.getsize(out)
                os.remove(out)
    print(f"{path}: {os.path.getsize(path) / 1e6:.0f} MB")
    best = {}
    for name, root in roots.items():
        fastest = min(runs[name], key=lambda r: r["wall_s"])
        best[name] = fastest | {"peak_rss_mb": min(r["peak_rss_mb"] for r in runs[name])}
        b = best[name]
        print(
            f"{name:9} {commit_of(root)}: wall {b['wall_s']:.1f} s  CPU {b['cpu_s']:.1f} s"
            f"  peak RSS {b['peak_rss_mb']:.0f} MiB  file {sizes[name] / 1e6:.0f} MB  (fastest of {ns.repeat})"
        )
    if "baseline" in best:
        for key, label in (("wall_s", "wall time"), ("cpu_s", "CPU time"), ("peak_rss_mb", "peak RSS")):
            print(f"baseline / today, {label}: {best['baseline'][key] / best['today'][key]:.1f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
