"""Fuzz the Chrome / Kineto trace readers through the CLI, each example bounded in time.

    python -m benchmarks.fuzz_chrome --examples 10000 [--timeout 30] [--seed 1]

Each example is a torch.profiler-like trace, written as text and then damaged: fields missing or of other
types, odd and huge numbers (100,000 digits, 1e999, NaN, -0), long strings (with escapes, lone surrogates,
control characters, `},{` and `"traceEvents":[` inside), nesting up to 100,000 levels anywhere, whitespace
stretches, the base time before or after the events, truncation, bytes that are no UTF-8, gzip (whole,
truncated or damaged). One of `report`, `report --json`, `export --perfetto` or `diff` (the trace on either
side) reads it twice: with the msgspec bulk reader and with the `json` path of a machine without msgspec,
each in a worker process that is killed when an example passes the time limit (a hang is a failure).

An example holds when each run ends within the limit with exit 0 and its output (a report, or an export
file), or with exit 2 and exactly one `brrrtui: error:` line; never a traceback, an exception out of `main`
or another exit code, and the input file is unchanged. Where both readers print a `report --json`, they
must agree (the bulk reader reads the rows the `json` path reads). The readers' size limits are lowered in
the workers (MAX_STRETCH 2 MiB, the `json` path's 8 MiB) so examples of a few MiB reach them.

Prints the examples tried, how many hold, each failure (kind, command, reader, the error's last line and
the example's recipe) and the wall time; exits 1 when any example failed. tests/test_fuzz_chrome.py runs
the same examples (a few dozen) in the normal suite.
"""

from __future__ import annotations

import argparse
import contextlib
import gzip
import hashlib
import io
import json
import os
import select
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from typing import Any

import hypothesis
from hypothesis import HealthCheck, Phase, given, settings, strategies as st

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
T0 = 1_700_000_000_000_000_000
MAX_STRETCH = 2 << 20
JSON_LIMIT = 8 << 20
PLACEHOLDER = "\x00raw{}\x00"  # a JSON string json.dumps writes as "\u0000raw<n>\u0000"

EVENTS: list[dict[str, Any]] = [
    {"ph": "X", "cat": "cpu_op", "name": "aten::mm", "ts": 10.0, "dur": 30.0, "tid": 1, "pid": 1,
     "args": {"Input Dims": [[64, 64], [64, 64]], "Input type": ["float", "float"], "Sequence number": 3,
              "Fwd thread id": 0, "flops": 524288}},
    {"ph": "X", "cat": "cuda_runtime", "name": "cudaLaunchKernel", "ts": 12.0, "dur": 5.0, "tid": 1,
     "pid": 1, "args": {"correlation": 1}},
    {"ph": "X", "cat": "kernel", "name": "sm90_gemm_kernel", "ts": 40.0, "dur": 50.0, "tid": 7, "pid": 0,
     "args": {"device": 0, "stream": 7, "correlation": 1, "grid": [128, 1, 1], "block": [256, 1, 1]}},
    {"ph": "X", "cat": "kernel", "name": "ncclDevKernel_AllReduce_Sum_f32_RING_LL", "ts": 95.0, "dur": 9.0,
     "tid": 7, "pid": 0, "args": {"device": 0, "stream": 9, "correlation": 2, "In msg nelems": 1024,
                                  "dtype": "Float"}},
    {"ph": "X", "cat": "gpu_memcpy", "name": "Memcpy HtoD", "ts": 100.0, "dur": 4.0, "tid": 7, "pid": 0,
     "args": {"device": 0, "stream": 7, "bytes": 4096}},
    {"ph": "X", "cat": "python_function", "name": "/tmp/train.py(10): main", "ts": 5.0, "dur": 100.0,
     "tid": 1, "pid": 1},
    {"ph": "X", "cat": "user_annotation", "name": "Optimizer.step#SGD.step", "ts": 95.0, "dur": 5.0,
     "tid": 1, "pid": 1},
    {"ph": "i", "cat": "cpu_instant_event", "name": "instant", "ts": 11.0, "s": "t", "pid": 1, "tid": 1},
    {"ph": "M", "name": "process_name", "pid": 0, "args": {"name": "GPU 0"}},
]  # fmt: skip
EVENT_FIELDS = ["ph", "cat", "name", "ts", "dur", "tid", "pid", "args", "id"]
ARG_FIELDS = ["device", "stream", "correlation", "grid", "block", "bytes", "Input Dims", "Input type",
              "Sequence number", "Fwd thread id", "flops", "In msg nelems", "dtype", "External id"]  # fmt: skip
TOP_FIELDS = ["schemaVersion", "deviceProperties", "traceName", "cuda_driver_version", "cuda_runtime_version",
              "displayTimeUnit", "brrrtui", "distributedInfo"]  # fmt: skip
DEVICE_FIELDS = ["name", "numSms", "computeMajor", "computeMinor", "totalGlobalMem"]
COMMANDS = ["report", "report --json", "export", "diff after", "diff before"]

# ------------------------------------------------------------------------------------------- strategies
LENGTHS = st.sampled_from([0, 1, 7, 300, 5000, 70_000, 1 << 20])
DIGIT_COUNTS = st.sampled_from([1, 19, 20, 310, 4300, 4301, 20_000, 100_000])
DEPTHS = st.sampled_from([1, 2, 30, 500, 900, 990, 1000, 1100, 3000, 100_000])
INSIDE = st.sampled_from(["", "},{", '"traceEvents":[', "\\u0000", "\\ud800", "\\udfff\\ud800", "\\u202e",
                          "\\u001b]52;c;aGk=\\u0007", "\\u001b[2J", "[@click=app.quit]", "\\\\", '\\"', "é", "\U0001f525",
                          "\\n\\r\\t", "(12): f"])  # fmt: skip


@st.composite
def odd_numbers(draw: st.DrawFn) -> str:
    """A JSON number's text (or a token the `json` module reads as one: NaN, Infinity)."""
    n = draw(DIGIT_COUNTS)
    return draw(
        st.sampled_from(
            [
                "-0", "0e0", "-0.0", "1e999", "-1e999", "1E-999", "NaN", "Infinity", "-Infinity", "1.0e+308",
                "4.9e-324", "9223372036854775807", "9223372036854775808", "-9223372036854775809",
                "18446744073709551616", "4611686018427387904", "2147483648", "1" * n, "-" + "9" * n,
                "0." + "0" * n + "1", "1" + "0" * n + ".5", "1e" + "9" * min(n, 400), "1" * n + "e-" + "1" * 3,
            ]
        )
    )  # fmt: skip


@st.composite
def long_strings(draw: st.DrawFn) -> str:
    """A JSON string's text: a long run around something odd."""
    n, inside, tail = draw(LENGTHS), draw(INSIDE), draw(st.sampled_from([0, 1, 100]))
    return '"' + "x" * n + inside + "y" * tail + '"'


@st.composite
def nested(draw: st.DrawFn) -> str:
    """Arrays and objects nested `d` deep, balanced or not."""
    d = draw(DEPTHS)
    kind = draw(st.sampled_from(["arrays", "objects", "mixed", "open", "closed"]))
    if kind == "arrays":
        return "[" * d + "]" * d
    if kind == "objects":
        return '{"a":' * d + "1" + "}" * d
    if kind == "mixed":
        return '[{"a":' * d + "[]" + "}]" * d
    if kind == "open":
        return "[" * d
    return "]" * d


scalars = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(min_value=-(2**70), max_value=2**70),
    st.floats(),
    st.text(max_size=12),
)
small_values = st.recursive(
    scalars,
    lambda c: st.lists(c, max_size=4) | st.dictionaries(st.text(max_size=4), c, max_size=4),
    max_leaves=12,
)
RAW = st.one_of(odd_numbers(), long_strings(), nested())


@st.composite
def values(draw: st.DrawFn) -> tuple[str, Any]:
    """("value", a JSON value) or ("raw", the text of one written as is)."""
    if draw(st.booleans()):
        return "raw", draw(RAW)
    return "value", draw(small_values)


WHITESPACE = st.sampled_from(["", " ", "\n", "\r\n\t "])
STRETCHES = st.sampled_from(["", "", " " * 70_000, "\n" * (3 << 20), "\t" * (5 << 20)])


@dataclass
class Example:
    """One trace as written, and a recipe that says how it was made (printed with a failure)."""

    data: bytes
    suffix: str
    recipe: list[str] = field(default_factory=list)


@st.composite
def examples(draw: st.DrawFn) -> Example:
    raws: list[str] = []
    recipe: list[str] = []

    def put(v: tuple[str, Any]) -> Any:
        kind, value = v
        if kind == "value":
            return value
        raws.append(value)
        return PLACEHOLDER.format(len(raws) - 1)

    events = [json.loads(json.dumps(e)) for e in EVENTS * draw(st.sampled_from([1, 1, 1, 3, 200]))]
    for _ in range(draw(st.integers(0, 4))):
        where = draw(st.sampled_from(["field", "arg", "drop", "event", "insert", "args"]))
        i = draw(st.integers(0, len(events) - 1))
        ev = events[i]
        v = draw(values())
        recipe.append(f"{where} #{i}: {_short(v)}")
        if where == "field" and isinstance(ev, dict):
            ev[draw(st.sampled_from(EVENT_FIELDS))] = put(v)
        elif where == "arg" and isinstance(ev, dict):
            args = ev.setdefault("args", {})
            if isinstance(args, dict):
                args[draw(st.sampled_from(ARG_FIELDS))] = put(v)
        elif where == "drop" and isinstance(ev, dict) and ev:
            ev.pop(draw(st.sampled_from(sorted(ev))))
        elif where == "event":
            events[i] = put(v)
        elif where == "insert":
            events.insert(i, put(v))
        elif where == "args" and isinstance(ev, dict):
            ev["args"] = put(v)
    top: dict[str, Any] = {
        "schemaVersion": 1,
        "deviceProperties": [{"id": 0, "name": "NVIDIA H200", "totalGlobalMem": 150109880320,
                              "computeMajor": 9, "computeMinor": 0, "numSms": 132}],
        "traceName": "t.json",
    }  # fmt: skip
    for _ in range(draw(st.integers(0, 2))):
        v = draw(values())
        if draw(st.booleans()):
            key = draw(st.sampled_from(TOP_FIELDS))
            top[key] = put(v)
            recipe.append(f"top {key}: {_short(v)}")
        else:
            key, props = draw(st.sampled_from(DEVICE_FIELDS)), top["deviceProperties"]
            if isinstance(props, list) and props and isinstance(props[0], dict):
                props[0][key] = put(v)
                recipe.append(f"device {key}: {_short(v)}")
    base = draw(st.sampled_from(["before", "before", "after", "none", "odd"]))
    if base != "none":
        base_text = draw(odd_numbers()) if base == "odd" else str(T0)
        recipe.append(f"base {base}")
    layout = draw(st.sampled_from(["compact", "spaced", "indented"]))
    ws, stretch = draw(WHITESPACE), draw(STRETCHES)
    at = draw(st.integers(0, len(events) + 3))  # the joint the stretch goes in (0-2: before the events)
    recipe.append(f"layout {layout}, joints {ws!r}, {len(stretch)} whitespace characters at joint {at}")

    def dump(value: Any) -> str:
        if layout == "compact":
            return json.dumps(value, separators=(",", ":"))
        if layout == "spaced":
            return json.dumps(value)
        return json.dumps(value, indent=1)

    head = dump(top)[:-1].rstrip()
    joints = [ws] * (len(events) + 4)
    joints[at] += stretch
    parts = [head, "," if head != "{" else "", joints[0]]
    if base == "before" or base == "odd":
        parts += [f'"baseTimeNanoseconds":{base_text},', ws]
    body = "".join(("," if i else "") + joints[i + 2] + dump(e) for i, e in enumerate(events))
    parts += ['"traceEvents"', ws, ":", joints[1], "[", body, joints[-1], "]"]
    if base == "after":
        parts += [",", ws, f'"baseTimeNanoseconds":{base_text}']
    parts += [ws, "}"]
    text = "".join(parts)
    for n, raw in enumerate(raws):
        text = text.replace(json.dumps(PLACEHOLDER.format(n)), raw)
    data = text.encode("utf-8", "surrogatepass")
    damage = draw(st.sampled_from(["none", "none", "none", "truncate", "garbage", "bad utf-8", "bom"]))
    if damage == "truncate":
        data = data[: draw(st.integers(0, max(0, len(data) - 1)))]
    elif damage == "garbage":
        data += draw(st.sampled_from([b"x", b",{}]", b"\x00", b"}" * 10, b"]}"]))
    elif damage == "bad utf-8":
        at = draw(st.integers(0, len(data)))
        data = (
            data[:at]
            + draw(st.sampled_from([b"\xff", b"\xc3", b"\xed\xa0\x80", b"\xf4\x90\x80\x80"]))
            + data[at:]
        )
    elif damage == "bom":
        data = b"\xef\xbb\xbf" + data
    recipe.append(f"damage {damage}")
    packing = draw(
        st.sampled_from(["plain", "plain", "gzip", "gzip truncated", "gzip damaged", "gzip twice"])
    )
    recipe.append(packing)
    if packing == "plain":
        return Example(data, ".json", recipe)
    packed = gzip.compress(data, compresslevel=1, mtime=0)
    if packing == "gzip truncated":
        packed = packed[: draw(st.integers(0, len(packed) - 1))]
    elif packing == "gzip damaged":
        at = draw(st.integers(0, len(packed) - 1))
        packed = packed[:at] + bytes([packed[at] ^ draw(st.integers(1, 255))]) + packed[at + 1 :]
    elif packing == "gzip twice":  # two members: gzip reads them as one stream
        half = len(data) // 2
        packed = gzip.compress(data[:half], mtime=0) + gzip.compress(data[half:], mtime=0)
    return Example(packed, ".json.gz", recipe)


def _short(v: tuple[str, Any]) -> str:
    text = v[1] if v[0] == "raw" else json.dumps(v[1])
    return text if len(text) <= 40 else f"{text[:20]}...{text[-10:]} ({len(text)} chars)"


# -------------------------------------------------------------------------------------------- the worker
def worker(msgspec: bool) -> None:
    """Read argv lists (one JSON line each) from stdin; for each, run the CLI's main in this process and
    write back one JSON line: its exit code, stdout's size and start, stderr, any exception out of main."""
    if not msgspec:
        sys.modules["msgspec"] = None  # type: ignore[assignment]
    from brrrtui.cli import main
    from brrrtui.recording.chrome import load as chrome

    if msgspec:
        from brrrtui.recording.chrome import bulk as chrome_fast

        chrome_fast.MAX_STRETCH = MAX_STRETCH
    chrome.json_text_limit = lambda: JSON_LIMIT  # type: ignore[assignment]
    for line in sys.stdin:
        argv = json.loads(line)
        out, err = io.StringIO(), io.StringIO()
        escaped = None
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
            try:
                if argv[:1] == ["--sleep"]:  # the harness's own check that a hang is caught
                    time.sleep(float(argv[1]))
                code: Any = main(argv)
            except BaseException as e:  # noqa: BLE001 - what escapes main is the finding
                code, escaped = None, f"{e.__class__.__name__}: {str(e)[:300]}"
        text = out.getvalue()
        reply = {"code": code, "out": text[:20_000], "out_len": len(text), "err": err.getvalue()[-4000:],
                 "escaped": escaped}  # fmt: skip
        sys.stdout.write(json.dumps(reply) + "\n")
        sys.stdout.flush()


class Worker:
    """A worker process (`python -m benchmarks.fuzz_chrome --worker`), started again after a hang."""

    def __init__(self, msgspec: bool, timeout: float):
        self.msgspec, self.timeout = msgspec, timeout
        self.proc: subprocess.Popen[str] | None = None
        self.runs = 0

    def _start(self) -> subprocess.Popen[str]:
        env = dict(os.environ, PYTHONPATH=os.pathsep.join(filter(None, [ROOT, os.environ.get("PYTHONPATH")])),
                   BRRRTUI_CALIBRATE="0", OPENBLAS_NUM_THREADS="1")  # fmt: skip
        argv = [sys.executable, "-m", "benchmarks.fuzz_chrome", "--worker"]
        if not self.msgspec:
            argv.append("--no-msgspec")
        return subprocess.Popen(argv, cwd=ROOT, env=env, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                stderr=subprocess.DEVNULL, text=True, bufsize=1)  # fmt: skip

    def run(self, argv: list[str]) -> dict[str, Any]:
        """The run's reply; {"hang": seconds} past the time limit, {"died": code} if the worker died."""
        if self.proc is None or self.runs >= 400:  # a fresh interpreter now and then: memory stays flat
            self.close()
            self.proc, self.runs = self._start(), 0
        proc = self.proc
        self.runs += 1
        assert proc.stdin is not None and proc.stdout is not None
        proc.stdin.write(json.dumps(argv) + "\n")
        proc.stdin.flush()
        t0 = time.monotonic()
        ready, _, _ = select.select([proc.stdout], [], [], self.timeout)
        if not ready:
            self.close()
            return {"hang": round(time.monotonic() - t0, 1)}
        line = proc.stdout.readline()
        if not line:
            code = proc.wait()
            self.proc = None
            return {"died": code}
        return dict(json.loads(line), seconds=time.monotonic() - t0)

    def close(self) -> None:
        if self.proc is not None:
            self.proc.kill()
            self.proc.wait()
            self.proc = None


# ------------------------------------------------------------------------------------------- the check
GOOD = json.dumps({"baseTimeNanoseconds": T0, "traceEvents": EVENTS[:3]})


def failure(reply: dict[str, Any], command: str, out_path: str) -> str | None:
    """Why a run does not hold, or None."""
    if "hang" in reply:
        return f"hang (killed after {reply['hang']} s)"
    if "died" in reply:
        return f"the worker died (exit {reply['died']})"
    if reply["escaped"]:
        return f"exception out of main: {reply['escaped']}"
    err = reply["err"]
    if "Traceback" in err:
        return "a traceback on stderr: " + err.strip().splitlines()[-1]
    code = reply["code"]
    if code == 0:
        if command == "export":
            if not os.path.exists(out_path):
                return "export exit 0 without its output"
            with contextlib.suppress(FileNotFoundError):
                os.unlink(out_path)
        elif not reply["out_len"]:
            return "exit 0 without a report"
        return None
    if code == 2:
        lines = err.strip().splitlines()
        if len(lines) == 1 and lines[0].startswith("brrrtui: error: "):
            return None
        return f"exit 2 with {len(lines)} stderr lines: {err.strip()[-300:]!r}"
    return f"exit {code}: {err.strip()[-300:]!r}"


@dataclass
class Tally:
    cases: int = 0
    holds: int = 0
    runs: int = 0
    errors: int = 0  # runs that ended in one error line
    disagree: int = 0
    failures: list[str] = field(default_factory=list)
    slowest: float = 0.0


class Harness:
    """Runs examples through both readers' workers, in a scratch folder."""

    def __init__(self, timeout: float):
        self.workers = [Worker(True, timeout), Worker(False, timeout)]
        self.tmp = tempfile.mkdtemp(prefix="brrrtui-fuzz-chrome-")
        self.good = os.path.join(self.tmp, "good.json")
        with open(self.good, "w") as f:
            f.write(GOOD)
        self.tally = Tally()

    def close(self) -> None:
        for w in self.workers:
            w.close()
        import shutil

        shutil.rmtree(self.tmp, ignore_errors=True)

    def check(self, ex: Example, command: str) -> list[str]:
        """Run one example; the reasons it does not hold (none: it holds)."""
        t = self.tally
        t.cases += 1
        path = os.path.join(self.tmp, f"case{t.cases}{ex.suffix}")
        out = os.path.join(self.tmp, f"out{t.cases}.json")
        with open(path, "wb") as f:
            f.write(ex.data)
        digest = hashlib.sha256(ex.data).hexdigest()
        argv = {"report": ["report", path], "report --json": ["report", "--json", path],
                "export": ["export", "--perfetto", out, path], "diff after": ["diff", self.good, path],
                "diff before": ["diff", path, self.good]}[command]  # fmt: skip
        problems, reports = [], []
        for w in self.workers:
            reply = w.run(argv)
            t.runs += 1
            t.slowest = max(t.slowest, reply.get("seconds", 0.0))
            why = failure(reply, command, out)
            if why is None and reply.get("code") == 2:
                t.errors += 1
            if why is not None:
                reader = "msgspec" if w.msgspec else "json"
                problems.append(f"{why} [{command}, {reader} reader]")
            elif command == "report --json" and reply.get("code") == 0 and reply["out_len"] <= 20_000:
                reports.append(reply["out"])
        with open(path, "rb") as f:
            if hashlib.sha256(f.read()).hexdigest() != digest:
                problems.append(f"the input file changed [{command}]")
        os.unlink(path)
        if len(reports) == 2 and _comparable(reports[0]) != _comparable(reports[1]):
            t.disagree += 1
            problems.append(f"the two readers' reports differ [{command}]")
        if problems:
            t.failures.append("; ".join(problems) + "\n    recipe: " + " | ".join(ex.recipe))
        else:
            t.holds += 1
        return problems


def _comparable(report: str) -> Any:
    """A --json report without what differs between any two runs (timings of the analysis itself)."""
    try:
        value = json.loads(report)
    except ValueError:
        return report
    if isinstance(value, dict):
        value.pop("analysis_seconds", None)
    return value


def run(n: int, timeout: float, seed: int | None) -> Tally:
    harness = Harness(timeout)
    config = settings(max_examples=n, deadline=None, database=None, phases=[Phase.generate],
                      suppress_health_check=list(HealthCheck))  # fmt: skip

    @config
    @given(ex=examples(), command=st.sampled_from(COMMANDS))
    def one(ex: Example, command: str) -> None:
        harness.check(ex, command)
        done = harness.tally.cases
        if done % 500 == 0:
            print(f"  {done} cases, {harness.tally.holds} hold", file=sys.stderr, flush=True)

    if seed is not None:
        one = hypothesis.seed(seed)(one)
    try:
        one()
    finally:
        harness.close()
    return harness.tally


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--examples", type=int, default=1000)
    p.add_argument("--timeout", type=float, default=30.0, help="seconds one run may take (a hang past it)")
    p.add_argument("--seed", type=int, help="the random seed (the same examples each time)")
    p.add_argument("--worker", action="store_true", help=argparse.SUPPRESS)
    p.add_argument("--no-msgspec", action="store_true", help=argparse.SUPPRESS)
    ns = p.parse_args(argv)
    if ns.worker:
        worker(not ns.no_msgspec)
        return 0
    t0 = time.perf_counter()
    t = run(ns.examples, ns.timeout, ns.seed)
    wall = time.perf_counter() - t0
    print(f"foreign traces: {t.cases} cases, {t.holds} hold, {len(t.failures)} fail "
          f"({t.runs} reader runs, {t.errors} of them one error line, {t.disagree} where the readers disagree; "
          f"slowest run {t.slowest:.1f} s); {wall:.0f} s wall")  # fmt: skip
    for f in t.failures[:50]:
        print("  FAIL " + f)
    return 1 if t.failures else 0


if __name__ == "__main__":
    sys.exit(main())
