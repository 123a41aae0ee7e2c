"""Property tests of the output policy (brrrtui.recording.outputs) over `-o` targets: every kind of file at
the target (none, a recording, an empty file, a text file, a FIFO, a device node, a socket, a folder, links to
each and a dangling one) and at its neighbours' names (the lock, SQLite's journal), with and without --force.

The oracle: the write goes ahead exactly when the policy allows it; a refusal is one line and leaves the
folder byte for byte as it was; a write leaves a brrrtui recording at the target and nothing else new beside
it (no temporary file, no lock), and every file that was not the writer's own is as it was. Each example is
bounded in time: a hang is a failure. The recorder's sink is driven in-process (many examples, fast); a few
go through the CLI (`brrrtui record -o`)."""

from __future__ import annotations

import itertools
import os
import socket
import stat
import tempfile

import pytest
from conftest import SCRIPTS, run_brrrtui
from hypothesis import HealthCheck, given, settings, strategies as st

from brrrtui.contract.errors import InputError
from brrrtui.record.sink import Sink
from brrrtui.recording.outputs import JOURNAL_MAGIC, is_recording_file
from brrrtui.recording.store import RecordingWriter

EXIT3 = os.path.join(SCRIPTS, "exit3.py")
# examples per property: a few in the normal suite; BRRRTUI_FUZZ_EXAMPLES=N for a long run, and
# BRRRTUI_FUZZ_EXHAUSTIVE=1 for every combination of the sink's cases (test_every_combination)
SCALE = int(os.environ.get("BRRRTUI_FUZZ_EXAMPLES", "0"))
TARGETS = ["absent", "recording", "empty", "text", "fifo", "device", "socket", "folder", "link_recording",
           "link_text", "link_dangling"]  # fmt: skip
LOCKS = ["absent", "stale", "empty", "foreign", "link_victim", "fifo", "device", "folder"]
JOURNALS = ["absent", "foreign", "link_victim", "hot"]
VICTIM = b"precious\n"


def make(path: str, kind: str, folder: str) -> None:
    """A file of `kind` at `path` (the victim and the other recording live in `folder`)."""
    if kind == "absent":
        return
    if kind in ("recording", "link_recording"):
        real = path if kind == "recording" else os.path.join(folder, "other.brrr")
        w = RecordingWriter(real)
        w.set_meta(status="finished", exit_code=7)
        w.close()
        if kind == "link_recording":
            os.symlink(real, path)
        return
    contents = {"empty": b"", "text": b"notes\n", "stale": b"4242", "foreign": b'{"_meta": {}}\n',
                "hot": JOURNAL_MAGIC + bytes(504)}  # fmt: skip
    if kind in contents:
        with open(path, "wb") as f:
            f.write(contents[kind])
    elif kind == "fifo":
        os.mkfifo(path)
    elif kind == "device":
        os.mknod(path, stat.S_IFCHR | 0o666, os.makedev(1, 3))
    elif kind == "socket":
        s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        s.bind(path)
        s.close()
    elif kind == "folder":
        os.mkdir(path)
    elif kind in ("link_text", "link_victim"):
        os.symlink(os.path.join(folder, "victim"), path)
    elif kind == "link_dangling":
        os.symlink(os.path.join(folder, "nowhere"), path)
    else:
        raise AssertionError(kind)


def snapshot(folder: str) -> dict[str, tuple[int, bytes | str | None]]:
    out: dict[str, tuple[int, bytes | str | None]] = {}
    for name in os.listdir(folder):
        path = os.path.join(folder, name)
        st_ = os.lstat(path)
        if stat.S_ISLNK(st_.st_mode):
            out[name] = (stat.S_IFLNK, os.readlink(path))
        elif stat.S_ISREG(st_.st_mode):
            out[name] = (stat.S_IFREG, open(path, "rb").read())
        else:
            out[name] = (stat.S_IFMT(st_.st_mode), None)
    return out


def allowed(target: str, lock: str, journal: str, force: bool) -> bool:
    """The policy, stated independently of its code."""
    ok_target = target in ("absent", "recording", "empty") or (target == "text" and force)
    ok_lock = lock in ("absent", "stale", "empty")
    ok_journal = journal == "absent" or (journal == "hot" and target == "recording")
    return ok_target and ok_lock and ok_journal


def setup(base: str, target: str, lock: str, journal: str) -> tuple[str, str, dict]:
    folder = tempfile.mkdtemp(dir=base)
    with open(os.path.join(folder, "victim"), "wb") as f:
        f.write(VICTIM)
    out = os.path.join(folder, "r.brrr")
    make(out, target, folder)
    make(out + ".lock", lock, folder)
    make(out + "-journal", journal, folder)
    return folder, out, snapshot(folder)


def check_outcome(folder: str, out: str, before: dict, ok: bool, refusal: str | None) -> None:
    after = snapshot(folder)
    assert after[("victim")] == (stat.S_IFREG, VICTIM)
    if not ok:
        assert refusal is not None and "\n" not in refusal, refusal
        assert after == before, "a refused write changed the folder"
        return
    assert refusal is None, refusal
    assert stat.S_ISREG(os.lstat(out).st_mode) and is_recording_file(out)
    ours = {"r.brrr", "r.brrr.lock", "r.brrr-journal"}  # the target, its lock and journal: the writer's own
    assert set(after) == (set(before) - ours) | {"r.brrr"}, sorted(after)
    assert {k: v for k, v in after.items() if k not in ours} == {k: v for k, v in before.items() if k not in ours}


KINDS = dict(target=st.sampled_from(TARGETS), lock=st.sampled_from(LOCKS), journal=st.sampled_from(JOURNALS),
             force=st.booleans())  # fmt: skip


def sink_case(base: str, target: str, lock: str, journal: str, force: bool) -> None:
    folder, out, before = setup(base, target, lock, journal)
    sink, refusal = Sink(out, lambda text: None), None
    try:
        sink.open([EXIT3], force)
        sink.set_meta(status="finished", exit_code=3)
        sink.close()
    except InputError as e:
        refusal = str(e)
    check_outcome(folder, out, before, allowed(target, lock, journal, force), refusal)


@settings(max_examples=SCALE or 80, deadline=5000, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(**KINDS)
def test_the_sink_writes_exactly_where_the_policy_allows(tmp_path, target, lock, journal, force):
    sink_case(str(tmp_path), target, lock, journal, force)


@pytest.mark.skipif(os.environ.get("BRRRTUI_FUZZ_EXHAUSTIVE") != "1", reason="long: BRRRTUI_FUZZ_EXHAUSTIVE=1")
def test_every_combination(tmp_path):
    for target, lock, journal, force in itertools.product(TARGETS, LOCKS, JOURNALS, (False, True)):
        sink_case(str(tmp_path), target, lock, journal, force)


@settings(max_examples=max(SCALE // 20, 8), deadline=60_000, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(**KINDS)
def test_record_o_writes_exactly_where_the_policy_allows(tmp_path, target, lock, journal, force):
    folder, out, before = setup(str(tmp_path), target, lock, journal)
    proc = run_brrrtui("record", "-o", out, *(["--force"] if force else []), EXIT3, timeout=60)
    assert "Traceback" not in proc.stderr, proc.stderr
    refusal = proc.stderr.strip() if proc.returncode == 2 else None
    if refusal is not None:
        assert refusal.startswith("brrrtui: error: ")
    else:
        assert proc.returncode == 3, proc.stderr
    check_outcome(folder, out, before, allowed(target, lock, journal, force), refusal)


EXPORT_TARGETS = ["absent", "export", "export_gz", "empty", "text", "recording", "fifo", "device", "socket",
                  "folder", "link_text", "link_dangling"]  # fmt: skip


@settings(max_examples=SCALE or 40, deadline=5000, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(target=st.sampled_from(EXPORT_TARGETS), force=st.booleans(), gz=st.booleans())
def test_export_writes_exactly_where_the_policy_allows(tmp_path, target, force, gz):
    """`export --perfetto OUT`'s writer: OUT checked (brrrtui.recording.outputs.Output), written beside it and
    renamed (Replacement), as brrrtui/commands/export.py does."""
    import gzip

    from brrrtui.commands.export import _is_export
    from brrrtui.present.perfetto import EXPORT_HEADS
    from brrrtui.recording.outputs import Output, Replacement

    folder = tempfile.mkdtemp(dir=str(tmp_path))
    with open(os.path.join(folder, "victim"), "wb") as f:
        f.write(VICTIM)
    out = os.path.join(folder, "t.json")
    head = (EXPORT_HEADS[0] + ',"traceEvents":[]}').encode()
    if target in ("export", "export_gz"):
        with open(out, "wb") as f:
            f.write(gzip.compress(head) if target == "export_gz" else head)
    else:
        make(out, target, folder)
    before, refusal = snapshot(folder), None
    try:
        output = Output(out, "a trace brrrtui exported", _is_export, "--perfetto", force)
        replacement = Replacement(out, output.check(), "--perfetto", keep_open=True)
        with os.fdopen(replacement.take_fd(), "wb") as f:
            f.write(gzip.compress(head) if gz else head)
        replacement.commit()
    except InputError as e:
        refusal = str(e)
    ok = target in ("absent", "export", "export_gz", "empty") or (target in ("text", "recording") and force)
    after = snapshot(folder)
    assert after["victim"] == (stat.S_IFREG, VICTIM)
    if not ok:
        assert refusal is not None and "\n" not in refusal and after == before, refusal
        return
    assert refusal is None, refusal
    assert set(after) == set(before) | {"t.json"} and _is_export(out)
