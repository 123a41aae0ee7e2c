"""The pipe between the script's process and the recorder: plain data only, so the recorder never imports the
script's libraries (a TorchVersion made it import torch on the H200 box, 3-4 s without reading the pipe)."""

from __future__ import annotations

import fractions
import os
import pickle
import struct
import subprocess
import sys
import threading
import types

import torch

from brrrtui.capture.agent import device_facts
from brrrtui.contract.protocol import Channel, loads, read_frames
from brrrtui.record.recorder import Recorder, RunSpec


def _frames(*messages: dict) -> list[dict]:
    r, w = os.pipe()

    def send_all() -> None:
        channel = Channel(w)
        for m in messages:
            channel.send(m)
        os.close(w)

    writer = threading.Thread(target=send_all)
    writer.start()
    got = list(read_frames(r))
    writer.join()
    return got


def test_a_frame_with_a_foreign_class_is_dropped_with_a_note_and_the_next_frames_arrive():
    got = _frames({"type": "hello", "n": 1}, {"type": "device", "v": fractions.Fraction(1, 3)},
                  {"type": "bye", "data": b"\x00" * 200_000})  # fmt: skip
    assert got[0] == {"type": "hello", "n": 1}
    assert got[1]["type"] == "note" and "fractions.Fraction" in got[1]["text"]
    assert got[2] == {"type": "bye", "data": b"\x00" * 200_000}
    assert len(got) == 3


def test_device_facts_are_plain_data():
    props = types.SimpleNamespace(name="NVIDIA H200", multi_processor_count=132, major=9, minor=0,
                                  total_memory=150_000_000_000, L2_cache_size=62_914_560)  # fmt: skip
    fake = types.SimpleNamespace(
        __version__=torch.__version__,  # a torch.torch_version.TorchVersion, a str subclass
        version=types.SimpleNamespace(cuda="13.0"),
        cuda=types.SimpleNamespace(current_device=lambda: 0, get_device_properties=lambda i: props),
    )
    facts = device_facts(fake)
    assert loads(pickle.dumps(facts, protocol=pickle.HIGHEST_PROTOCOL)) == facts
    assert type(facts["torch_version"]) is str


def test_the_reader_does_not_import_torch_for_a_torch_object(tmp_path):
    frames = tmp_path / "frames"
    with open(frames, "wb") as f:
        for message in ({"type": "device", "torch_version": torch.__version__}, {"type": "bye"}):
            payload = pickle.dumps(message, protocol=pickle.HIGHEST_PROTOCOL)
            f.write(struct.pack("<I", len(payload)) + payload)
    code = (
        "import os, sys\n"
        "from brrrtui.contract.protocol import read_frames\n"
        f"print([m['type'] for m in read_frames(os.open({str(frames)!r}, os.O_RDONLY))], 'torch' in sys.modules)\n"
    )
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=root, check=True)
    assert out.stdout.strip() == "['note', 'bye'] False"


def _start_reader_and_writer(recorder: Recorder, fd: int) -> list[threading.Thread]:
    threads = [threading.Thread(target=recorder._read_frames, args=(fd,), daemon=True),
               threading.Thread(target=recorder._write_frames, daemon=True)]  # fmt: skip
    for t in threads:
        t.start()
    return threads


def test_the_recorder_reads_on_while_its_writer_is_busy(tmp_path, monkeypatch):
    """A slow commit must not hold up the script's sends (a window's run on its main thread)."""
    recorder = Recorder(RunSpec(["x.py"], str(tmp_path / "r.brrr")))
    handled: list[str] = []
    release = threading.Event()

    def slow_handle(message: dict) -> None:
        release.wait(10)  # the writer is stuck until every send has returned
        handled.append(message["type"])

    monkeypatch.setattr(recorder, "_handle", slow_handle)
    r, w = os.pipe()
    threads = _start_reader_and_writer(recorder, r)
    channel = Channel(w)
    sender = threading.Thread(target=lambda: [channel.send({"type": f"batch{i}", "data": b"\x01" * 200_000})
                                              for i in range(20)], daemon=True)  # 4 MB: 60 times what a pipe holds  # fmt: skip
    sender.start()
    sender.join(5)
    sent_while_stuck = not sender.is_alive()
    release.set()
    sender.join(10)
    assert sent_while_stuck
    os.close(w)
    for t in threads:
        t.join(10)
    assert handled == [f"batch{i}" for i in range(20)]


def test_a_writer_that_fails_keeps_draining_so_the_script_never_blocks(tmp_path, monkeypatch):
    recorder = Recorder(RunSpec(["x.py"], str(tmp_path / "r.brrr")))
    recorder._open_writer()
    monkeypatch.setattr(recorder, "_handle", lambda message: 1 / 0)
    r, w = os.pipe()
    threads = _start_reader_and_writer(recorder, r)
    channel = Channel(w)
    sender = threading.Thread(target=lambda: [channel.send({"type": "batch", "data": b"\x01" * 200_000})
                                              for _ in range(100)], daemon=True)  # more than the inbox holds  # fmt: skip
    sender.start()
    sender.join(10)
    assert not sender.is_alive()
    os.close(w)
    for t in threads:
        t.join(10)
    assert recorder.notes == ["cannot append to the recording any more: ZeroDivisionError('division by zero')"]
