"""Clock offsets between ranks recovered from the collectives they share (analyzers.comm.clocks): two simulated
nodes whose clocks differ, on hand-built traces with NCCL-like end jitter. The real gloo run, one rank's clock
shifted: tests/test_ranks_e2e.py."""

import dataclasses

import numpy as np
from fixtures.synthetic import T0, TraceBuilder

from analyzers.comm.clocks import clock_offsets, collective_ends

US = 1_000
MS = 1_000_000
ALLREDUCE = "ncclDevKernel_AllReduce_Sum_bf16_RING_LL(ncclDevKernelArgsStorage<4096ul>)"
ALLGATHER = "ncclDevKernel_AllGather_RING_LL(ncclDevKernelArgsStorage<4096ul>)"


def node_rank(clock_ns: int, rng: np.random.Generator, late_one: bool = False):
    """A rank whose clock reads `clock_ns` ahead of true time: 3 windows of 2 steps (100 ms each), 8
    all-reduce buckets and 2 all-gathers per step. Each collective really ends at the same true moment on every
    rank; its recorded end carries 10 us of jitter (and one ends 5 ms late with `late_one`)."""
    b = TraceBuilder(t0=T0 + clock_ns)
    for i in range(40):
        b.step(i, (i + 1) * 100 * MS)
    for w, first in enumerate((10, 20, 30)):
        b.window(first * 100 * MS, (first + 2) * 100 * MS, first_step=first, last_step=first + 1, window=w)
        for s in (first, first + 1):
            for k, name in enumerate([ALLREDUCE] * 8 + [ALLGATHER] * 2):
                true_end = s * 100 * MS + 40 * MS + k * 3 * MS
                end = true_end + int(rng.normal(0, 10 * US))
                dur = int(rng.uniform(0.2, 2.5) * MS)  # the wait differs by rank: the end does not
                b.gpu_row(name, end - dur, dur, window=w, stream=20 + k % 2)
    trace = b.build()
    if late_one:
        g = trace.gpu
        g.columns["dur_ns"] = g.dur_ns.copy()
        g.dur_ns[5] += 5 * MS
    return trace


def test_two_simulated_nodes_offset_recovered_within_50_us():
    rng = np.random.default_rng(16)
    true = {0: 0, 1: 0, 2: 1_234_567_890, 3: 1_234_567_890}  # node B (ranks 2, 3) reads 1.23 s ahead
    traces = {r: node_rank(off, rng, late_one=r == 3) for r, off in true.items()}
    found = clock_offsets(traces)
    assert sorted(found) == [0, 1, 2, 3]
    for r, off in true.items():
        assert abs(found[r].offset_ns - off) < 50 * US, (r, found[r])
        assert found[r].matched == 60  # 3 windows x 2 steps x 10 collectives
    assert found[3].spread_ns < 50 * US  # one 5 ms straggling end does not move the median


def test_groups_pair_by_window_and_name_and_mismatched_counts_are_left_out():
    rng = np.random.default_rng(1)
    a, b = node_rank(0, rng), node_rank(7 * MS, rng)
    ends = collective_ends(a)
    assert sorted(ends) == sorted(((f, f + 1), n) for f in (10, 20, 30) for n in (ALLREDUCE, ALLGATHER))
    assert all(np.all(np.diff(v) > 0) for v in ends.values())
    # rank b lost one all-gather of its second window: that group is skipped, the rest still pair
    keep = np.ones(len(b.gpu), dtype=bool)
    keep[np.flatnonzero(b.gpu.window == 1)[-1]] = False
    b = dataclasses.replace(b, gpu=b.gpu.take(keep))
    found = clock_offsets({0: a, 1: b})
    assert found[1].matched == 60 - 4 and abs(found[1].offset_ns - 7 * MS) < 50 * US
    nothing = dataclasses.replace(b, gpu=b.gpu.take(np.zeros(len(b.gpu), dtype=bool)))
    assert sorted(clock_offsets({0: a, 1: nothing})) == [0]  # no collective shared: no offset
