"""The kernel stream between windows, without an app: inferred lines on a recorded H200 fixture whose stream is
made of copies of its own window (tests/stream_fixture.py), the timeline's pages, the report's stream section."""

import numpy as np
import pytest
from stream_fixture import UNKNOWN, make_stream_recording, window_rows

from analyzers.analyze import analyze
from analyzers.stream.lines import stream_view
from brrrtui.present.details import Node, describe
from brrrtui.present.lanes import INFERRED, STREAMED, PageKey
from brrrtui.present.report import render_text, to_json
from brrrtui.present.snapshot import build_snapshot
from brrrtui.recording.load import load_trace

REPEATS = 3


@pytest.fixture(scope="module")
def gpt(tmp_path_factory):
    path = make_stream_recording(tmp_path_factory.mktemp("stream"), repeats=REPEATS, unknown=3, before=True)
    trace = load_trace(path)
    return trace, analyze(trace)


def test_fixture_holds_the_copies_and_the_unknown_kernels(gpt):
    trace, _ = gpt
    n = len(window_rows(trace, 0))
    assert n == 250
    assert trace.stream_total == len(trace.stream) == n * REPEATS + 3 + n
    assert sorted(set(trace.stream.after_window.tolist())) == [-1, 0]


def test_copies_map_back_to_the_rows_and_lines_they_were_copied_from(gpt):
    trace, analysis = gpt
    view = stream_view(analysis)
    original = window_rows(trace, 0)
    seg = next(s for s in view.segments if s.after_window == 0)
    copies = seg.rows[: REPEATS * len(original)]
    # every copy, and so the last step's copies, lands on the kernel it was copied from, and on its line
    assert view.template_row[copies].tolist() == np.tile(original, REPEATS).tolist()
    assert view.line[copies].tolist() == np.tile(analysis.links.kernel_line[original], REPEATS).tolist()
    assert view.regime[copies].tolist() == np.tile(analysis.kernel_regime[original], REPEATS).tolist()
    assert not view.confirmed.any()  # no later window to confirm them
    # the stream before the first window is aligned to the first window's template
    before = next(s for s in view.segments if s.after_window == -1)
    assert view.template_row[before.rows].tolist() == original.tolist()


def test_unknown_names_stay_unmatched(gpt):
    trace, analysis = gpt
    view = stream_view(analysis)
    names = {trace.name(int(s)) for s in trace.stream.name[view.template_row < 0]}
    assert names == {UNKNOWN.format(i) for i in range(3)}
    assert (view.line[view.template_row < 0] == -1).all() and (view.regime[view.template_row < 0] == -1).all()
    assert view.matched == len(trace.stream) - 3


def test_pages_are_in_time_order_and_stream_pages_hold_gpu_lanes_only(gpt):
    _, analysis = gpt
    snap = build_snapshot(analysis)
    assert snap.pages == [PageKey(-1, True), PageKey(0), PageKey(0, True)]
    starts = [snap.page_lanes(p).start_ns for p in snap.pages]
    assert starts == sorted(starts)
    assert snap.default_page == PageKey(0) and snap.latest_page == PageKey(0, True)
    page = snap.page_lanes(PageKey(0, True))
    assert page.stream and all(lane.kind == "stream" for lane in page.lanes)
    assert sum(len(lane.items) for lane in page.lanes) == 250 * REPEATS + 3
    assert all(len(lane.gaps) == 0 for lane in page.lanes)
    classes = np.concatenate([lane.items.cls for lane in page.lanes])
    assert (classes == STREAMED).sum() == 3 and ((classes >= INFERRED) & (classes < STREAMED)).sum() == 750


def test_details_of_a_streamed_kernel_and_of_a_line(gpt):
    trace, analysis = gpt
    snap = build_snapshot(analysis)
    view = snap.stream
    row = int(np.nonzero((view.line >= 0) & (trace.stream.after_window == 0))[0][0])
    d = describe(snap, Node("streamed", (snap.stream_rowid(row),)))
    text = d.text()
    line = trace.lines[int(view.line[row])]
    assert f"{line.line} (inferred)" in text and "like window 0's kernel" in text
    assert ("kernel", (int(view.template_row[row]),)) in [(n.kind, n.key) for _, n in d.children]
    unknown = int(np.nonzero(view.template_row < 0)[0][0])
    assert (
        "no window has seen this kernel"
        in describe(snap, Node("streamed", (snap.stream_rowid(unknown),))).text()
    )
    lid = int(view.line[row])
    count, ns = snap.stream_lines[lid]
    assert count == int((view.line == lid).sum()) and ns == int(trace.stream.dur_ns[view.line == lid].sum())
    assert f"streamed: {count:,} kernels" in describe(snap, Node("line", (lid,))).text()


def test_report_has_a_stream_section_only_with_stream_rows(gpt, tmp_path):
    trace, analysis = gpt
    js = to_json(analysis)["stream"]
    assert js["records"] == js["rows_analysed"] == len(trace.stream)
    assert js["matched_fraction"] == pytest.approx((len(trace.stream) - 3) / len(trace.stream))
    assert js["confirmed_fraction"] == 0.0
    lines = js["lines"]
    assert lines and lines == sorted(lines, key=lambda x: -x["gpu_ns"])
    view = stream_view(analysis)
    assert sum(x["kernels"] for x in lines) <= view.matched
    assert set(lines[0]) == {"file", "line", "function", "gpu_ns", "kernels", "idle_ns"}
    assert "kernel stream" in render_text(analysis)

    from tui_fakes import h200_recording

    plain = analyze(load_trace(h200_recording("h200_gpt_small", tmp_path)))
    assert "stream" not in to_json(plain) and "kernel stream" not in render_text(plain)
