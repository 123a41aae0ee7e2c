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
from analyzers.stream.lines import stream_view
from brrrtui.capture.convert import Interner
from brrrtui.capture.stream import KernelStream, clock_offset, demangle
from brrrtui.contract import cupti_records as records
from brrrtui.record.latency import StreamLatency
from brrrtui.recording.store import load_recording

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


def test_scan_and_rows_match_nvidias_dtypes_field_by_field(buffer):
    """`expected` was decoded on the H200 with cupti-python's own numpy dtypes (activity_kernel10_dtype, ...).
    The split path (plain-Python scan in the script, numpy in the recorder) gives those records, in buffer
    order, buffer by buffer, with their names and launch shapes interned once each."""
    data, sizes, names, expected = buffer
    strings = Interner()
    ids = records.ScanIds(strings, names.__getitem__)
    found = records.Scanned.empty()
    assert records.scan(data, sizes, 0, found, ids) and records.scan(data, sizes, len(data), found, ids)
    rows, dropped = records.rows_from_scan(data + data, [(2, 100, 63), (5, -7, 63)], found)
    assert dropped == 0 and rows.shape == (126, 11) and len(expected) == 63
    text = {i: t for t, i in strings.ids.items()}
    want = sorted(expected, key=lambda e: e["offset"])
    for part, (window, shift) in enumerate([(2, 100), (5, -7)]):
        for r, e in zip(rows[part * 63 : (part + 1) * 63].tolist(), want, strict=True):
            assert r[0] == window and r[7] == e["correlation_id"]
            assert (r[3] - shift, r[3] - shift + r[4], r[5], r[6]) == (
                e["start"],
                e["end"],
                e["device_id"],
                e["stream_id"],
            )
            if e["kind"] == records.CONCURRENT_KERNEL_KIND:
                assert r[1] == 0 and text[r[2]] == names[e["name"]] and r[10] == -1
                assert text[r[8]] == f"{e['grid_x']},{e['grid_y']},{e['grid_z']}"
                assert text[r[9]] == f"{e['block_x']},{e['block_y']},{e['block_z']}"
            elif e["kind"] == records.MEMSET_KIND:
                assert r[1] == 2 and r[10] == e["bytes"] and text[r[2]] == "Memset (Device)"
                assert r[8] == r[9] == -1
            else:
                assert r[1] == 1 and r[10] == e["bytes"] and r[8] == r[9] == -1
                assert text[r[2]] == "Memcpy DtoH (Device -> Pageable)"  # Kineto's name for the same copy
    # each distinct string interned once, however many records carry it
    kernels = [e for e in expected if e["kind"] == records.CONCURRENT_KERNEL_KIND]
    distinct = {names[e["name"]] for e in kernels} | {"Memset (Device)", "Memcpy DtoH (Device -> Pageable)"}
    distinct |= {f"{e[f'{d}_x']},{e[f'{d}_y']},{e[f'{d}_z']}" for e in kernels for d in ("grid", "block")}
    assert set(strings.ids) == distinct


def test_malformed_records_betray_a_foreign_layout(buffer):
    data, sizes, _, _ = buffer
    offsets = records.walk(data, sizes)
    flat = np.concatenate(list(offsets.values()))
    assert len(records.malformed(data, flat)) == 63 and not records.malformed(data, flat).any()
    first = int(offsets[records.CONCURRENT_KERNEL_KIND][0])
    odd = bytearray(data)
    start = int(np.frombuffer(data, np.uint64)[(first + 16) // 8])
    odd[first + 24 : first + 32] = np.uint64(start - 1).tobytes()  # ends before it starts
    odd[first + 16 + 216 : first + 32 + 216] = bytes(16)  # the next record: no timestamps yet (running)
    assert records.malformed(bytes(odd), flat).sum() == 1


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
    out, through a real message (in its wire form, pickled, as the agent sends it over the pipe)."""
    import pickle

    from brrrtui.contract.messages import StreamBatch, from_wire, to_wire
    from brrrtui.record.recorder import Recorder, RunSpec

    data, sizes, names, _ = buffer
    strings = Interner()
    messages = []

    def send(data, parts, found):  # the agent's _send_stream
        message = StreamBatch(
            sent_ns=1795971363909635067 + 10**9,
            strings=strings.take_new(),
            buffers=data,
            parts=parts,
            offsets=found.offsets,
            names=found.names,
            shapes=found.shapes,
        )
        messages.append(from_wire(pickle.loads(pickle.dumps(to_wire(message)))))

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
    rec._handle(s.stats(write_ns_max=0))
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
