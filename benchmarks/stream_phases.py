"""Where a streamed kernel's delivery time goes inside the script's process, batch by batch.

    python -m benchmarks.stream_phases --out DIR -- benchmarks/tiny_ops.py --steps 4000
    python -m benchmarks.stream_phases --summarize DIR/stream_log.jsonl

Runs `brrrtui record --stream` on the script with BRRRTUI_STREAM_LOG (a JSON line per CUPTI buffer handed
over, per flush-thread wake-up and per batch: scan wall and CPU time, waits, send), then prints the slowest
batches with their phases and the totals: a batch that waited seconds shows which phase took them. (Dumping
every thread's stack with faulthandler.dump_traceback_later instead crashed the script on the H200: it reads
frames without the GIL.)
"""

from __future__ import annotations

import argparse
import json
import os
import sqlite3
import subprocess
import sys
from typing import Any


def summarize(log_path: str) -> dict[str, Any]:
    events = [json.loads(line) for line in open(log_path)]
    batches = [e for e in events if e["event"] == "batch"]
    loops = [e for e in events if e["event"] == "loop"]
    t0 = events[0]["t_ns"] if events else 0
    for e in events:
        e["at_s"] = round((e["t_ns"] - t0) / 1e9, 3)
    slow = sorted(batches, key=lambda b: -b["oldest_age_ms"] - b["scan_ms"] - b["send_ms"])[:5]

    def total(key: str, rows: list[dict[str, Any]]) -> float:
        return round(sum(r[key] for r in rows), 1)

    return {
        "batches": len(batches),
        "records": sum(b["records"] for b in batches),
        "scan_ms": total("scan_ms", batches),
        "scan_cpu_ms": total("scan_cpu_ms", batches),
        "send_ms": total("send_ms", batches),
        "intern_wait_ms": total("intern_wait_ms", batches),
        "late_wake_ms_max": round(max((e["late_wake_ms"] for e in loops), default=0), 1),
        "lock_wait_ms_max": round(max((e["lock_wait_ms"] for e in loops), default=0), 1),
        "flush_ms_max": round(max((e["flush_ms"] for e in loops), default=0), 1),
        "buffers_by_thread": {t: sum(1 for e in events if e["event"] == "buffer" and e["thread"] == t)
                              for t in {e["thread"] for e in events if e["event"] == "buffer"}},  # fmt: skip
        "slowest_batches": slow,
        "pauses_s": [e["at_s"] for e in events if e["event"] == "pause"],
        "resumes_s": [e["at_s"] for e in events if e["event"] == "resume"],
    }


def main() -> int:
    p = argparse.ArgumentParser()
    p.add_argument("--out", help="folder for the recording, the log and summary.json")
    p.add_argument("--summarize", help="only summarize this log")
    p.add_argument("--gil-watch", action="store_true", help="benchmarks/gilwatch in every process: who held the GIL")
    p.add_argument("script", nargs=argparse.REMAINDER)
    a = p.parse_args()
    if a.summarize:
        print(json.dumps(summarize(a.summarize), indent=1))
        return 0
    if not a.out or not a.script:
        p.error("--out DIR and a script are required")
    os.makedirs(a.out, exist_ok=True)
    script = a.script[1:] if a.script[0] == "--" else a.script
    log, rec = os.path.join(a.out, "stream_log.jsonl"), os.path.join(a.out, "run.brrr")
    env = {**os.environ, "BRRRTUI_STREAM_LOG": log}
    if a.gil_watch:
        here = os.path.join(os.path.dirname(os.path.abspath(__file__)), "gilwatch")
        env["PYTHONPATH"] = os.pathsep.join(filter(None, [here, env.get("PYTHONPATH")]))
        env["GIL_WATCH_DIR"] = os.path.join(a.out, "gil")
    cmd = [sys.executable, "-m", "brrrtui", "record", "--stream", "--no-calibrate", "-o", rec, *script]
    proc = subprocess.run(cmd, env=env, capture_output=True, text=True)
    print(proc.stderr[-3000:], proc.stdout[-500:])
    out = summarize(log) if os.path.exists(log) else {"error": "no log"}
    out["command"] = " ".join(cmd)
    out["rc"] = proc.returncode
    if os.path.exists(rec):
        with sqlite3.connect(rec) as db:
            meta = dict(db.execute("select key, value from meta").fetchall())
        out["meta_stream"] = json.loads(meta.get("stream", "null"))
    with open(os.path.join(a.out, "summary.json"), "w") as f:
        json.dump(out, f, indent=1)
    print(json.dumps({k: v for k, v in out.items() if k != "slowest_batches"}, indent=1))
    for b in out.get("slowest_batches", []):
        print(json.dumps(b))
    return proc.returncode


if __name__ == "__main__":
    sys.exit(main())
