"""Fuzz the recording reader over every table and column: does a crafted `.brrr` ever hang, crash or print a
traceback or terminal control?

    python -m benchmarks.fuzz_recordings --examples N [--jobs J] [--seed S] [--timeout-s T]

A small valid recording holds rows in two batches of every table brrrtui records (all 14, the stream's
aggregates included), names, source lines and meta. Each example (hypothesis draws them) applies one to
three edits to a copy of it: any cell of any batch of any table and column (the row count included) set to
NULL, a number, text, random bytes, a validly encoded array of odd values, or its own blob with a byte
flipped, cut short or extended; any row of the strings or lines table; any meta key; a table dropped, a
column added, a batch deleted or duplicated, a view or trigger planted; raw bytes of the file flipped.
`brrrtui report` then reads it in a worker process (the normal suite's tests/test_untrusted_fuzz.py runs the
same edits, fewer of them).

An example holds when the report ends, within `--timeout-s` (a hang is a failure), in a report (exit 0) or in
exactly one `brrrtui: error:` line (exit 2) that is not "out of memory", without a traceback, and with no
control character in anything printed. A worker that dies, or runs past the timeout, is a failure, and is
replaced. Prints the examples tried, how many hold, the failures (the first few in full) and the wall time;
`--jobs` runs that many hypothesis loops side by side (each with its own worker and seed) and sums them.
"""

from __future__ import annotations

import argparse
import contextlib
import io
import json
import multiprocessing
import multiprocessing.connection
import os
import re
import resource
import sqlite3
import subprocess
import sys
import tempfile
import time
import traceback
from collections import Counter
from dataclasses import dataclass, field
from typing import Any

import numpy as np
from hypothesis import HealthCheck, Phase, given, seed as hypothesis_seed, settings, strategies as st

from brrrtui.recording import codec
from brrrtui.recording.columns import COUNT, quoted
from brrrtui.recording.store import TABLES, RecordingWriter

T0 = 1_700_000_000_000_000_000
NAN = float("nan")
WORKER_MEMORY = 3 << 30  # a worker's address space: a blow-up fails the example, not the machine
CONTROL = re.compile("[\x00-\x09\x0b-\x1f\x7f-\x9f]")
META = {
    "argv": ["train.py"],
    "cwd": "/tmp",
    "status": "finished",
    "exit_code": 0,
    "started_at_ns": T0 - 10**9,
    "ended_at_ns": T0 + 10**10,
    "device": {"name": "NVIDIA H200", "num_sms": 132, "compute_capability": "9.0", "l2_bytes": 60 * 2**20},
    "peaks": {"tensor_flops_per_s": 7.5e14, "fp32_flops_per_s": 5e13, "bytes_per_s": 4e12, "source": "measured"},
    "notes": ["a note"],
}  # fmt: skip
STRINGS = [
    "aten::mm",
    "sm90_gemm_kernel",
    "cudaLaunchKernel",
    "[[64,64],[64,64]]",
    '["float","float"]',
    "128,1,1",
]
LINES = [(0, "/tmp/train.py", 10, "main"), (1, "/tmp/train.py", 11, "main")]
META_KEYS = [*META, "format", "format_version", "columns", "last_batch_ns", "output_tail", "ranks", "x"]


def _batch(w: int) -> dict[str, list[tuple[Any, ...]]]:
    """Window `w`'s rows of every table (one batch each)."""
    t = T0 + w * 1_000_000
    return {
        "windows": [(w, 0, t, t + 1_000_000, 2 * w, 2 * w + 1, 1000, 10)],
        "steps": [(2 * w, t + 400_000, 20_000, 5_000), (2 * w + 1, t + 900_000, 20_000, 5_000)],
        "gpu": [(w, 0, 1, t + 100_000, 50_000, 0, 7, 10 * w + 1, 5, 5, -1),
                (w, 1, 1, t + 500_000, 50_000, 0, 7, 10 * w + 2, 5, 5, 4096)],
        "runtime": [(w, 2, t + 50_000, 5_000, 1, 10 * w + 1), (w, 2, t + 450_000, 5_000, 1, 10 * w + 2)],
        "ops": [(w, 0, t + 40_000, 30_000, 1, 3, -1, 3, 4, NAN, -1), (w, 0, t + 440_000, 30_000, 1, 4, -1, 3, 4, 5e5, 1)],
        "spans": [(w, 0, t + 30_000, 60_000, 1, -1, -1), (w, 1, t + 430_000, 60_000, 1, -1, 1)],
        "telemetry": [(t, 50.0, 1e9, 300.0, 1980.0), (t + 500_000, 60.0, 1e9, 310.0, 1980.0)],
        "capture_costs": [(w, 1000, 2000)],
        "line_samples": [(w, 0, t + 50_000, 1000), (w, 1, t + 60_000, 2000)],
        "stream": [(w, 0, 1, t + 2_000_000, 50_000, 0, 7, 100 + w, 5, 5, -1),
                   (w, 0, 1, t + 2_100_000, 50_000, 0, 7, 200 + w, 5, 5, -1)],
        "stream_agg": [(w, w, 0, 1, 0, 0, 7, 0, 1_000_000, 2, 100_000, 50_000, 50_000, 0, 0, 2, 0, 0, 0, 0, 0,
                        10_000, 10_000, 1, -1)],
        "stream_folds": [(w, w, 0, 2, t + 2_000_000, t + 2_150_000, 2, 200 + w)],
        "stream_busy": [(w, 0, 7, 0, 1_000_000, 2, 100_000, 10_000)],
        "stream_templates": [(w, 0, 1, 10 * w + 1), (w, 1, 1, 10 * w + 2)],
    }  # fmt: skip


def write_base(path: str) -> None:
    """The valid recording every example starts from: two batches of every table."""
    w = RecordingWriter(path)
    try:
        w.set_meta(**META)
        w.append({"strings": list(enumerate(STRINGS)), "lines": LINES, **_batch(0)})
        w.append(_batch(1))
    finally:
        w.close()


# ---------------------------------------------------------------- edits

COLUMNS = [(t, c) for t, schema in TABLES.items() for c in [COUNT, *schema]]
INT64 = st.integers(-(2**63), 2**63 - 1)
ODD_INTS = st.one_of(
    st.sampled_from([0, -1, -2, 1, 2**31 - 1, 2**31, -(2**31) - 1, 2**62, 2**63 - 1, -(2**63)]), INT64
)
CELL = st.one_of(
    st.none(),
    ODD_INTS.map(lambda v: ("int", v)),
    st.floats(allow_nan=True, allow_infinity=True).map(lambda v: ("float", v)),
    st.text(max_size=40).map(lambda v: ("text", v)),
    st.binary(max_size=80).map(lambda v: ("bytes", v)),
    st.lists(ODD_INTS, max_size=12).map(lambda v: ("array", v)),
    st.tuples(st.integers(0, 10_000), st.integers(1, 255)).map(lambda v: ("flip", v)),
    st.integers(0, 64).map(lambda v: ("cut", v)),
    st.binary(min_size=1, max_size=64).map(lambda v: ("extend", v)),
)
JSONISH = st.recursive(
    st.one_of(st.none(), st.booleans(), ODD_INTS, st.floats(), st.text(max_size=20)),
    lambda inner: st.one_of(
        st.lists(inner, max_size=4), st.dictionaries(st.text(max_size=8), inner, max_size=4)
    ),
    max_leaves=12,
)
EDIT = st.one_of(
    st.tuples(st.just("cell"), st.sampled_from(COLUMNS), st.integers(0, 1), CELL),
    st.tuples(st.just("strings"), st.integers(0, len(STRINGS)), st.sampled_from(["id", "s"]), CELL),
    st.tuples(st.just("lines"), st.integers(0, len(LINES)), st.sampled_from(["id", "file", "line", "function"]), CELL),
    st.tuples(st.just("meta"), st.sampled_from(META_KEYS), st.one_of(JSONISH.map(json.dumps), st.text(max_size=30))),
    st.tuples(st.just("drop"), st.sampled_from([*TABLES, "meta", "strings", "lines"])),
    st.tuples(st.just("add_column"), st.sampled_from(list(TABLES)), st.sampled_from(["x BLOB", "y INTEGER DEFAULT 7"])),
    st.tuples(st.just("delete_batch"), st.sampled_from(list(TABLES)), st.integers(0, 1)),
    st.tuples(st.just("duplicate_batch"), st.sampled_from(list(TABLES)), st.integers(0, 1)),
    st.tuples(st.just("plant"), st.sampled_from(["view", "trigger"])),
    st.tuples(st.just("raw"), st.integers(0, 200_000), st.integers(1, 255)),
)  # fmt: skip
EDITS = st.lists(EDIT, min_size=1, max_size=3)


def _cell(old: Any, value: Any) -> Any:
    """The new value of a cell whose old value is `old`, as CELL draws it."""
    if value is None:
        return None
    kind, v = value
    if kind in ("int", "float", "text", "bytes"):
        return v
    if kind == "array":
        return codec.encode(np.asarray(v, dtype=np.int64)) if v else b""
    blob = old if isinstance(old, bytes) else codec.encode(np.zeros(2, dtype=np.int64))
    if kind == "flip":
        at, x = v
        if not blob:
            return blob
        b = bytearray(blob)
        b[at % len(b)] ^= x
        return bytes(b)
    if kind == "cut":
        return blob[: max(len(blob) - 1 - v, 0)]
    return blob + v  # extend


def apply_edits(path: str, edits: list[tuple[Any, ...]]) -> None:
    """Apply `edits` (EDITS) to the recording at `path`; an edit SQLite refuses is skipped."""
    raw: list[tuple[int, int]] = []
    db = sqlite3.connect(path, isolation_level=None)
    try:
        for edit in edits:
            kind = edit[0]
            try:
                if kind == "cell":
                    _, (table, column), batch, value = edit
                    rowids = [r[0] for r in db.execute(f"SELECT rowid FROM {quoted(table)} ORDER BY rowid")]
                    if rowids:
                        rowid = rowids[batch % len(rowids)]
                        sql = f"SELECT {quoted(column)} FROM {quoted(table)} WHERE rowid = ?"
                        old = db.execute(sql, (rowid,)).fetchone()[0]
                        db.execute(
                            f"UPDATE {quoted(table)} SET {quoted(column)} = ? WHERE rowid = ?",
                            (_cell(old, value), rowid),
                        )
                elif kind in ("strings", "lines"):
                    _, row, column, value = edit
                    old = db.execute(f"SELECT {column} FROM {kind} WHERE id = ?", (row,)).fetchone()
                    db.execute(
                        f"UPDATE {kind} SET {column} = ? WHERE id = ?", (_cell(old and old[0], value), row)
                    )
                elif kind == "meta":
                    db.execute("INSERT OR REPLACE INTO meta(key, value) VALUES (?, ?)", edit[1:])
                elif kind == "drop":
                    db.execute(f"DROP TABLE {quoted(edit[1])}")
                elif kind == "add_column":
                    db.execute(f"ALTER TABLE {quoted(edit[1])} ADD COLUMN {edit[2]}")
                elif kind in ("delete_batch", "duplicate_batch"):
                    table, batch = edit[1], edit[2]
                    rowids = [r[0] for r in db.execute(f"SELECT rowid FROM {quoted(table)} ORDER BY rowid")]
                    if rowids:
                        rowid = rowids[batch % len(rowids)]
                        if kind == "delete_batch":
                            db.execute(f"DELETE FROM {quoted(table)} WHERE rowid = ?", (rowid,))
                        else:
                            db.execute(
                                f"INSERT INTO {quoted(table)} SELECT * FROM {quoted(table)} WHERE rowid = ?",
                                (rowid,),
                            )
                elif kind == "plant":
                    db.execute(
                        "CREATE VIEW planted AS SELECT * FROM meta"
                        if edit[1] == "view"
                        else "CREATE TRIGGER planted AFTER INSERT ON meta BEGIN SELECT 1; END"
                    )
                else:  # raw
                    raw.append((edit[1], edit[2]))
            except (sqlite3.Error, OverflowError):
                continue
    finally:
        db.close()
    if raw:
        with open(path, "r+b") as f:
            size = os.fstat(f.fileno()).st_size
            for at, x in raw:
                f.seek(at % size)
                b = f.read(1)
                f.seek(at % size)
                f.write(bytes([b[0] ^ x]))  # fmt: skip


# ---------------------------------------------------------------- the reader, in a worker


def _serve(conn: multiprocessing.connection.Connection) -> None:
    """A worker: `brrrtui report PATH` for every path it is sent, its outcome sent back."""
    resource.setrlimit(resource.RLIMIT_AS, (WORKER_MEMORY, WORKER_MEMORY))
    from brrrtui.cli import main

    while True:
        path = conn.recv()
        if path is None:
            return
        out, err = io.StringIO(), io.StringIO()
        crash = ""
        code = -1
        try:
            with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
                code = main(["report", path])
        except BaseException:  # anything main lets out would be a traceback for the user
            crash = traceback.format_exc(limit=-8)
        conn.send((code, out.getvalue()[-20_000:], err.getvalue()[-4000:], crash))


@dataclass
class Outcome:
    holds: bool
    why: str = ""  # a failure's class: hang, crash, traceback, lines, control, oom, empty


@dataclass
class Reader:
    """`brrrtui report` in a worker process, each call bounded by `timeout_s`."""

    timeout_s: float = 20.0
    _proc: Any = None
    _conn: Any = None
    ctx: Any = field(default_factory=lambda: multiprocessing.get_context("spawn"))

    def _start(self) -> None:
        self._conn, theirs = self.ctx.Pipe()
        self._proc = self.ctx.Process(target=_serve, args=(theirs,), daemon=True)
        self._proc.start()
        theirs.close()

    def stop(self) -> None:
        if self._proc is not None:
            with contextlib.suppress(OSError, ValueError):
                self._conn.send(None)
            self._proc.join(5)
            if self._proc.is_alive():
                self._proc.kill()
                self._proc.join()
            self._proc = None

    def report(self, path: str) -> tuple[Outcome, str]:
        if self._proc is None or not self._proc.is_alive():
            self._start()
        self._conn.send(path)
        if not self._conn.poll(self.timeout_s):
            self._proc.kill()
            self._proc.join()
            self._proc = None
            return Outcome(False, "hang"), f"no answer in {self.timeout_s} s"
        try:
            code, out, err, crash = self._conn.recv()
        except EOFError:
            self._proc.join()
            self._proc = None
            return Outcome(False, "crash"), "the worker died"
        return judge(code, out, err, crash), f"exit {code}\n{err}{crash}"


def judge(code: int, out: str, err: str, crash: str) -> Outcome:
    if crash:
        return Outcome(False, "traceback")
    if CONTROL.search(out) or CONTROL.search(err.rstrip("\n")):
        return Outcome(False, "control")
    if code == 0:
        return Outcome(bool(out.strip()), "" if out.strip() else "empty")
    lines = err.strip().splitlines()
    if code != 2 or len(lines) != 1 or not lines[0].startswith("brrrtui: error: "):
        return Outcome(False, "lines")
    if "out of memory" in lines[0]:
        return Outcome(False, "oom")
    return Outcome(True)


def signature(why: str, detail: str) -> str:
    """A failure's kind and where it happened (a traceback's last frame and exception), to count alike ones."""
    if why != "traceback":
        return why
    lines = detail.strip().splitlines()
    frames = [ln.strip() for ln in lines if ln.strip().startswith("File ")]
    return f"{lines[-1][:120] if lines else '?'} @ {frames[-1][:160] if frames else '?'}"


class Trial:
    """The base recording in a folder, and a copy of it per example."""

    def __init__(self, folder: str):
        self.folder = folder
        base = os.path.join(folder, "base.brrr")
        write_base(base)
        with open(base, "rb") as f:
            self.base = f.read()
        self.path = os.path.join(folder, "case.brrr")

    def make(self, edits: list[tuple[Any, ...]]) -> str:
        for leftover in (self.path, self.path + "-journal"):
            with contextlib.suppress(FileNotFoundError):
                os.remove(leftover)
        with open(self.path, "wb") as f:
            f.write(self.base)
        apply_edits(self.path, edits)
        return self.path


# ---------------------------------------------------------------- the benchmark


def run(examples: int, seed: int, timeout_s: float) -> dict[str, Any]:
    """`examples` hypothesis examples (generation only: no shrinking), counted; returns the tally."""
    tally: dict[str, Any] = {
        "cases": 0, "holds": 0, "why": Counter(), "by_edit": Counter(), "signatures": Counter(), "first": []
    }  # fmt: skip
    reader = Reader(timeout_s)
    with tempfile.TemporaryDirectory(prefix="brrrtui-fuzz-") as folder:
        trial = Trial(folder)

        @settings(
            max_examples=examples,
            deadline=None,
            database=None,
            phases=[Phase.generate],
            derandomize=False,
            suppress_health_check=list(HealthCheck),
        )
        @given(EDITS)
        def one(edits: list[tuple[Any, ...]]) -> None:
            outcome, detail = reader.report(trial.make(edits))
            tally["cases"] += 1
            for e in edits:
                tally["by_edit"][e[0]] += 1
            if outcome.holds:
                tally["holds"] += 1
            else:
                tally["why"][outcome.why] += 1
                tally["signatures"][signature(outcome.why, detail)] += 1
                if len(tally["first"]) < 5:
                    tally["first"].append(f"{outcome.why}: {edits!r:.600}\n{detail[-1500:]}")

        try:
            hypothesis_seed(seed)(one)()
        finally:
            reader.stop()
    return tally


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--examples", type=int, default=1000)
    p.add_argument("--jobs", type=int, default=1, help="hypothesis loops side by side (default 1)")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--timeout-s", type=float, default=20.0, help="per example (default 20)")
    p.add_argument("--json", action="store_true", help=argparse.SUPPRESS)  # a job's tally, for its parent
    ns = p.parse_args(argv)
    t = time.monotonic()
    if ns.jobs > 1:
        share = [ns.examples // ns.jobs + (k < ns.examples % ns.jobs) for k in range(ns.jobs)]
        procs = [
            subprocess.Popen(
                [sys.executable, "-m", "benchmarks.fuzz_recordings", "--examples", str(n), "--seed",
                 str(ns.seed + k), "--timeout-s", str(ns.timeout_s), "--json"],
                stdout=subprocess.PIPE, text=True,
            )
            for k, n in enumerate(share)
        ]  # fmt: skip
        tallies = [json.loads(proc.communicate()[0]) for proc in procs]
        tally: dict[str, Any] = {
            "cases": sum(x["cases"] for x in tallies),
            "holds": sum(x["holds"] for x in tallies),
            "why": sum((Counter(x["why"]) for x in tallies), Counter()),
            "by_edit": sum((Counter(x["by_edit"]) for x in tallies), Counter()),
            "signatures": sum((Counter(x["signatures"]) for x in tallies), Counter()),
            "first": [f for x in tallies for f in x["first"]][:5],
        }
    else:
        tally = run(ns.examples, ns.seed, ns.timeout_s)
    if ns.json:
        print(json.dumps(tally))
        return 0
    wall = time.monotonic() - t
    failures = tally["cases"] - tally["holds"]
    print(f"untrusted recordings: {tally['cases']} cases, {tally['holds']} hold, {failures} failures "
          f"({wall:,.0f} s wall, {ns.jobs} job(s), per-example timeout {ns.timeout_s:g} s)")  # fmt: skip
    print("edits drawn: " + ", ".join(f"{k} {v}" for k, v in sorted(tally["by_edit"].items())))
    if failures:
        print("failures by kind: " + ", ".join(f"{k} {v}" for k, v in sorted(tally["why"].items())))
        for sig, n in Counter(tally["signatures"]).most_common():
            print(f"  {n:>5}  {sig}")
        for f in tally["first"]:
            print("---\n" + f)
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
