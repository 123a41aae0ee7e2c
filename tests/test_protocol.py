"""The pipe between the script's process and the recorder: plain data only, so the recorder never imports the
script's libraries (a TorchVersion made it import torch on the H200 box, 3-4 s without reading the pipe)."""

from __future__ import annotations

import dataclasses
import fractions
import os
import pickle
import struct
import subprocess
import sys
import threading
import types

import numpy as np
import torch

from brrrtui.capture.torch_hooks import device_facts
from brrrtui.contract.messages import (
    MESSAGE_TYPES,
    Bye,
    CaptureError,
    CompiledKernels,
    CompileEvent,
    DeviceFacts,
    Hello,
    MeasuredPeaks,
    Note,
    ProtocolError,
    StepBatch,
    StreamBatch,
    StreamStats,
    WindowBatch,
    from_wire,
    to_wire,
)
from brrrtui.contract.protocol import Channel, loads, read_frames
from brrrtui.contract.schema import GpuKind, WindowMode
from brrrtui.record.recorder import Recorder, RunSpec

ONE_OF_EACH = [
    Hello(pid=4242, python_version="3.11.7"),
    Note("no CUDA GPU: recording CPU ops and source lines only"),
    CaptureError("Traceback (most recent call last): ..."),
    DeviceFacts(
        name="NVIDIA H200",
        num_sms=132,
        compute_capability="9.0",
        total_memory_bytes=150_000_000_000,
        l2_bytes=62_914_560,
        cuda_version="13.0",
        torch_version="2.13.0",
    ),
    StepBatch(steps=[(0, 1_700_000_000_000_000_000), (1, 1_700_000_000_100_000_000)]),
    WindowBatch(
        window=(0, int(WindowMode.STEPS), 10, 20, 0, 1, 5, 3),
        capture_cost=(0, 1_000, 2_000),
        strings=[(0, "aten::mm"), (1, "sm90_xmma_gemm")],
        lines=[(0, "/home/u/train.py", 41, "step")],
        line_samples=[(0, 0, 15)],
        gpu=[(0, int(GpuKind.KERNEL), 1, 12, 3, 0, 7, 99, -1, -1, -1)],
        runtime=[(0, 1, 11, 1, 123, 99)],
        ops=[(0, 0, 10, 5, 123, 7, -1, -1, -1, float("nan"))],
        spans=[(0, 0, 10, 6, 123, -1, -1)],
    ),
    StreamBatch(
        sent_ns=1,
        strings=[(2, "Memset (Device)")],
        buffers=b"\x02\x00\x00\x00" * 16,
        parts=[(-1, 1_000, 1)],
        offsets=[0],
        names=[2],
        shapes=[-1],
    ),
    StreamStats(
        records=126,
        buffer_bytes=1 << 20,
        flush_ns_max=1,
        decode_ns=2,
        queue_ns_max=3,
        write_ns_max=4,
        forced_flushes=0,
        late_buffers=1,
        error=None,
        cupti_api_version=130001,
    ),
    MeasuredPeaks(tensor_flops_per_s=8e14, fp32_flops_per_s=5e13, bytes_per_s=4.26e12, l2_bytes=62_914_560),
    CompiledKernels(
        lines=[(4, "/home/u/model.py", 57, "forward")], rows=[("triton_poi_fused_add_0", 4, -1, 0.75)]
    ),
    CompileEvent(
        lines=[(5, "/home/u/model.py", 12, "")], kind="graph_break", line=5, reason="cannot trace `print`"
    ),
    Bye(exit_code=3),
]


def _frames(*messages: object, wire: bool = False) -> list:
    """What read_frames yields for `messages` sent through a Channel; wire=True: they are sent as they are,
    already plain data (a frame an older or broken child might send)."""
    r, w = os.pipe()

    def send_all() -> None:
        channel = Channel(w)
        for m in messages:
            if wire:
                payload = pickle.dumps(m, protocol=pickle.HIGHEST_PROTOCOL)
                os.write(w, struct.pack("<I", len(payload)) + payload)
            else:
                channel.send(m)
        os.close(w)

    writer = threading.Thread(target=send_all)
    writer.start()
    got = list(read_frames(r))
    writer.join()
    return got


def test_every_message_type_is_covered():
    assert {type(m) for m in ONE_OF_EACH} == set(MESSAGE_TYPES)


def test_every_message_round_trips_through_the_pipe():
    got = _frames(*ONE_OF_EACH)
    assert [type(m) for m in got] == [type(m) for m in ONE_OF_EACH]
    for sent, received in zip(ONE_OF_EACH, got, strict=True):
        sent_wire, got_wire = to_wire(sent), to_wire(received)
        assert pickle.dumps(sent_wire) == pickle.dumps(got_wire)  # NaN-safe equality


def _plain(value: object) -> bool:
    if isinstance(value, dict):
        return all(type(k) is str and _plain(v) for k, v in value.items())
    if isinstance(value, list | tuple):
        return type(value) in (list, tuple) and all(_plain(v) for v in value)
    return type(value) in (int, float, str, bytes, bool, type(None)) or isinstance(value, np.ndarray)


def test_the_wire_form_is_plain_builtins_or_numpy():
    for message in ONE_OF_EACH:
        wire = to_wire(message)
        assert wire["type"] == message.TAG and _plain(wire), message
        assert set(wire) == {"type", *(f.name for f in dataclasses.fields(message))}


def test_enum_values_in_rows_cross_as_plain_ints():
    """An IntEnum in a row pickles as a class of brrrtui.contract.schema, which the recorder refuses."""
    row = (0, GpuKind.KERNEL, 1, 12, 3, 0, 7, 99, -1, -1, -1)
    bad = dataclasses.replace(ONE_OF_EACH[5], gpu=[row])
    assert not _plain(to_wire(bad))
    got = _frames(bad)
    assert isinstance(got[0], Note) and "GpuKind" in got[0].text


def test_a_frame_with_a_foreign_class_is_dropped_with_a_note_and_the_next_frames_arrive():
    got = _frames(
        Hello(pid=1, python_version="3.11"),
        Note(fractions.Fraction(1, 3)),  # type: ignore[arg-type]
        Bye(exit_code=0),
    )
    assert got[0] == Hello(pid=1, python_version="3.11")
    assert isinstance(got[1], Note) and "fractions.Fraction" in got[1].text
    assert got[2] == Bye(exit_code=0)
    assert len(got) == 3


def test_a_frame_that_is_no_message_is_dropped_with_a_note():
    got = _frames(
        {"type": "hello", "pid": 1},
        {"type": "batch", "steps": []},
        [1, 2],
        {"type": "bye", "exit_code": 0, "extra": 1},
        to_wire(Bye(exit_code=2)),
        wire=True,
    )
    assert [type(m) for m in got] == [Note, Note, Note, Note, Bye]
    assert "python_version" in got[0].text and "'batch'" in got[1].text and "'extra'" in got[3].text
    assert got[4] == Bye(exit_code=2)


def test_from_wire_refuses_what_does_not_fit():
    for wire in (
        {},
        {"type": "nope"},
        {"type": "note"},
        {"type": "note", "text": "x", "more": 1},
        ("note", "x"),
    ):
        try:
            from_wire(wire)
        except ProtocolError:
            continue
        raise AssertionError(f"accepted {wire}")


def test_device_facts_are_plain_data():
    props = types.SimpleNamespace(
        name="NVIDIA H200",
        multi_processor_count=132,
        major=9,
        minor=0,
        total_memory=150_000_000_000,
        L2_cache_size=62_914_560,
    )
    fake = types.SimpleNamespace(
        __version__=torch.__version__,  # a torch.torch_version.TorchVersion, a str subclass
        version=types.SimpleNamespace(cuda="13.0"),
        cuda=types.SimpleNamespace(current_device=lambda: 0, get_device_properties=lambda i: props),
    )
    facts = device_facts(fake)
    assert from_wire(loads(pickle.dumps(to_wire(facts), protocol=pickle.HIGHEST_PROTOCOL))) == facts
    assert type(facts.torch_version) is str


def test_the_reader_does_not_import_torch_for_a_torch_object(tmp_path):
    frames = tmp_path / "frames"
    device = {**to_wire(ONE_OF_EACH[3]), "torch_version": torch.__version__}
    with open(frames, "wb") as f:
        for message in (device, to_wire(Bye(exit_code=0))):
            payload = pickle.dumps(message, protocol=pickle.HIGHEST_PROTOCOL)
            f.write(struct.pack("<I", len(payload)) + payload)
    code = (
        "import os, sys\n"
        "from brrrtui.contract.protocol import read_frames\n"
        f"print([type(m).__name__ for m in read_frames(os.open({str(frames)!r}, os.O_RDONLY))], "
        "'torch' in sys.modules)\n"
    )
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=root, check=True)
    assert out.stdout.strip() == "['Note', 'Bye'] False"


def _start_reader_and_writer(recorder: Recorder, fd: int) -> list[threading.Thread]:
    threads = [
        threading.Thread(target=recorder._read_frames, args=(fd,), daemon=True),
        threading.Thread(target=recorder._write_frames, daemon=True),
    ]
    for t in threads:
        t.start()
    return threads


def test_the_recorder_reads_on_while_its_writer_is_busy(tmp_path, monkeypatch):
    """A slow commit must not hold up the script's sends (a window's run on its main thread)."""
    recorder = Recorder(RunSpec(["x.py"], str(tmp_path / "r.brrr")))
    handled: list[str] = []
    release = threading.Event()

    def slow_handle(message: Note) -> None:
        release.wait(10)  # the writer is stuck until every send has returned
        handled.append(message.text)

    monkeypatch.setattr(recorder, "_handle", slow_handle)
    r, w = os.pipe()
    threads = _start_reader_and_writer(recorder, r)
    channel = Channel(w)
    big = "x" * 200_000  # 20 of them: 4 MB, 60 times what a pipe holds
    sender = threading.Thread(
        target=lambda: [channel.send(Note(f"batch{i} {big}")) for i in range(20)], daemon=True
    )
    sender.start()
    sender.join(5)
    sent_while_stuck = not sender.is_alive()
    release.set()
    sender.join(10)
    assert sent_while_stuck
    os.close(w)
    for t in threads:
        t.join(10)
    assert [text.split()[0] for text in handled] == [f"batch{i}" for i in range(20)]


def test_a_writer_that_fails_keeps_draining_so_the_script_never_blocks(tmp_path, monkeypatch):
    recorder = Recorder(RunSpec(["x.py"], str(tmp_path / "r.brrr")))
    recorder._open_writer()
    monkeypatch.setattr(recorder, "_handle", lambda message: 1 / 0)
    r, w = os.pipe()
    threads = _start_reader_and_writer(recorder, r)
    channel = Channel(w)
    big = StreamBatch(
        sent_ns=0, strings=[], buffers=b"\x01" * 200_000, parts=[], offsets=[], names=[], shapes=[]
    )
    sender = threading.Thread(
        target=lambda: [channel.send(big) for _ in range(100)], daemon=True
    )  # > the inbox
    sender.start()
    sender.join(10)
    assert not sender.is_alive()
    os.close(w)
    for t in threads:
        t.join(10)
    assert recorder.notes == [
        "cannot append to the recording any more: ZeroDivisionError('division by zero')"
    ]
