"""Communication as the fourth component of the breakdown (analyzers.comm.collectives), on hand-built traces whose
arithmetic is exact: which kernels are collectives, exposed and hidden time over overlapping intervals, bytes
from the collective's op or the row itself, bus bandwidth, the finding and its cure."""

import dataclasses

import pytest
from fixtures.synthetic import BF16, F32, TraceBuilder

from analyzers.analyze import analyze
from analyzers.comm.collectives import bus_factor, collective_kind
from analyzers.results import REGIME_CODES, FindingKind, Regime
from brrrtui.present.finding_words import DDP_ACTION, FSDP_ACTION, action, message

MS = 1_000_000
ALLREDUCE = "ncclDevKernel_AllReduce_Sum_bf16_RING_LL(ncclDevKernelArgsStorage<4096ul>)"
ALLGATHER = "ncclDevKernel_AllGather_RING_LL(ncclDevKernelArgsStorage<4096ul>)"
GEMM = "sm90_xmma_gemm_bf16bf16_bf16f32_f32_tn_n_tilesize128x128x64"
ADD = "vectorized_elementwise_kernel<4, CUDAFunctor_add<float>>"


@pytest.mark.parametrize(
    "name, kind",
    [
        ("ncclDevKernel_AllReduce_Sum_bf16_RING_LL", "all_reduce"),
        ("ncclKernel_AllReduce_RING_LL_Sum_float(ncclWorkElem)", "all_reduce"),
        ("ncclDevKernel_ReduceScatter_Sum_f32_RING_LL", "reduce_scatter"),
        ("ncclKernel_AllGather_RING_LL_Sum_int8_t", "all_gather"),
        ("ncclDevKernel_SendRecv(ncclDevKernelArgsStorage<4096ul>)", "send_recv"),
        ("ncclDevKernel_Broadcast_RING_LL", "broadcast"),
        ("ncclKernel_Reduce_RING_LL_Sum_half", "reduce"),
        ("gloo:all_reduce", "all_reduce"),
        ("gloo:all_gather", "all_gather"),
        ("gloo:reduce_scatter", "reduce_scatter"),
        ("gloo:barrier", "barrier"),
        ("gloo:send", "send_recv"),
        ("ncclDevKernel_Generic_4", "other"),
    ],
)
def test_collective_kind_from_the_name(name, kind):
    assert collective_kind(name) == kind


def test_bus_bandwidth_factors_are_nccl_tests_ones():
    assert bus_factor("all_reduce", 8) == pytest.approx(2 * 7 / 8)
    assert bus_factor("all_gather", 4) == bus_factor("reduce_scatter", 4) == pytest.approx(0.75)
    assert bus_factor("broadcast", 4) == 1.0 and bus_factor("all_reduce", None) is None


def ddp_window(exposed_gather_ms: float = 5, world: int | None = 2):
    """One 100 ms step window:

        stream 7   [gemm 0-40: compute]  [3 us]       [add 60-70: memory]
        stream 20              [all-reduce 28-78 ........................]
        stream 21                                                    [all-gather 75-80]

    all-reduce: hidden 28-40 and 60-70 (22 ms), exposed 40-60 and 70-78 (28 ms; the 3 us kernel at 45 ms is
    overhead, which hides nothing); all-gather: exposed 75-80; communication overall 28-80 (52 ms), exposed
    30 ms, hidden 22 ms; idle 80-100. The all-reduce is launched inside record_param_comms of a 1 Mi-element
    bf16 bucket (its arguments: input, output: the input's 2 MiB count); the all-gather row carries its own
    4096 bytes."""
    b = TraceBuilder()
    bwd = b.line("train.py", 20, "step")
    b.span(bwd, 0, 90 * MS)
    b.launch(GEMM, cpu_ns=1_000, gpu_ns=0, dur_ns=40 * MS)
    b.op("record_param_comms", 20 * MS, 1 * MS, shapes=[[1048576], [1048576], []], dtypes=[BF16, BF16, "Int"])
    b.launch(ALLREDUCE, cpu_ns=20 * MS + 100_000, gpu_ns=28 * MS, dur_ns=50 * MS, stream=20)
    b.launch("tiny_kernel", cpu_ns=30 * MS, gpu_ns=45 * MS, dur_ns=3_000)
    b.launch(ADD, cpu_ns=31 * MS, gpu_ns=60 * MS, dur_ns=10 * MS)
    gather_at = 80 - exposed_gather_ms
    b.launch(ALLGATHER, cpu_ns=32 * MS, gpu_ns=int(gather_at * MS), dur_ns=int(exposed_gather_ms * MS),
             stream=21, nbytes=4096)  # fmt: skip
    b.window(0, 100 * MS, first_step=1, last_step=1)
    b.step(0, 0)
    b.step(1, 100 * MS)
    trace = b.build()
    return dataclasses.replace(trace, meta={"dist": {"world_size": world}} if world else {})


def test_exposed_and_hidden_communication_are_exact_over_overlapping_streams():
    a = analyze(ddp_window())
    b = a.breakdown
    assert (b.span_ns, b.compute_ns, b.memory_ns, b.communication_ns) == (100 * MS, 40 * MS, 10 * MS, 30 * MS)
    assert b.communication_hidden_ns == 22 * MS and b.idle_ns == 20 * MS
    assert b.compute_ns + b.memory_ns + b.communication_ns + b.overhead_ns == b.span_ns
    assert b.fraction(Regime.COMMUNICATION) == pytest.approx(0.30)
    c = a.communication
    assert c is not None and (c.kernel_ns, c.exposed_ns, c.hidden_ns) == (52 * MS, 30 * MS, 22 * MS)
    by_kind = {s.kind: s for s in c.collectives}
    assert [s.kind for s in c.collectives] == ["all_reduce", "all_gather"]  # by time
    assert (by_kind["all_reduce"].time_ns, by_kind["all_reduce"].exposed_ns) == (50 * MS, 28 * MS)
    assert (by_kind["all_gather"].time_ns, by_kind["all_gather"].exposed_ns) == (5 * MS, 5 * MS)


def test_collective_kernels_get_no_roofline_regime():
    a = analyze(ddp_window())
    comm = REGIME_CODES[Regime.COMMUNICATION]
    names = [a.trace.name(int(i)) for i in a.trace.gpu.name]
    assert [n for n, r in zip(names, a.kernel_regime.tolist(), strict=True) if r == comm] == [
        ALLREDUCE,
        ALLGATHER,
    ]
    stats = {k.name: k for k in a.kernels}
    assert stats[ALLREDUCE].regime is Regime.COMMUNICATION and stats[ALLREDUCE].achieved_bytes_per_s is None
    assert stats[GEMM].regime is Regime.COMPUTE and stats[ADD].regime is Regime.MEMORY
    line = next(s for s in a.lines if s.line.line == 20)
    assert line.gpu_ns_by_regime[Regime.COMMUNICATION] == 55 * MS


def test_bytes_and_bus_bandwidth():
    c = analyze(ddp_window()).communication
    assert c is not None and c.ranks == 2
    ar, ag = c.collectives
    assert ar.bytes == 2 * 1048576 and ar.sized_calls == 1
    assert ar.algbw_bytes_per_s == pytest.approx(2 * 1048576 / 0.050)
    assert ar.busbw_bytes_per_s == pytest.approx(2 * 1048576 / 0.050 * 2 * 1 / 2)
    assert ag.bytes == 4096  # the row's own; all_gather's S is the gathered output: 2 x 4096
    assert ag.algbw_bytes_per_s == pytest.approx(2 * 4096 / 0.005)
    assert ag.busbw_bytes_per_s == pytest.approx(2 * 4096 / 0.005 / 2)


def test_without_the_number_of_ranks_bus_bandwidth_is_unknown():
    ar, ag = analyze(ddp_window(world=None)).communication.collectives
    assert ar.algbw_bytes_per_s == pytest.approx(2 * 1048576 / 0.050) and ar.busbw_bytes_per_s is None
    assert ag.algbw_bytes_per_s is None  # the gathered size needs n


def test_exposed_communication_is_a_finding_with_the_ddp_cure():
    a = analyze(ddp_window())
    f = next(f for f in a.findings if f.kind is FindingKind.COMMUNICATION)
    assert f.saving_ns == 30 * MS  # per step: all of the exposed time, hidden at best
    assert [(ln.file, ln.line) for ln in f.lines] == [("train.py", 20)]
    assert "30 ms per step (30% of the time; all_reduce 28 ms, all_gather 5 ms)" in message(f)
    assert action(f) == DDP_ACTION and "no_sync" in action(f) and "bucket_cap_mb" in action(f)
    assert a.findings == sorted(a.findings, key=lambda x: -(x.saving_ns or 0))


def test_an_exposed_all_gather_gets_the_fsdp_cure():
    a = analyze(
        ddp_window(exposed_gather_ms=40)
    )  # all-gather 40-80: 20 ms exposed; all-reduce 28 -> 8 exposed
    f = next(f for f in a.findings if f.kind is FindingKind.COMMUNICATION)
    assert action(f) == FSDP_ACTION and "set_modules_to_forward_prefetch" in action(f)


def test_a_run_without_collectives_has_no_communication():
    b = TraceBuilder()
    b.launch(GEMM, cpu_ns=0, gpu_ns=0, dur_ns=10 * MS)
    b.window(0, 20 * MS)
    a = analyze(b.build())
    assert a.communication is None and a.breakdown.communication_ns == 0
    assert not [f for f in a.findings if f.kind is FindingKind.COMMUNICATION]


def test_gloo_collectives_on_the_cpu_give_time_and_bytes():
    """A CPU-only run: gloo's ops span the whole collective; their inputs are the message."""
    b = TraceBuilder(device=None)
    b.op("gloo:all_reduce", 0, 4 * MS, shapes=[[2177]], dtypes=[F32], tid=5)
    b.op("gloo:all_reduce", 10 * MS, 2 * MS, shapes=[[2177]], dtypes=[F32], tid=5)
    b.op("gloo:barrier", 20 * MS, 1 * MS, tid=5)
    b.window(0, 30 * MS)
    trace = dataclasses.replace(b.build(), meta={"dist": {"world_size": 4}})
    c = analyze(trace).communication
    assert c is not None and c.kernel_ns == 0 and c.exposed_ns == 0
    ar, barrier = c.collectives
    assert (ar.kind, ar.side, ar.calls, ar.time_ns, ar.exposed_ns) == ("all_reduce", "cpu", 2, 6 * MS, None)
    assert ar.bytes == 2 * 2177 * 4 and ar.algbw_bytes_per_s == pytest.approx(2 * 8708 / 0.006)
    assert ar.busbw_bytes_per_s == pytest.approx(2 * 8708 / 0.006 * 1.5)
    assert (barrier.kind, barrier.bytes, barrier.algbw_bytes_per_s) == ("barrier", None, None)


def test_report_text_and_json_carry_the_communication_figures():
    from brrrtui.present.regime_bar import regime_bar
    from brrrtui.present.report import SCHEMA, render_text, to_json

    a = analyze(ddp_window())
    doc = to_json(a)
    assert doc["schema"] == SCHEMA == 4
    parts = doc["breakdown_ns"]
    assert parts == {"compute": 40 * MS, "memory": 10 * MS, "communication": 30 * MS, "overhead": 20 * MS}
    assert sum(parts.values()) == doc["span_ns"]
    c = doc["communication"]
    assert (c["kernel_ns"], c["exposed_ns"], c["hidden_ns"], c["ranks"]) == (52 * MS, 30 * MS, 22 * MS, 2)
    assert c["steps"] == 1
    ar = c["collectives"][0]
    assert (ar["kind"], ar["side"], ar["calls"], ar["time_ns"], ar["exposed_ns"]) == (
        "all_reduce",
        "gpu",
        1,
        50 * MS,
        28 * MS,
    )
    assert ar["bytes"] == 2097152 and ar["busbw_bytes_per_s"] == pytest.approx(2097152 / 0.05)
    assert {k["name"]: k["regime"] for k in doc["kernels"]}[ALLREDUCE] == "communication"
    assert doc["findings"][0]["kind"] == "communication"
    text = render_text(a)
    assert "  comm          30 ms   30%" in text and "22 ms more hidden under compute or memory" in text
    assert "communication (collectives, per step; 2 ranks)" in text
    assert "  all_reduce      gpu       1  50 ms     28 ms     2.1 MB      41.9 MB/s    41.9 MB/s" in text
    bar = "".join(t for t, _ in regime_bar("w", a.breakdown, 20))
    assert bar == "w ████████▓▓▒▒▒▒▒▒░░░░ C 40% M 10% N 30% O 20% (idle 20%)"


def test_a_run_without_collectives_reports_as_before():
    from brrrtui.present.regime_bar import regime_bar
    from brrrtui.present.report import render_text, to_json

    b = TraceBuilder()
    b.launch(GEMM, cpu_ns=0, gpu_ns=0, dur_ns=10 * MS)
    b.window(0, 20 * MS)
    a = analyze(b.build())
    doc = to_json(a)
    assert doc["communication"] is None and doc["breakdown_ns"]["communication"] == 0
    assert "comm" not in render_text(a)
    assert "N " not in "".join(t for t, _ in regime_bar("w", a.breakdown, 20))


def test_the_perfetto_export_gives_collectives_their_category_and_colour():
    from brrrtui.present.perfetto import to_perfetto

    a = analyze(ddp_window())
    doc = to_perfetto(a.trace, [a], {})
    events = [e for e in doc["traceEvents"] if e.get("name") == ALLREDUCE]
    assert events and events[0]["cat"] == "kernel,communication" and events[0]["cname"] == "rail_load"
    assert events[0]["args"]["regime"] == "communication"


class _NcclEvent:
    """A Kineto event of an NCCL kernel as the capture sees it: its collective metadata in extra_meta or, as
    some builds give it, in the activity's metadata JSON (members without braces)."""

    def __init__(self, extra=None, metadata=""):
        self.extra, self.metadata = extra, metadata

    def extra_meta(self):
        if self.extra is None:
            raise AttributeError("extra_meta")
        return self.extra

    def metadata_json(self):
        return self.metadata


def test_the_capture_reads_an_nccl_kernel_size_from_kineto_metadata():
    from brrrtui.capture.convert import collective_bytes

    assert collective_bytes(_NcclEvent({"In msg nelems": "1048576", "dtype": "BFloat16"})) == 2 * 1048576
    assert (
        collective_bytes(
            _NcclEvent({}, '"Collective name": "allreduce", "In msg nelems": 10, "dtype": "Float"')
        )
        == 40
    )
    assert collective_bytes(_NcclEvent(None, '{"In msg nelems": 3, "dtype": "Long"}')) == 24
    assert collective_bytes(_NcclEvent({}, "not json")) == -1
    assert collective_bytes(_NcclEvent({"In msg nelems": "8", "dtype": "Mystery"})) == -1


def test_chrome_traces_give_nccl_kernels_their_message_size(tmp_path, monkeypatch):
    """A torch.profiler trace's NCCL kernel carries "In msg nelems" and "dtype" (Kineto's collective metadata):
    both readers, the bulk one and json's, put the size in the row's bytes; other kernels keep none."""
    from test_chrome_fast import both, events, kernel, write

    from brrrtui.contract.collectives import message_bytes
    from brrrtui.recording.chrome import bulk as chrome_fast

    monkeypatch.setattr(chrome_fast, "BLOCK", 700)
    evs = events(20)
    evs.insert(3, kernel(100, ALLREDUCE, **{"In msg nelems": 1048576, "dtype": "BFloat16", "Group size": 2}))
    evs.insert(9, kernel(101, ALLGATHER, **{"In msg nelems": "10", "dtype": "Float"}))
    evs.insert(12, kernel(102, ALLGATHER, **{"In msg nelems": 10, "dtype": "Mystery"}))
    for trace in both(write(str(tmp_path / "nccl.json"), evs)):
        names = [trace.strings[i] for i in trace.gpu.name.tolist()]
        sizes = dict(zip(trace.gpu.correlation.tolist(), trace.gpu.bytes.tolist(), strict=True))
        assert (sizes[100], sizes[101], sizes[102]) == (2 * 1048576, 40, -1)
        assert {s for n, s in zip(names, trace.gpu.bytes.tolist(), strict=True) if n == "sm90_gemm"} == {-1}
    assert (
        message_bytes(True, "Float") == -1
        and message_bytes(-3, "Float") == -1
        and message_bytes(2, None) == -1
        and message_bytes(float("inf"), "Float") == -1  # json reads 1e999 as inf
    )
