"""The narrower arrays the analysis keeps for scale (int32 links, cost ids and gap rows; one grouping pass per
table for the windows) change no figure: on real H200 recordings the report is the same as with int64."""

import json
import os

import numpy as np
import pytest

import analyzers.link.links as links_module
from analyzers import arrays
from analyzers.analyze import analyze
from analyzers.arrays import rows_per_window, window_groups
from analyzers.link.links import link
from analyzers.totals.breakdown import span_breakdown
from brrrtui.present.report import to_json
from brrrtui.recording.load import load_trace

FIXTURES = os.path.join(os.path.dirname(__file__), "fixtures")
RECORDINGS = ["h200_hf_gpt2_modules", "h200_gpt2_compile_block_after", "h200_resnet50_modules"]


@pytest.mark.parametrize("name", RECORDINGS)
def test_int32_links_give_the_int64_report(name: str, monkeypatch: pytest.MonkeyPatch) -> None:
    trace = load_trace(os.path.join(FIXTURES, f"{name}.brrr.gz"))
    narrow = link(trace)
    row_columns = [f for f in narrow.__dataclass_fields__ if f not in ("op_compiled", "compiled")]
    assert {getattr(narrow, f).dtype for f in row_columns} == {np.dtype(np.int32)}
    report = json.dumps(to_json(analyze(trace)))

    monkeypatch.setattr(links_module, "_index_dtype", lambda trace: np.int64)
    wide = link(trace)
    for f in row_columns:
        assert getattr(wide, f).dtype == np.int64
        np.testing.assert_array_equal(getattr(wide, f), getattr(narrow, f), err_msg=f)
    assert json.dumps(to_json(analyze(trace))) == report
    assert (narrow.kernel_line >= 0).any() and (narrow.op_parent >= 0).any()  # the links are not all NONE


def test_rows_per_window_are_the_rows_a_mask_selects() -> None:
    rng = np.random.default_rng(7)
    for window in (np.sort(rng.integers(0, 6, 500)), rng.integers(0, 6, 500)):
        wins = [3, 0, 5, 9, 3]
        got = rows_per_window(window.astype(np.int32), wins)
        for w, rows in zip(wins, got, strict=True):
            assert np.arange(len(window))[rows].tolist() == np.nonzero(window == w)[0].tolist()
        assert isinstance(got[0], slice) == bool((window[1:] >= window[:-1]).all())


def test_span_breakdown_matches_a_nanosecond_count() -> None:
    """Every ns of [lo, hi) goes to the highest-priority regime running then (compute 0 > memory 1 >
    communication 3 > overhead 2; none: overhead and idle), counted one ns at a time."""
    rng = np.random.default_rng(3)
    for _ in range(30):
        n = int(rng.integers(1, 40))
        start = rng.integers(0, 300, n)
        end = start + rng.integers(0, 60, n)
        regime = rng.choice(np.array([0, 1, 2, 3], dtype=np.int8), n)
        lo, hi = 20, 280
        b = span_breakdown(lo, hi, start, end, regime)
        counts = {"compute": 0, "memory": 0, "comm": 0, "idle": 0, "hidden": 0}
        for t in range(lo, hi):
            on = {int(r) for s, e, r in zip(start, end, regime, strict=True) if s <= t < e}
            if 0 in on:
                counts["compute"] += 1
            elif 1 in on:
                counts["memory"] += 1
            elif 3 in on:
                counts["comm"] += 1
            elif not on:
                counts["idle"] += 1
            counts["hidden"] += bool(on & {0, 1}) and 3 in on
        got = (b.compute_ns, b.memory_ns, b.communication_ns, b.idle_ns, b.communication_hidden_ns)
        assert got == tuple(counts.values())
        assert b.compute_ns + b.memory_ns + b.communication_ns + b.overhead_ns == hi - lo


def test_window_groups_tile_every_table_with_whole_windows() -> None:
    ops = np.repeat(np.arange(6, dtype=np.int32), [4, 0, 3, 5, 1, 2])  # window 1: no ops
    runtime = np.array([0, 0, 1, 2, 3, 3, 3, 5, 7], dtype=np.int32)  # window 1 and 7: in one table only
    groups = window_groups((ops, runtime), rows=4)
    for k, table in enumerate((ops, runtime)):
        cuts = [g[k] for g in groups]
        assert cuts[0].start == 0 and cuts[-1].stop == len(table)
        # one after another, no row twice
        assert all(a.stop == b.start for a, b in zip(cuts, cuts[1:], strict=False))
    for g in groups:  # a window's rows of every table in one group
        ids = [set(t[s].tolist()) for t, s in zip((ops, runtime), g, strict=True)]
        others = [
            set(t[: s.start].tolist()) | set(t[s.stop :].tolist())
            for t, s in zip((ops, runtime), g, strict=True)
        ]
        assert not (ids[0] | ids[1]) & (others[0] | others[1])
    assert [g[0] for g in groups] == [slice(0, 4), slice(4, 12), slice(12, 15)]
    assert window_groups((ops[::-1].copy(), runtime), rows=4) == [(slice(0, 15), slice(0, 9))]  # not in order
    assert window_groups((ops, runtime), rows=15) == [(slice(0, 15), slice(0, 9))]  # too few rows to split


@pytest.mark.parametrize(
    "name", ["h200_bert", "h200_gpt2_compile_block_after", "h200_known_regimes_sleep20"]
)  # 2, 3 and 4 windows
def test_links_and_report_group_by_group_are_the_whole_traces(
    name: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The passes that go window group by window group (the calls' nesting, each op's span, the lines' CPU time,
    the CPU's cover of the gaps) or chunk by chunk (the spans ops inherit) give the links and the report of one
    group of every row: every window of real H200 recordings analysed, a window a group."""
    trace = load_trace(os.path.join(FIXTURES, f"{name}.brrr.gz"))
    every = trace.windows.window.tolist()
    whole, report = link(trace), json.dumps(to_json(analyze(trace, windows=every)))
    monkeypatch.setattr(arrays, "GROUP_ROWS", 100)
    assert len(window_groups((trace.ops.window,))) == len(every)
    grouped = link(trace)
    for f in whole.__dataclass_fields__:
        if f != "compiled":
            np.testing.assert_array_equal(getattr(grouped, f), getattr(whole, f), err_msg=f)
    assert json.dumps(to_json(analyze(trace, windows=every))) == report
