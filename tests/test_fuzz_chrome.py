"""A bounded property-based fuzz of the Chrome trace readers through the CLI (benchmarks/fuzz_chrome.py
makes and checks the examples; `python -m benchmarks.fuzz_chrome --examples 10000` is the large run).

Each example: nesting to 100,000 levels, numbers of up to 100,000 digits, NaN and 1e999, long strings with
escapes and controls, fields missing or of other types, whitespace stretches, truncation, bad UTF-8 and
gzip, read by `report`, `report --json`, `export` or `diff` with the msgspec reader and with the `json` path;
each run in a worker killed past 30 s (a hang fails the example). It holds on a report (or export) or one
`brrrtui: error:` line, with the input unchanged and both readers' reports alike."""

from __future__ import annotations

import sys
from datetime import timedelta

import pytest
from conftest import ROOT
from hypothesis import HealthCheck, given, settings, strategies as st

if ROOT not in sys.path:
    sys.path.insert(0, ROOT)

from benchmarks.fuzz_chrome import COMMANDS, Example, Harness, examples, failure  # noqa: E402


@pytest.fixture(scope="module")
def harness():
    h = Harness(timeout=30)
    yield h
    h.close()


@settings(max_examples=50, deadline=timedelta(seconds=90), database=None,
          suppress_health_check=list(HealthCheck))  # fmt: skip
@given(ex=examples(), command=st.sampled_from(COMMANDS))
def test_fuzz_chrome_readers(harness, ex: Example, command: str):
    problems = harness.check(ex, command)
    assert not problems, "\n".join(problems) + "\nrecipe: " + " | ".join(ex.recipe)


def test_the_check_fails_what_does_not_hold(tmp_path):
    ok = {
        "code": 2,
        "err": "brrrtui: error: x.json is not a readable JSON trace\n",
        "escaped": None,
        "out_len": 0,
    }
    assert failure(ok, "report", "") is None
    assert "hang" in failure({"hang": 30.0}, "report", "")
    assert "exception out of main" in failure(dict(ok, escaped="RecursionError: deep"), "report", "")
    assert "traceback" in failure(dict(ok, err="Traceback (most recent call last):\n  x\nValueError: y\n"),
                                  "report", "")  # fmt: skip
    assert "2 stderr lines" in failure(dict(ok, err="brrrtui: error: a\nb\n"), "report", "")
    assert "without a report" in failure(dict(ok, code=0, err=""), "report", "")
    assert "without its output" in failure(dict(ok, code=0, err=""), "export", str(tmp_path / "none.json"))
    assert "exit 1" in failure(dict(ok, code=1), "report", "")


def test_a_worker_past_its_time_limit_is_killed_and_replaced(tmp_path):
    """A hang is a failure, not a stuck suite; the worker after it reads the next example."""
    from benchmarks.fuzz_chrome import GOOD, Worker

    path = tmp_path / "good.json"
    path.write_text(GOOD)
    w = Worker(msgspec=True, timeout=3)
    try:
        assert "hang" in w.run(["--sleep", "60"])
        reply = w.run(["report", str(path)])
        assert reply["code"] == 0 and reply["out_len"], reply
    finally:
        w.close()
