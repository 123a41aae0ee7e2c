"""A fuzz that can fail: hypothesis edits over every table, column and batch of a recording (not only row 1),
plus its names, lines, meta, schema and raw bytes (benchmarks/fuzz_recordings.py, which runs the same edits
10,000 times), each read by `brrrtui report` in a worker process with a time limit: a hang, a crash, a
traceback, more than one error line or terminal control in what is printed fails the example."""

from __future__ import annotations

import pytest
from hypothesis import HealthCheck, given, settings

from benchmarks.fuzz_recordings import EDITS, Reader, Trial


@pytest.fixture(scope="module")
def trial(tmp_path_factory):
    reader = Reader(timeout_s=30.0)
    try:
        yield Trial(str(tmp_path_factory.mktemp("fuzz"))), reader
    finally:
        reader.stop()


def test_the_unedited_recording_reports(trial):
    base, reader = trial
    outcome, detail = reader.report(base.make([]))
    assert outcome.holds and detail.startswith("exit 0"), detail


@settings(max_examples=40, deadline=None, database=None, suppress_health_check=list(HealthCheck))
@given(edits=EDITS)
def test_any_edit_of_a_recording_ends_in_a_report_or_one_line_in_bounded_time(trial, edits):
    base, reader = trial
    outcome, detail = reader.report(base.make(edits))
    assert outcome.holds, f"{outcome.why}: {edits!r}\n{detail}"


@pytest.mark.parametrize(
    "edits",
    [
        [("raw", 1496, 183), ("raw", 1496, 1), ("raw", 1496, 183)],  # aggregates without their fold
        [("plant", "trigger"), ("raw", 732, 252)],  # schema text that is not UTF-8
        [("add_column", "capture_costs", "x BLOB"), ("raw", 633, 166), ("drop", "line_samples")],
        [("cell", ("stream_templates", "window"), 1, ("flip", (4, 1)))],  # a window id past 2**23
    ],
)
def test_edits_the_10000_example_run_found(trial, edits):
    base, reader = trial
    outcome, detail = reader.report(base.make(edits))
    assert outcome.holds, f"{outcome.why}: {edits!r}\n{detail}"
