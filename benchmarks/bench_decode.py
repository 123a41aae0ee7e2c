"""The kernel stream's cost in the script's process, per record: from a CUPTI buffer to a pickled message.

    python -m benchmarks.bench_decode                        # baseline: records.py at --baseline-rev
    python -m benchmarks.bench_decode --baseline-rev b48bb11

The buffer is the real H200 one of tests/fixtures/cupti_buffer_h200.json.gz (63 kernel, memcpy and memset
records) repeated to CUPTI's 256 KB buffer size, as the flush thread sees it. Both implementations run the
work (a buffer to a message for the recorder, strings interned) in the same process; the baseline module is
loaded from git, so the ratio compares code, not machines. Prints microseconds per record. Numpy's GIL
releases, which made the baseline far slower beside a busy main thread, are not in these figures.
"""

from __future__ import annotations

import argparse
import gzip
import importlib.util
import json
import os
import pickle
import statistics
import subprocess
import sys
import tempfile
import time

from brrrtui.capture.convert import Interner
from brrrtui.contract import cupti_records as records

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def load_buffer(target_bytes: int = 256 << 10) -> tuple[bytes, dict[int, int], dict[int, str]]:
    with gzip.open(os.path.join(ROOT, "tests", "fixtures", "cupti_buffer_h200.json.gz")) as f:
        fx = json.load(f)
    one = gzip.decompress(bytes.fromhex(fx["buffers"][0]["hex_gz"]))
    sizes = {int(k): v for k, v in fx["sizes"].items()}
    names = {int(k): v for k, v in fx["names"].items()}
    return one * max(1, target_bytes // len(one)), sizes, names


def module_at(rev: str):  # noqa: ANN201 - a module
    text = subprocess.run(["git", "show", f"{rev}:brrrtui/capture/records.py"], cwd=ROOT, check=True,
                          capture_output=True, text=True).stdout  # fmt: skip
    path = os.path.join(tempfile.mkdtemp(), f"records_{rev}.py")
    with open(path, "w") as f:
        f.write(text)
    spec = importlib.util.spec_from_file_location(f"records_{rev}", path)
    assert spec and spec.loader
    mod = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = mod  # dataclasses look their module up
    spec.loader.exec_module(mod)
    return mod


def baseline_us(mod, data: bytes, sizes: dict[int, int], names: dict[int, str], repeat: int) -> float:  # noqa: ANN001
    """records.py up to b48bb11: walk, numpy decode, per-record strings and row tuples, all in the script."""
    cache: dict[int, str] = {}

    def name_of(p: int) -> str:  # the stream's pointer cache in front of the real lookup
        s = cache.get(p)
        if s is None:
            s = cache[p] = names[p]
        return s

    times, n = [], 0
    for _ in range(repeat):
        intern = Interner()
        t0 = time.perf_counter_ns()
        d = mod.decode(data, mod.walk(data, sizes), name_of)
        d = mod.take(d, mod.complete(d))
        rows = mod.to_rows(d, 3, 1000, intern)
        pickle.dumps({"type": "batch", "strings": intern.take_new(), "stream": rows}, protocol=5)
        times.append(time.perf_counter_ns() - t0)
        n = len(d)
    return statistics.median(times) / 1e3 / n


def scan_us(data: bytes, sizes: dict[int, int], names: dict[int, str], repeat: int) -> tuple[float, float]:
    """This tree: (script side: scan + pickle of the raw message, recorder side: unpickle + rows_from_scan)."""
    ids = records.ScanIds(Interner(), names.__getitem__)  # caches persist across flushes, as in the stream
    script, recorder, n = [], [], 0
    for _ in range(repeat):
        ids.names.clear()  # as after a window: name pointers resolved again
        t0 = time.perf_counter_ns()
        found = records.Scanned.empty()
        assert records.scan(data, sizes, 0, found, ids)
        msg = pickle.dumps({"type": "batch", "stream_raw": {"data": data, "parts": [(3, 1000, len(found))],
                            "offsets": found.offsets, "names": found.names,
                            "shapes": found.shapes}}, protocol=5)  # fmt: skip
        t1 = time.perf_counter_ns()
        raw = pickle.loads(msg)["stream_raw"]
        rows, _ = records.rows_from_scan(raw["data"], raw["parts"], records.Scanned(
            raw["offsets"], raw["names"], raw["shapes"]))  # fmt: skip
        t2 = time.perf_counter_ns()
        script.append(t1 - t0)
        recorder.append(t2 - t1)
        n = len(rows)
    return statistics.median(script) / 1e3 / n, statistics.median(recorder) / 1e3 / n


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--baseline-rev", default="b48bb11", help="git revision of the baseline records.py")
    p.add_argument("--repeat", type=int, default=30)
    args = p.parse_args()
    data, sizes, names = load_buffer()
    base = baseline_us(module_at(args.baseline_rev), data, sizes, names, args.repeat)
    script, recorder = scan_us(data, sizes, names, args.repeat)
    print(f"buffer: {len(data):,} bytes (the H200 fixture's 63 kernels, copies and fills, repeated)")
    print(f"script's process, baseline (records.py at {args.baseline_rev}): {base:6.2f} us/record")
    print(
        f"script's process, this tree (scan):            {script:6.2f} us/record   ({base / script:.1f}x less)"
    )
    print(f"recorder, this tree (rows_from_scan):          {recorder:6.2f} us/record")


if __name__ == "__main__":
    main()
