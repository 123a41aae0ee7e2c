"""Passes that take their rows a chunk at a time to bound their temporaries (the gaps' causes, the launch-bound
kernels, the torch calls' time the main thread's waits are told from) and the run-by-run sums of a kernel's
share of its op: the same figures as in one piece, on real H200 recordings cut into chunks of 7 rows."""

import os

import numpy as np
import pytest

from analyzers import arrays
from analyzers.analyze import select_windows
from analyzers.cost.kernel_costs import duration_shares
from analyzers.cost.roofline import host_copies
from analyzers.idle import cpu_waits
from analyzers.idle.gap_evidence import GapEvidence, Intervals
from analyzers.idle.gaps import GapCause
from analyzers.link.links import link
from analyzers.pass_groups import gaps_and_waits, launch_timing
from analyzers.results import GAP_CAUSE_CODES
from brrrtui.contract.model import flag_of
from brrrtui.recording.load import load_trace

FIXTURES = os.path.join(os.path.dirname(__file__), "fixtures")


@pytest.mark.parametrize("name", ["h200_known_regimes_sleep20", "h200_bert", "h200_gpt2_compiled_loss"])
def test_gap_causes_and_launch_bound_kernels_chunk_by_chunk_are_the_whole_ones(
    name: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    trace = load_trace(os.path.join(FIXTURES, f"{name}.brrr.gz"))
    trace = select_windows(trace, trace.windows.window.tolist())
    links = link(trace)
    whole = gaps_and_waits(trace, links, host_copies(trace))
    whole_launch = launch_timing(trace, links, whole.busy)
    assert len(whole.gaps) > 7 * 20 and whole_launch[2].sum() > 0  # many chunks; some kernels launch-bound
    causes = set(whole.gaps.cause.tolist())
    assert GAP_CAUSE_CODES[GapCause.HOST] in causes and (whole.gaps.line >= 0).any()

    monkeypatch.setattr(arrays, "GROUP_ROWS", 7)
    chunked = gaps_and_waits(trace, links, host_copies(trace))
    for column in whole.gaps.columns:
        np.testing.assert_array_equal(chunked.gaps[column], whole.gaps[column], err_msg=column)
    chunked_launch = launch_timing(trace, links, chunked.busy)
    np.testing.assert_array_equal(chunked_launch[2], whole_launch[2])
    assert chunked_launch[1] == whole_launch[1]


@pytest.mark.parametrize("name", ["h200_known_regimes_sleep20", "h200_hf_gpt2_steady"])
def test_the_torch_calls_time_window_by_window_is_the_whole_union(
    name: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The union of the torch calls' and the spans' time, taken a window group at a time and then once more
    over the groups' unions, is the union of every row at once; so are the main thread's waits."""
    trace = load_trace(os.path.join(FIXTURES, f"{name}.brrr.gz"))
    ops, spans = trace.ops, trace.spans
    o = np.flatnonzero(flag_of(trace.string_flags(cpu_waits._is_torch_op), ops.name))
    whole = Intervals(
        np.concatenate((ops.start_ns[o], spans.start_ns)),
        np.concatenate((ops.start_ns[o] + ops.dur_ns[o], spans.start_ns + spans.dur_ns)),
    )
    blocked = GapEvidence(trace, link(trace), host_copies(trace)).sync_union
    waits = cpu_waits.main_thread_waits(trace, blocked)
    assert (waits.off > 0).any() or name != "h200_known_regimes_sleep20"  # the sleeps are waits

    monkeypatch.setattr(arrays, "GROUP_ROWS", 7)
    assert len(arrays.window_groups((ops.window, spans.window))) == len(trace.windows) >= 2
    grouped = cpu_waits._in_torch(trace)
    for column in ("s", "e", "cum"):
        np.testing.assert_array_equal(getattr(grouped, column), getattr(whole, column), err_msg=column)
    chunked = cpu_waits.main_thread_waits(trace, blocked)
    for column in ("window", "start", "end", "off", "line"):
        np.testing.assert_array_equal(getattr(chunked, column), getattr(waits, column), err_msg=column)
    for column in ("window", "start", "end", "off"):
        np.testing.assert_array_equal(getattr(chunked.pieces, column), getattr(waits.pieces, column))
    # a wait's free time from the busy unions where they overlap it, as from their union over the whole trace
    stretches = (waits.window, waits.start, waits.end, waits.off)
    one_union = Intervals(np.concatenate((whole.s, blocked.s)), np.concatenate((whole.e, blocked.e)))
    apart, together = (
        cpu_waits._place(*stretches, (whole, blocked)),
        cpu_waits._place(*stretches, (one_union,)),
    )
    assert len(apart.start) >= (waits.off > 0).sum() > 0 or name != "h200_known_regimes_sleep20"
    for column in ("window", "start", "end", "off"):
        np.testing.assert_array_equal(getattr(apart, column), getattr(together, column), err_msg=column)


def test_shares_of_owners_in_order_are_the_shares_of_a_table_of_every_owner() -> None:
    """Owners in row order are summed run by run; any other order through a table of every owner (bincount):
    the same shares, equal ones where an owner's rows all took 0 ns."""

    def by_table(owner: np.ndarray, dur: np.ndarray) -> np.ndarray:
        ok = owner >= 0
        o, d = owner[ok], dur[ok].astype(np.float64)
        tot, cnt = np.bincount(o, weights=d)[o], np.bincount(o)[o]
        return np.where(tot > 0, d / np.where(tot > 0, tot, 1.0), 1.0 / cnt)

    rng = np.random.default_rng(7)
    owner = np.sort(rng.integers(-1, 400, 5000))  # in order, runs of ~12 rows, NONE first
    dur = rng.integers(0, 3, 5000) * rng.integers(1, 10**6, 5000)  # a third 0 ns: some owners all 0
    for o in (owner, rng.permutation(owner), np.arange(5000)):
        ok, share = duration_shares(o, dur)
        np.testing.assert_array_equal(ok, o >= 0)
        np.testing.assert_array_equal(share, by_table(o, dur))
    ok, share = duration_shares(owner, dur)
    assert (share == 1.0 / np.bincount(owner[ok])[owner[ok]])[
        dur[ok] == 0
    ].any()  # an all-0 owner's equal shares
