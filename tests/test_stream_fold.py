"""The folded kernel stream: a recording whose older stream rows the recorder folded into aggregates gives the
same per-line figures for the whole run as the same stream kept raw, opens like any recording while and after
it is written, and older recordings (no aggregates) read as before."""

import numpy as np
import pytest
from stream_fold_fixture import record

from analyzers.analyze import analyze
from analyzers.stream.lines import stream_figures, stream_view, templates
from brrrtui.contract.stream_align import TemplateNames, align, align_from
from brrrtui.present.report import render_text, to_json
from brrrtui.present.snapshot import build_snapshot
from brrrtui.record.fold import StreamFolder
from brrrtui.recording import store
from brrrtui.recording.store import load_recording

NAMES = ["h200_known_regimes", "h200_hf_gpt2_steady"]


def _figures(path):
    trace = load_recording(path)
    analysis = analyze(trace)
    return trace, analysis, stream_figures(stream_view(analysis))


@pytest.fixture(scope="module", params=NAMES)
def pair(request, tmp_path_factory):
    tmp = tmp_path_factory.mktemp("fold")
    raw = record(str(tmp / "raw.brrr"), request.param, tmp, StreamFolder(keep_rows=10**9))
    folded = record(
        str(tmp / "folded.brrr"), request.param, tmp, StreamFolder(keep_rows=3_000, chunk_rows=2_000)
    )
    return _figures(raw), _figures(folded)


def test_the_folded_recording_holds_aggregates_and_only_the_newest_rows_raw(pair):
    (raw_trace, _, _), (trace, _, fig) = pair
    assert len(raw_trace.stream_agg) == 0 and len(raw_trace.stream) == raw_trace.stream_total
    assert len(trace.stream_agg) > 0 and len(trace.stream_folds) > 0
    assert 3_000 <= len(trace.stream) < 3_000 + 2_000 + 2 * 700
    assert trace.stream_total == raw_trace.stream_total == fig.records == fig.analysed
    assert fig.folded == trace.stream_total - len(trace.stream) == int(trace.stream_agg["count"].sum())
    # the raw rows kept are the newest ones, the same as in the unfolded recording
    tail = raw_trace.stream.take(np.arange(len(raw_trace.stream) - len(trace.stream), len(raw_trace.stream)))
    assert (tail.start_ns == trace.stream.start_ns).all() and (tail.name == trace.stream.name).all()
    assert trace.meta["stream_fold"]["folded_rows"] == fig.folded
    # the time profile holds the same rows, time and idle as the aggregates, in 200 ms buckets
    busy, agg = trace.stream_busy, trace.stream_agg
    assert int(busy["count"].sum()) == fig.folded and (busy.bucket_ns == 200_000_000).all()
    assert int(busy.dur_ns.sum()) == int(agg.dur_ns.sum()) and int(busy.gap_ns.sum()) == int(agg.gap_ns.sum())


def test_per_line_figures_of_the_whole_run_are_the_same_folded_or_raw(pair):
    (_, _, raw), (_, _, folded) = pair
    assert raw.folded == 0 and folded.folded > 0
    assert [(s.line, s.kernels, s.gpu_ns, s.idle_ns) for s in folded.lines] == [
        (s.line, s.kernels, s.gpu_ns, s.idle_ns) for s in raw.lines
    ]
    assert (folded.gpu_ns, folded.idle_ns, folded.matched, folded.confirmed) == (
        raw.gpu_ns,
        raw.idle_ns,
        raw.matched,
        raw.confirmed,
    )
    assert raw.matched < raw.analysed  # unknown kernels stay unmatched
    assert sum(s.kernels for s in raw.lines) > 0


def test_confirmation_counts_where_a_later_window_agrees(pair):
    (raw_trace, _, raw), _ = pair
    if len(raw_trace.windows) == 2 and (raw_trace.windows.first_step >= 0).all():  # both windows analysed
        assert 0 < raw.confirmed < raw.matched


def test_the_recorders_templates_are_the_analysis_own(pair):
    (trace, analysis, _), _ = pair
    own = templates(analysis)
    st = trace.stream_templates
    assert set(own) <= set(np.unique(st.window).tolist())
    for win, t in own.items():
        sel = np.nonzero(st.window == win)[0]
        assert st.name[sel].tolist() == t.names.tolist()
        assert st.correlation[sel].tolist() == analysis.trace.gpu.correlation[t.rows].tolist()


def test_a_recording_read_while_it_is_folded_loads_what_was_committed(tmp_path):
    """Every batch and fold is one transaction: a load between them sees whole folds only."""
    folder = StreamFolder(keep_rows=3_000, chunk_rows=2_000)
    seen = []
    fold = folder.fold

    def fold_and_load(writer):
        fold(writer)
        trace = load_recording(writer.path)
        seen.append((trace.stream_total, len(trace.stream), int(trace.stream_agg["count"].sum())))
        if seen[-1][2]:  # the meta lands with its fold
            assert trace.meta["stream_fold"]["folded_rows"] == seen[-1][2]

    folder.fold = fold_and_load
    record(str(tmp_path / "live.brrr"), NAMES[0], tmp_path, folder)
    assert len(seen) > 3
    for total, raw, folded in seen:
        assert raw + folded == total and raw >= 3_000


@pytest.mark.parametrize("where", ["total", "read"])
def test_a_fold_committed_while_a_load_reads_the_stream_is_read_whole(tmp_path, monkeypatch, where):
    """A load reads the aggregates, the stream's row count and its raw rows in separate statements; the
    recorder's fold is committed between two of them here (before the count: rows were in neither table;
    before the rows: an emptied batch read as damaged). The load reads the stream's tables again."""
    folder = StreamFolder(keep_rows=3_000, chunk_rows=2_000)
    fold, seen = folder.fold, []
    real = getattr(store.Tables, where)

    def fold_during_a_load(writer):
        if seen or folder._chunk()[1] < folder.chunk_rows:
            return fold(writer)
        fired = []

        def hooked(self, table, *a, **kw):
            if table == "stream" and not fired:
                fired.append(
                    fold(writer)
                )  # the recorder's fold commits here, between the reader's statements
            return real(self, table, *a, **kw)

        with monkeypatch.context() as m:
            m.setattr(store.Tables, where, hooked)
            trace = load_recording(writer.path)
        assert fired
        seen.append((trace.stream_total, len(trace.stream), int(trace.stream_agg["count"].sum())))

    folder.fold = fold_during_a_load
    record(str(tmp_path / "live.brrr"), NAMES[0], tmp_path, folder)
    ((total, raw, folded),) = seen
    assert folded and raw + folded == total


@pytest.mark.parametrize("seed", range(6))
def test_vectorised_alignment_is_the_greedy_one_chunk_by_chunk(seed):
    rng = np.random.default_rng(seed)
    names = rng.integers(0, 12, size=int(rng.integers(1, 60)))
    t = TemplateNames.of(0, names)
    stream = np.tile(names, 30)
    stream = stream[rng.random(len(stream)) > 0.03]  # dropped kernels
    stream[rng.random(len(stream)) < 0.02] = 99  # names the template lacks
    want = align(stream.tolist(), t)
    got, _ = align_from(stream, t)
    assert got.tolist() == want
    cuts = sorted(rng.integers(0, len(stream), size=5).tolist())
    parts, expect = [], 0
    for lo, hi in zip([0, *cuts], [*cuts, len(stream)], strict=True):
        p, expect = align_from(stream[lo:hi], t, expect)
        parts.append(p)
    assert np.concatenate(parts).tolist() == want


def test_the_reports_stream_section_is_the_same_folded_or_raw(pair):
    (_, raw_analysis, _), (_, analysis, fig) = pair
    raw, folded = to_json(raw_analysis)["stream"], to_json(analysis)["stream"]
    assert folded.pop("folded") == fig.folded > 0 and raw.pop("folded") == 0
    assert folded == raw and folded["rows_analysed"] == folded["records"]
    assert f"({fig.folded:,} folded into aggregates)" in render_text(analysis)


def test_the_line_details_count_the_folded_kernels(pair):
    _, (_, analysis, fig) = pair
    snap = build_snapshot(analysis)
    assert snap.stream_lines == {s.line: (s.kernels, s.gpu_ns) for s in fig.lines}
    assert sum(k for k, _ in snap.stream_lines.values()) > len(analysis.trace.stream)
