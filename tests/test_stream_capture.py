"""The kernel stream's decoder and logic on a real CUPTI buffer recorded on the H200, and line inference on a
real H200 recording made with `brrrtui record --stream` (examples/train_gpt.py)."""

from __future__ import annotations

import gzip
import json
import os
import threading

import numpy as np
import pytest

from analyzers.analyze import analyze
from analyzers.store import load_recording
from analyzers.stream import stream_view
from brrrtui.capture import records
from brrrtui.capture.stream import KernelStream, clock_offset, demangle
from brrrtui.capture.windows import Interner
from brrrtui.recorder import StreamLatency

FIXTURES = os.path.join(os.path.dirname(__file__), "fixtures")


@pytest.fixture(scope="module")
def buffer():
    with gzip.open(os.path.join(FIXTURES, "cupti_buffer_h200.json.gz")) as f:
        fx = json.load(f)
    b = fx["buffers"][0]
    data = gzip.decompress(bytes.fromhex(b["hex_gz"]))
    sizes = {int(k): v for k, v in fx["sizes"].items()}
    names = {int(k): v for k, v in fx["names"].items()}
    return data, sizes, names, b["expected"]


def test_walk_finds_every_record_at_nvidias_offsets(buffer):
    data, sizes, _, expected = buffer
    offsets = records.walk(data, sizes)
    got = sorted((int(o), k) for k, offs in offsets.items() for o in offs)
    assert got == sorted((e["offset"], e["kind"]) for e in expected)
    assert records.walk(data, {10: 216}) is None  # a kind of unknown size: learn sizes first
    # columns() reads each field through a view of the buffer as the field's type: fields must be aligned
    for fields in records.FIELDS.values():
        assert all(at % np.dtype(t).itemsize == 0 for at, t in fields.values())


def test_decode_matches_nvidias_dtypes_field_by_field(buffer):
    """`expected` was decoded on the H200 with cupti-python's own numpy dtypes (activity_kernel10_dtype, ...)."""
    data, sizes, names, expected = buffer
    d = records.decode(data, records.walk(data, sizes), names.__getitem__)
    assert len(d) == len(expected) == 63
    by_corr = {int(c): i for i, c in enumerate(d.correlation)}
    for e in expected:
        i = by_corr[e["correlation_id"]]
        assert (d.start[i], d.end[i], d.device[i], d.stream[i]) == (
            e["start"],
            e["end"],
            e["device_id"],
            e["stream_id"],
        )
        if e["kind"] == records.CONCURRENT_KERNEL_KIND:
            assert d.kind[i] == 0 and d.name[i] == names[e["name"]]
            assert d.grid[i] == f"{e['grid_x']},{e['grid_y']},{e['grid_z']}"
            assert d.block[i] == f"{e['block_x']},{e['block_y']},{e['block_z']}"
        elif e["kind"] == records.MEMSET_KIND:
            assert d.kind[i] == 2 and d.bytes[i] == e["bytes"] and d.name[i] == "Memset (Device)"
        else:
            assert d.kind[i] == 1 and d.bytes[i] == e["bytes"]
            assert d.name[i] == "Memcpy DtoH (Device -> Pageable)"  # Kineto's name for the same copy
    assert records.complete(d).all() and not records.malformed(d).any()


def test_incomplete_and_malformed_records():
    d = records.concat([])
    assert len(d) == 0
    e = np.array([0, 10, 5, 7], dtype=np.int64)
    names, none = records.Labels(list("abcd"), np.arange(4)), records.Labels.constant(None, 4)
    d = records.Decoded(np.zeros(4, np.int8), names, np.array([5, 0, 9, 1]), np.array([9, 3, 0, 0]) + e * 0,
                        np.zeros(4, np.int32), np.zeros(4, np.int32), np.arange(4), none, none, e)  # fmt: skip
    assert records.complete(d).tolist() == [True, False, False, False]  # running kernels: no end yet
    bad = records.Decoded(d.kind, d.name, np.array([9, 1, 1, 1]), np.array([5, 2, 2, 2]), d.device, d.stream,
                          np.arange(4), d.grid, d.block, d.bytes)  # fmt: skip
    assert records.malformed(bad).tolist() == [True, False, False, False]
    t = records.take(d, records.complete(d))
    assert t.name.tolist() == ["a"] and t.start.tolist() == [5]


def test_scan_then_rows_from_scan_equal_the_whole_decode(buffer):
    """The split path (plain-Python scan in the script, numpy in the recorder) gives the rows the whole
    decode gives, buffer by buffer, on the recorded H200 buffer: same records, order, fields and strings."""
    data, sizes, names, _ = buffer
    strings = Interner()
    ids = records.ScanIds(strings, names.__getitem__)
    found = records.Scanned.empty()
    assert records.scan(data, sizes, 0, found, ids) and records.scan(data, sizes, len(data), found, ids)
    rows, dropped = records.rows_from_scan(data + data, [(2, 100, 63), (5, -7, 63)], found)
    assert dropped == 0 and rows.shape == (126, 11)
    text = {i: t for t, i in strings.ids.items()}
    d = records.decode(data, records.walk(data, sizes), names.__getitem__)
    for part, (window, shift) in enumerate([(2, 100), (5, -7)]):
        r = rows[part * 63 : (part + 1) * 63]
        assert (r[:, 0] == window).all()
        assert r[:, 1].tolist() == d.kind.tolist() and r[:, 3].tolist() == (d.start + shift).tolist()
        assert r[:, 4].tolist() == (d.end - d.start).tolist() and r[:, 7].tolist() == d.correlation.tolist()
        assert r[:, 5].tolist() == d.device.tolist() and r[:, 6].tolist() == d.stream.tolist()
        assert r[:, 10].tolist() == d.bytes.tolist()
        assert [text[i] for i in r[:, 2].tolist()] == d.name.tolist()
        assert [text.get(i) for i in r[:, 8].tolist()] == d.grid.tolist()
        assert [text.get(i) for i in r[:, 9].tolist()] == d.block.tolist()
    # each distinct string interned once, however many records carry it
    assert len(strings.ids) == len(set(d.name.tolist()) | set(d.grid.tolist() + d.block.tolist()) - {None})


def test_scan_drops_running_kernels_and_stops_at_unknown_kinds(buffer):
    data, sizes, names, _ = buffer
    ids = records.ScanIds(Interner(), names.__getitem__)
    first = int(records.walk(data, sizes)[records.CONCURRENT_KERNEL_KIND][0])
    running = bytearray(data)
    running[first + 24 : first + 32] = bytes(8)  # no end yet: what a forced flush returns
    found = records.Scanned.empty()
    assert records.scan(bytes(running), sizes, 0, found, ids)
    rows, dropped = records.rows_from_scan(bytes(running), [(0, 0, len(found))], found)
    assert dropped == 1 and len(rows) == 62
    found = records.Scanned.empty()
    without_fills = {k: v for k, v in sizes.items() if k != records.MEMSET_KIND}
    assert not records.scan(data, without_fills, 0, found, ids)  # learn the size, then scan again
    found.truncate(0)
    assert len(found) == 0 and not records.scan(data[:-8], sizes, 0, found, ids)


class FakeCupti:
    """Replays recorded buffers: what KernelStream asks of libcupti, without a GPU."""

    api_version = 130001

    def __init__(self, data: bytes, sizes: dict[int, int]):
        self.data, self.sizes = data, sizes
        self.enabled: set[int] = set()
        self.calls: list[str] = []
        self.on_buffer = None

    def register(self):
        self.calls.append("register")

    def enable(self, k):
        self.enabled.add(k)

    def disable(self, k):
        self.enabled.discard(k)

    def flush_all(self, forced=True):
        self.calls.append("flush")

    def timestamp(self):
        return 1_000

    def record_sizes(self, data):
        return dict(self.sizes)

    def deliver(self):
        self.on_buffer(self.data)


def _stream(buffer):
    data, sizes, names, _ = buffer
    cupti = FakeCupti(data, sizes)
    strings = Interner()
    batches: list[np.ndarray] = []

    def send(data, parts, found):  # what the recorder does with each message
        rows, dropped = records.rows_from_scan(data, parts, found)
        assert dropped == 0
        batches.append(rows)

    s = KernelStream(cupti, send, strings, strings.lock, period_s=3600, name_of=names.__getitem__)
    return s, cupti, strings, batches


def test_stream_segments_rows_and_strings(buffer):
    s, cupti, strings, batches = _stream(buffer)
    s.start()
    assert cupti.enabled == set(records.KINDS) and cupti.calls[0] == "register"
    cupti.deliver()
    s.pause()  # flushes, hands CUPTI over to the window, sends what it holds
    assert cupti.enabled == set() and len(batches) == 1 and len(batches[0]) == 63
    cupti.deliver()  # a buffer handed over after pause: its kernel names may be freed before a scan
    assert s.late_buffers == 1
    s.resume(4)  # after window 4
    cupti.deliver()
    s.stop()
    assert len(batches) == 2 and {r[0] for r in batches[0]} == {-1} and {r[0] for r in batches[1]} == {4}
    row = batches[0][0]
    names = {i: n for n, i in strings.ids.items()}
    assert len(row) == 11 and names[row[2]].startswith("_ZN2at4cuda") and names[row[8]] == "1,1,1"
    assert s.records == 126 and s.error is None
    # times move onto the wall clock: offset = wall - CUPTI clock
    assert abs(row[3] - (1795971363909635067 + s.offset_ns)) < 10_000_000


def test_recorder_turns_raw_stream_messages_into_rows(buffer, tmp_path):
    """The recorder's side of the protocol: raw buffers + scan in, STREAM_SCHEMA rows, strings and latency
    out, through a real message (pickled over the pipe as the agent sends it)."""
    import pickle

    from brrrtui.recorder import Recorder, RunSpec

    data, sizes, names, _ = buffer
    strings = Interner()
    messages = []

    def send(data, parts, found):  # the agent's _send_stream
        messages.append(pickle.loads(pickle.dumps({
            "type": "batch", "strings": strings.take_new(), "sent_ns": 1795971363909635067 + 10**9,
            "stream_raw": {"data": data, "parts": parts, "offsets": found.offsets, "names": found.names,
                           "shapes": found.shapes}})))  # fmt: skip

    s = KernelStream(
        FakeCupti(data, sizes), send, strings, strings.lock, period_s=3600, name_of=names.__getitem__
    )
    s.start()
    s.cupti.deliver()
    s.cupti.deliver()
    s.stop()
    rec = Recorder(RunSpec(["x.py"], str(tmp_path / "r.brrr")))
    rec._open_writer()
    for m in messages:
        rec._handle(m)
    rec._handle({"type": "stream_stats", "records": s.records, "bytes": s.bytes, "flush_ns_max": 0})
    rec.writer.close()
    t = load_recording(str(tmp_path / "r.brrr"))
    assert len(t.stream) == 126 == t.stream_total and rec.stream.records == 126
    kernels = t.stream.kind == 0
    assert {t.strings[i] for i in t.stream.grid[kernels]} >= {"1,1,1"}
    assert t.strings[t.stream.name[~kernels][0]].startswith(("Memcpy", "Memset"))
    assert t.meta["stream"]["records"] == 126 and t.meta["stream"]["incomplete_dropped"] == 0


def test_stream_gives_up_on_garbage_and_stays_off(buffer):
    s, cupti, _, batches = _stream(buffer)
    cupti.data = bytes(len(cupti.data))  # kind 0 records: no known size
    cupti.sizes = {}
    s.start()
    cupti.deliver()
    s.pause()
    assert batches == [] and s.error and s.stopped and cupti.enabled == set()


def test_clock_offset_takes_the_tightest_read():
    walls = iter([100, 110, 200, 202, 300, 340])
    assert clock_offset(lambda: 50, lambda: next(walls), tries=3) == 201 - 50


def test_demangle_matches_kineto_names():
    assert demangle("nvjet_sm90_tst_256x128") == "nvjet_sm90_tst_256x128"
    mangled = (
        "_ZN2at6native29vectorized_elementwise_kernelILi4ENS0_11FillFunctorIfEESt5arrayIPcLm1EEEEviT0_T1_"
    )
    assert demangle(mangled).startswith(
        "void at::native::vectorized_elementwise_kernel<4, at::native::FillFunctor"
    )


def test_latency_histogram():
    lat = StreamLatency()
    now = 10_000_000_000
    rows = np.array([(0, 0, 1, now - ms * 1_000_000 - 10, 10, 0, 0, 0, -1, -1, -1) for ms in range(100)])
    assert lat.add(rows, now, sent_ns=now - 40_000_000) == now
    assert lat.records == 100 and lat.percentile(50) == 50 and lat.percentile(99) == 99
    # the part before the script sent them: 40 ms less for every kernel (kernels after "sent" land in bin 0)
    s = lat.summary()
    assert (s["until_sent_p50_ms"], s["until_sent_p99_ms"]) == (10, 59)


@pytest.fixture(scope="module")
def gpt_stream(tmp_path_factory):
    path = tmp_path_factory.mktemp("s") / "gpt.brrr"
    with gzip.open(os.path.join(FIXTURES, "h200_gpt_stream.brrr.gz")) as f:
        path.write_bytes(f.read())
    return load_recording(str(path))


def test_h200_stream_kernels_get_the_windows_lines(gpt_stream):
    """12,001 kernels streamed after window 1 (steps 3.. of GPT-2 small): aligned to window 1's last step,
    every streamed kernel but the optimizer's first-step extras finds its line."""
    a = analyze(gpt_stream)
    v = stream_view(a)
    after = np.nonzero(gpt_stream.stream.after_window == 1)[0]
    assert len(after) == 12_001
    assert (v.template_row[after] >= 0).mean() > 0.999
    # each matched kernel has the same name as the window kernel it was matched to
    hit = after[v.template_row[after] >= 0]
    assert (gpt_stream.stream.name[hit] == a.trace.gpu.name[v.template_row[hit]]).all()
    # a step's GEMMs and its LayerNorms land on the model's lines, not on one line per name
    lines = {str(a.trace.lines[i]).rsplit("/", 1)[-1] for i in np.unique(v.line[hit]) if i >= 0}
    assert len(lines) >= 5 and all(x.startswith("train_gpt.py:") for x in lines)
    assert gpt_stream.meta["stream"]["latency_p99_ms"] < 2000


def test_stream_threads_share_one_interner_safely():
    """Two threads intern outside the lock and send under it (take_new + send): every id is sent exactly once,
    and each batch's ids were sent in it or in a batch sent before it."""
    strings = Interner()
    sent: list[tuple[list[tuple[int, str]], list[int]]] = []  # (new strings, ids used), in send order

    def worker(prefix: str):
        for i in range(300):
            used = [strings(f"{prefix}{i % 50}"), strings(f"shared{i % 70}")]
            with strings.lock:
                sent.append((strings.take_new(), used))

    ts = [threading.Thread(target=worker, args=(p,)) for p in "ab"]
    for t in ts:
        t.start()
    for t in ts:
        t.join()
    ids = [i for new, _ in sent for i, _ in new]
    assert sorted(ids) == list(range(170))  # every id sent exactly once
    known: set[int] = set()
    for new, used in sent:
        known |= {i for i, _ in new}
        assert set(used) <= known
    assert {s: i for i, s in ((i, s) for new, _ in sent for i, s in new)} == strings.ids
