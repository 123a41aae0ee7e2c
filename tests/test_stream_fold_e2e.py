"""`brrrtui record --stream` end to end with folding (tests/scripts/fake_cupti.py standing in for libcupti, as in
tests/test_stream_e2e.py), its limits lowered through BRRRTUI_STREAM_FOLD so a short run folds: the real pipe,
recorder, folds and report. The CPU run's windows hold no kernels, so there is no template and the folded rows
are the unmatched ones; tests/test_stream_fold.py checks the matched figures."""

from __future__ import annotations

import json
import os

import pytest

from brrrtui.recording.store import load_recording
from tests.conftest import SCRIPTS, run_brrrtui


@pytest.fixture(scope="module")
def folded(tmp_path_factory):
    out = str(tmp_path_factory.mktemp("fold") / "run.brrr")
    args = ["record", "--stream", "--no-calibrate", "--window-steps", "2", "--duty", "0.2", "--min-gap", "0"]
    proc = run_brrrtui(
        *args,
        "-o",
        out,
        os.path.join(SCRIPTS, "fake_cupti.py"),
        os.path.join(SCRIPTS, "train_lines.py"),
        "1500",
        env={"BRRRTUI_STREAM_FOLD": "200,300,400"},
    )
    assert proc.returncode == 0, proc.stderr[-2000:]
    report = run_brrrtui("report", "--json", out)
    assert report.returncode == 0, report.stderr[-2000:]
    return load_recording(out), json.loads(report.stdout)


def test_the_recorder_folds_all_but_the_newest_rows(folded):
    trace, _ = folded
    meta, fold = trace.meta["stream"], trace.meta["stream_fold"]
    agg = trace.stream_agg
    assert fold["folds"] > 0 and fold["error"] == "" and fold["keep_rows"] == 200
    assert trace.stream_total == meta["records"] == len(trace.stream) + int(agg["count"].sum())
    assert fold["folded_rows"] == int(agg["count"].sum()) == int(trace.stream_busy["count"].sum())
    assert 200 <= len(trace.stream) < 200 + 300 + max(trace.stream_folds.rows)  # the newest rows stay raw
    assert int(agg.dur_ns.sum()) + int(trace.stream.dur_ns.sum()) > 0


def test_the_report_counts_every_streamed_row(folded):
    trace, report = folded
    stream = report["stream"]
    assert stream["records"] == stream["rows_analysed"] == trace.stream_total
    assert stream["folded"] == trace.meta["stream_fold"]["folded_rows"] > 0
    assert stream["gpu_ns"] == int(trace.stream_agg.dur_ns.sum()) + int(trace.stream.dur_ns.sum())
