"""`brrrtui record --stream` end to end on a CPU: the real agent, windows, stream and recorder, with
tests/scripts/fake_cupti.py standing in for libcupti (it hands over the recorded H200 buffer, timestamps
rewritten to the moment of hand-over, while the activity kinds are enabled)."""

from __future__ import annotations

import gzip
import json
import os

import numpy as np
import pytest

from brrrtui.recording.store import load_recording
from tests.conftest import SCRIPTS, run_brrrtui

FIXTURE = os.path.join(os.path.dirname(__file__), "fixtures", "cupti_buffer_h200.json.gz")


@pytest.fixture(scope="module")
def streamed(tmp_path_factory):
    out = str(tmp_path_factory.mktemp("stream") / "run.brrr")
    proc = run_brrrtui(
        "record",
        "--stream",
        "--no-calibrate",
        "--window-steps",
        "2",
        "--duty",
        "0.5",  # at 0.2 the windows' cost spaced them 400-500 steps apart: 2 in 1500 steps; at 0.5, 6-7
        "--min-gap",
        "0",
        "-o",
        out,
        os.path.join(SCRIPTS, "fake_cupti.py"),
        os.path.join(SCRIPTS, "train_lines.py"),
        "1500",
    )
    assert proc.returncode == 0, proc.stderr[-2000:]
    return load_recording(out), proc.stderr


def test_every_streamed_record_reaches_the_recording_with_its_name(streamed):
    trace, stderr = streamed
    stream, meta = trace.stream, trace.meta["stream"]
    assert len(stream) == trace.stream_total == meta["records"] > 0 and meta["error"] is None
    assert (
        "kernel stream:" in stderr and meta["late_buffers_dropped"] == 0 and meta["incomplete_dropped"] == 0
    )
    with gzip.open(FIXTURE) as f:
        kernel_names = set(json.load(f)["names"].values())
    names = {trace.strings[i] for i in np.unique(stream.name)}
    assert names - kernel_names == {"Memset (Device)", "Memcpy DtoH (Device -> Pageable)"}
    assert {trace.strings[i] for i in np.unique(stream.grid[stream.kind == 0])} >= {"1,1,1"}


def test_the_stream_is_paused_while_a_window_profiles(streamed):
    """No streamed record starts inside a window, and each names the last window closed before it."""
    trace, _ = streamed
    windows, stream = trace.windows, trace.stream
    assert len(windows) >= 3
    for start, end in zip(windows.start_ns.tolist(), windows.end_ns.tolist(), strict=True):
        assert not ((stream.start_ns >= start) & (stream.start_ns <= end)).any()
    closed_before = np.searchsorted(np.sort(windows.end_ns), stream.start_ns) - 1
    last_closed = np.where(closed_before >= 0, windows.window[np.argsort(windows.end_ns)][closed_before], -1)
    assert (stream.after_window == last_closed).all()
    assert len(set(stream.after_window.tolist())) >= 3  # streamed between several windows
