"""Hostile foreign (Chrome / Kineto JSON) traces through the CLI: `report`, `export` and `diff` each read a
correct trace or print one `brrrtui: error:` line (exit 2) in time linear in the input, whichever reader
runs: the msgspec bulk reader (chrome_fast) and the `json` path of a machine without msgspec."""

from __future__ import annotations

import gzip
import json
import os
import subprocess
import sys
import time

import pytest
from conftest import ROOT

T0 = 1_700_000_000_000_000_000
KERNEL = {"ph": "X", "cat": "kernel", "name": "k", "ts": 40.0, "dur": 50.0, "tid": 7, "pid": 0,
          "args": {"device": 0, "stream": 7, "correlation": 1}}  # fmt: skip
DEPTH = 100_000
DIGITS = "1" * 100_000
# The no-msgspec reader: the same CLI with msgspec unimportable (brrrtui.recording.chrome.load's fallback)
WITHOUT_MSGSPEC = (
    "import sys; sys.modules['msgspec'] = None; from brrrtui.cli import main; sys.exit(main(sys.argv[1:]))"
)


def trace_text(*events: str, after: str = "", before: str = "") -> str:
    """A document whose traceEvents are the kernel above and `events` (JSON texts, as written), its base time
    before them as torch.profiler writes it."""
    body = ",".join([json.dumps(KERNEL), *events])
    return "{" + before + f'"baseTimeNanoseconds":{T0},"traceEvents":[' + body + "]" + after + "}"


def write(path, text: str) -> str:
    path = str(path)
    if path.endswith(".gz"):
        with gzip.open(path, "wt", encoding="utf-8") as f:
            f.write(text)
    else:
        with open(path, "w", encoding="utf-8") as f:
            f.write(text)
    return path


def cli(*args: str, msgspec: bool = True, timeout: float = 120) -> tuple[int, str, str, float]:
    """The CLI in a fresh interpreter: (exit code, stdout, stderr, wall seconds)."""
    env = dict(os.environ, PYTHONPATH=ROOT, BRRRTUI_CALIBRATE="0")
    head = ["-m", "brrrtui"] if msgspec else ["-c", WITHOUT_MSGSPEC]
    t0 = time.perf_counter()
    p = subprocess.run([sys.executable, *head, *args], cwd=ROOT, env=env, capture_output=True, text=True,
                       timeout=timeout)  # fmt: skip
    return p.returncode, p.stdout, p.stderr, time.perf_counter() - t0


def one_error_line(code: int, err: str, *words: str) -> None:
    lines = err.strip().splitlines()
    assert code == 2 and len(lines) == 1 and lines[0].startswith("brrrtui: error: "), (code, err[-2000:])
    assert "Traceback" not in err
    for w in words:
        assert w in lines[0], lines[0]


def each_command(path: str, other: str, tmp_path, msgspec: bool = True):
    """(command, exit code, stdout, stderr) of report, export and diff (both sides) reading `path`."""
    out = str(tmp_path / "out.json")
    for name, args in (
        ("report", ["report", path]),
        ("export", ["export", "--perfetto", out, path]),
        ("diff", ["diff", other, path]),
        ("diff-before", ["diff", path, other]),
    ):
        code, stdout, stderr, _ = cli(*args, msgspec=msgspec)
        yield name, code, stdout, stderr


@pytest.fixture
def good(tmp_path) -> str:
    return write(tmp_path / "good.json", trace_text())


NESTED = {
    "in an event's args": lambda: trace_text('{"ph":"X","cat":"kernel","name":"k","ts":41,"dur":1,"args":{"grid":'
                                             + "[" * DEPTH + "]" * DEPTH + "}}"),
    "after the events": lambda: trace_text(after=',"x":' + "[" * DEPTH + "]" * DEPTH),
    "before the events": lambda: trace_text(before='"x":' + "{\"a\":" * DEPTH + "1" + "}" * DEPTH + ","),
    "as an event": lambda: trace_text("[" * DEPTH + "]" * DEPTH),
}  # fmt: skip


@pytest.mark.parametrize("msgspec", [True, False], ids=["msgspec", "json"])
@pytest.mark.parametrize("where", sorted(NESTED))
def test_json_nested_deeper_than_the_recursion_limit_is_one_error_line(tmp_path, good, where, msgspec):
    path = write(tmp_path / "deep.json", NESTED[where]())
    for name, code, _, err in each_command(path, good, tmp_path, msgspec):
        one_error_line(code, err, "deep.json", "nests its JSON too deeply")
        assert not os.path.exists(tmp_path / "out.json"), name


HUGE = {
    "an arg brrrtui reads": '{"ph":"X","cat":"kernel","name":"k","ts":41,"dur":1,"args":{"device":' + DIGITS + "}}",
    "a time": '{"ph":"X","cat":"kernel","name":"k","ts":' + DIGITS + ',"dur":1}',
    "a negative duration": '{"ph":"X","cat":"kernel","name":"k","ts":41,"dur":-' + DIGITS + "}",
    "a field no reader keeps": '{"ph":"X","cat":"kernel","name":"k","ts":41,"dur":1,"pid":' + DIGITS + "}",
    "a thread id": '{"ph":"X","cat":"cpu_op","name":"op","ts":41,"dur":1,"tid":' + DIGITS + "}",
    "an NCCL message size": '{"ph":"X","cat":"kernel","name":"ncclKernel","ts":41,"dur":1,"args":{"In msg nelems":'
                            + DIGITS + ',"dtype":"Float"}}',
}  # fmt: skip


@pytest.mark.parametrize("msgspec", [True, False], ids=["msgspec", "json"])
@pytest.mark.parametrize("where", sorted(HUGE))
def test_a_100000_digit_number_reads_as_an_out_of_range_value(tmp_path, good, where, msgspec):
    """The kernel before it is read; the number is a value out of range (the event skipped or the field
    unknown), as any other out-of-range value is."""
    path = write(tmp_path / "huge.json", trace_text(HUGE[where]))
    for name, code, out, err in each_command(path, good, tmp_path, msgspec):
        assert code == 0 and "Traceback" not in err, (name, err[-2000:])
        assert out.strip() or name == "export", name
    assert json.load(open(tmp_path / "out.json"))["traceEvents"]


def test_a_huge_number_in_the_document_header_is_read_as_out_of_range(tmp_path, good):
    path = write(tmp_path / "huge.json", trace_text(before=f'"schemaVersion":{DIGITS},'))
    code, out, err, _ = cli("report", path)
    assert code == 0 and "brrrtui report" in out, err[-2000:]


STRETCH = 64 << 20  # the stretch that took 35 s on the CPU machine before the boundary search was linear


@pytest.mark.parametrize(
    "kind, msgspec",
    [("a long string", True), ("a long string", False), ("a long string, gzip", True),
     ("a long string, gzip", False), ("whitespace", True)],  # the json path read whitespace in linear time
)  # fmt: skip
def test_a_long_stretch_without_an_event_boundary_is_read_in_linear_time(tmp_path, kind, msgspec):
    if kind == "whitespace":
        text = trace_text(" " * STRETCH + json.dumps(KERNEL))
    else:
        text = trace_text(json.dumps({"ph": "X", "cat": "cpu_op", "name": "x" * STRETCH, "ts": 50, "dur": 1}))
    path = write(tmp_path / ("t.json.gz" if "gzip" in kind else "t.json"), text)
    code, out, err, wall = cli("report", path, msgspec=msgspec)
    assert code == 0 and "brrrtui report" in out, err[-2000:]
    assert wall < 20, f"{wall:.1f} s to read {STRETCH >> 20} MiB"  # ~2 s here; quadratic was 35 s


def _bomb(path, mib: int) -> str:
    """A gzip that unpacks to `mib` MiB: a trace start, then whitespace without an event boundary."""
    with gzip.open(path, "wb", compresslevel=9) as f:
        f.write(('{"traceEvents":[' + json.dumps(KERNEL) + ",").encode())
        block = b" " * (1 << 20)
        for _ in range(mib):
            f.write(block)
        f.write(b"{}]}")
    return str(path)


def test_a_gzip_that_unpacks_past_the_stretch_limit_is_refused_as_it_is_read(tmp_path, monkeypatch):
    """An 8 MiB limit (the reader's is MAX_STRETCH, 512 MiB): a gzip of 48 KiB that unpacks to 48 MiB
    without an event boundary is refused once the limit is passed, not unpacked whole."""
    from test_fuzz_inputs import report

    from brrrtui.recording.chrome import bulk as chrome_fast

    monkeypatch.setattr(chrome_fast, "MAX_STRETCH", 8 << 20, raising=False)
    path = _bomb(tmp_path / "bomb.json.gz", 48)
    assert os.path.getsize(path) < 100_000
    t0 = time.perf_counter()
    code, _, err = report(path)
    one_error_line(code, err, "bomb.json.gz", "more than 8 MiB of JSON without an event boundary")
    assert time.perf_counter() - t0 < 10


def test_a_document_whose_events_do_not_begin_within_the_limit_is_refused(tmp_path, monkeypatch):
    from test_fuzz_inputs import report

    from brrrtui.recording.chrome import bulk as chrome_fast

    monkeypatch.setattr(chrome_fast, "MAX_STRETCH", 8 << 20, raising=False)
    path = write(tmp_path / "late.json.gz", "{" + " " * (24 << 20) + trace_text()[1:])
    code, _, err = report(path)
    one_error_line(code, err, "late.json.gz", "no traceEvents array in its first 8 MiB")


def test_the_json_path_reads_whole_only_a_text_that_fits_in_memory(tmp_path, monkeypatch):
    """The base time after the events: the bulk reader hands the document to the `json` path, which reads
    it whole; past what memory allows (here 1 MiB) it refuses before unpacking the rest."""
    from test_fuzz_inputs import report

    from brrrtui.recording.chrome import load as chrome

    monkeypatch.setattr(chrome, "json_text_limit", lambda: 1 << 20, raising=False)
    events = [dict(KERNEL, ts=40.0 + i) for i in range(40_000)]
    path = write(tmp_path / "big.json.gz", json.dumps({"traceEvents": events, "baseTimeNanoseconds": T0}))
    code, _, err = report(path)
    one_error_line(code, err, "big.json.gz", "unpacks to more than 1.0 MiB of JSON")


def test_the_memory_limit_follows_an_address_space_limit():
    code = (
        "import resource; resource.setrlimit(resource.RLIMIT_AS, (3 << 30, 3 << 30));"
        "from brrrtui.recording.chrome.load import available_memory, json_text_limit;"
        "print(available_memory(), json_text_limit())"
    )
    out = subprocess.run([sys.executable, "-c", code], env=dict(os.environ, PYTHONPATH=ROOT), capture_output=True,
                         text=True, timeout=60, check=True).stdout.split()  # fmt: skip
    assert int(out[0]) <= 3 << 30 and int(out[1]) == int(out[0]) // 8
