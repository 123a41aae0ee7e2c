"""No command destroys a file it does not own (brrrtui.recording.outputs), end to end through the CLI: `record`
never writes onto a FIFO, a device, a link's target, a neighbour it did not make, or the script and its
package; a replaced recording is replaced only when the new one is complete; `export` replaces only a trace
brrrtui wrote (or any file with --force), never its input or the recorded script; a name the file system
cannot hold is one line."""

from __future__ import annotations

import gzip
import json
import os
import signal
import sqlite3
import stat
import subprocess
import sys
import time

import pytest
from conftest import ROOT, SCRIPTS, run_brrrtui

from brrrtui.recording.store import RecordingWriter, load_recording

EXIT3 = os.path.join(SCRIPTS, "exit3.py")
FIXTURE = os.path.join(ROOT, "tests", "fixtures", "h200_known_regimes.brrr.gz")
T = 60  # seconds any one command may take: a hang is a failure


def assert_one_line_error(proc: subprocess.CompletedProcess, *fragments: str) -> None:
    err = proc.stderr.strip()
    assert proc.returncode == 2, (proc.returncode, proc.stderr)
    assert "Traceback" not in proc.stderr and len(err.splitlines()) == 1, err
    assert err.startswith("brrrtui: error: "), err
    for fragment in fragments:
        assert fragment in err, err


def record(out: str, *args: str, cwd: str | None = None) -> subprocess.CompletedProcess:
    return run_brrrtui("record", "-o", out, *args, cwd=cwd, timeout=T)


def snapshot(folder: str) -> dict[str, tuple[int, bytes | str | None]]:
    """Every entry of `folder`: its type and its bytes (a link: where it points)."""
    out: dict[str, tuple[int, bytes | str | None]] = {}
    for name in os.listdir(folder):
        path = os.path.join(folder, name)
        st = os.lstat(path)
        if stat.S_ISLNK(st.st_mode):
            out[name] = (stat.S_IFLNK, os.readlink(path))
        elif stat.S_ISREG(st.st_mode):
            out[name] = (stat.S_IFREG, open(path, "rb").read())
        else:
            out[name] = (stat.S_IFMT(st.st_mode), None)
    return out


def test_record_onto_a_fifo_or_a_device_node_refuses_and_leaves_the_node(tmp_path):
    fifo, dev = str(tmp_path / "pipe.brrr"), str(tmp_path / "null.brrr")
    os.mkfifo(fifo)
    os.mknod(dev, stat.S_IFCHR | 0o666, os.makedev(1, 3))
    for path, kind in ((fifo, "FIFO"), (dev, "character device")):
        for force in ([], ["--force"]):
            assert_one_line_error(record(path, *force, EXIT3), kind)
    assert stat.S_ISFIFO(os.lstat(fifo).st_mode)
    assert stat.S_ISCHR(os.lstat(dev).st_mode) and os.lstat(dev).st_rdev == os.makedev(1, 3)
    assert sorted(os.listdir(tmp_path)) == ["null.brrr", "pipe.brrr"]


def test_record_keeps_a_lock_file_that_is_not_brrrtuis(tmp_path):
    """`-o Pipfile` locks with `Pipfile.lock`: the user's Pipfile.lock is neither written nor removed."""
    (tmp_path / "Pipfile").write_text("[packages]\n")
    (tmp_path / "Pipfile.lock").write_text('{"_meta": {}}\n')
    before = snapshot(str(tmp_path))
    assert_one_line_error(record(str(tmp_path / "Pipfile"), "--force", EXIT3), "Pipfile.lock", "not a brrrtui lock")
    assert snapshot(str(tmp_path)) == before


def test_record_keeps_a_journal_beside_the_target(tmp_path):
    out = str(tmp_path / "X")
    (tmp_path / "X-journal").write_text("not SQLite's\n")
    before = snapshot(str(tmp_path))
    assert_one_line_error(record(out, EXIT3), "X-journal")
    assert snapshot(str(tmp_path)) == before


def test_a_lock_link_beside_the_target_never_gets_its_target_written(tmp_path):
    victim = tmp_path / "victim"
    victim.write_text("precious\n")
    os.symlink(victim, tmp_path / "r.brrr.lock")
    before = snapshot(str(tmp_path))
    assert_one_line_error(record(str(tmp_path / "r.brrr"), EXIT3), "r.brrr.lock", "symbolic link")
    assert snapshot(str(tmp_path)) == before


def test_a_stale_lock_file_of_a_killed_brrrtui_is_taken_over(tmp_path):
    out = tmp_path / "r.brrr"
    (tmp_path / "r.brrr.lock").write_text("12345")  # what a recorder killed with -9 leaves
    assert record(str(out), EXIT3).returncode == 3
    assert load_recording(str(out)).meta["exit_code"] == 3
    assert sorted(os.listdir(tmp_path)) == ["r.brrr"]


def test_record_never_overwrites_the_module_or_its_package(tmp_path):
    pk, app = tmp_path / "pk", tmp_path / "app"
    pk.mkdir()
    app.mkdir()
    (pk / "__init__.py").write_text("")
    (pk / "mod.py").write_text("import sys\nsys.exit(3)\n")
    (app / "__main__.py").write_text("import sys\nsys.exit(3)\n")
    before = snapshot(str(pk)), snapshot(str(app))
    cwd = str(tmp_path)
    for out, target in (("pk/mod.py", ["-m", "pk.mod"]), ("pk/__init__.py", ["-m", "pk.mod"]),
                        ("app/__main__.py", ["app"])):  # fmt: skip
        for force in ([], ["--force"]):
            assert_one_line_error(record(out, *force, *target, cwd=cwd), out, "refusing to overwrite")
    assert (snapshot(str(pk)), snapshot(str(app))) == before
    # a recording inside the package is still a recording: it is written, and replaced
    for _ in range(2):
        assert record("pk/run.brrr", "-m", "pk.mod", cwd=cwd).returncode == 3
    assert load_recording(str(pk / "run.brrr")).meta["exit_code"] == 3


def test_a_run_that_never_starts_keeps_the_earlier_recording(tmp_path):
    out = str(tmp_path / "r.brrr")
    assert record(out, EXIT3).returncode == 3
    kept = open(out, "rb").read()
    assert_one_line_error(record(out, "--python", "/nonexistent", EXIT3), "cannot start /nonexistent")
    assert open(out, "rb").read() == kept
    assert load_recording(out).meta["exit_code"] == 3
    assert sorted(os.listdir(tmp_path)) == ["r.brrr"]  # nothing beside it: no temporary file, no lock


def test_a_replacing_run_writes_beside_the_target_and_renames_at_the_end(tmp_path):
    out = str(tmp_path / "r.brrr")
    assert record(out, EXIT3).returncode == 3
    proc = record(out, EXIT3)
    assert proc.returncode == 3, proc.stderr
    temp = f"{out}.part"
    assert f"until the run ends, the recording is written to {temp}" in proc.stderr, proc.stderr
    assert sorted(os.listdir(tmp_path)) == ["r.brrr"]
    assert load_recording(out).meta["status"] == "exited with code 3"  # the new run's, renamed over the old


def test_a_killed_brrrtui_leaves_the_earlier_recording_and_says_where_the_new_one_is(tmp_path):
    out, script = str(tmp_path / "r.brrr"), tmp_path / "wait.py"
    script.write_text("import time\nfor _ in range(600):\n    time.sleep(0.1)\n")
    assert record(out, EXIT3).returncode == 3
    kept = open(out, "rb").read()
    env = dict(os.environ, PYTHONPATH=ROOT, BRRRTUI_CALIBRATE="0")
    proc = subprocess.Popen([sys.executable, "-m", "brrrtui", "record", "-o", out, str(script)], env=env,
                            stderr=subprocess.PIPE, text=True, start_new_session=True)  # fmt: skip
    try:
        temp, deadline = None, time.monotonic() + T
        while temp is None and time.monotonic() < deadline:
            line = proc.stderr.readline() if proc.stderr else ""
            if "the recording is written to " in line:
                temp = line.rsplit(" ", 1)[1].strip()
        assert temp is not None and os.path.dirname(temp) == str(tmp_path)
        while _pid(temp) is None and time.monotonic() < deadline:  # the script has started
            time.sleep(0.1)
        proc.kill()  # brrrtui dies: -9
        proc.wait(T)
        assert open(out, "rb").read() == kept
        assert load_recording(out).meta["exit_code"] == 3
        assert load_recording(temp).meta["status"].startswith("incomplete")  # readable where it said
    finally:
        os.killpg(proc.pid, signal.SIGKILL)


def _pid(path: str) -> int | None:
    db = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
    try:
        row = db.execute("SELECT value FROM meta WHERE key = 'pid'").fetchone()
    finally:
        db.close()
    return None if row is None else json.loads(row[0])


def test_names_the_file_system_cannot_hold_are_one_line(tmp_path):
    long_lock = str(tmp_path / ("a" * 252))  # fits, but its .lock and -journal do not (NAME_MAX 255)
    assert_one_line_error(record(long_lock, EXIT3), "too long")
    assert os.listdir(tmp_path) == []
    assert_one_line_error(record("/proc/x.brrr", EXIT3), "/proc/x.brrr")
    run = str(tmp_path / "run.brrr")
    assert record(run, EXIT3).returncode == 3
    assert_one_line_error(run_brrrtui("merge", "-o", str(tmp_path / ("m" * 300)), run, timeout=T), "too long")


# ------------------------------------------------------------------------------------------------ export


@pytest.fixture
def recorded(tmp_path):
    """A small real recording whose meta names a script in tmp_path (as `record` writes it)."""
    path, script = tmp_path / "in.brrr", tmp_path / "train.py"
    script.write_text("print('the script')\n")
    path.write_bytes(gzip.decompress(open(FIXTURE, "rb").read()))
    db = sqlite3.connect(path)
    with db:
        db.execute("UPDATE meta SET value = ? WHERE key = 'argv'", (json.dumps(["train.py"]),))
        db.execute("UPDATE meta SET value = ? WHERE key = 'cwd'", (json.dumps(str(tmp_path)),))
    db.close()
    return str(path), str(script)


def export(out: str, src: str, *args: str) -> subprocess.CompletedProcess:
    return run_brrrtui("export", "--perfetto", out, src, *args, timeout=T)


def test_export_replaces_only_a_trace_it_wrote_or_with_force(tmp_path, recorded):
    src, _ = recorded
    notes = tmp_path / "notes.json"
    notes.write_text('{"mine": true}\n')
    assert_one_line_error(export(str(notes), src), "not a trace brrrtui exported", "--force")
    assert notes.read_text() == '{"mine": true}\n'
    for out in (str(tmp_path / "t.json"), str(tmp_path / "t.json.gz")):
        for _ in range(2):  # a new file, then the trace it wrote: replaced without --force
            proc = export(out, src)
            assert proc.returncode == 0, proc.stderr
    assert json.load(gzip.open(tmp_path / "t.json.gz"))["otherData"] == {"generator": "brrrtui"}
    proc = export(str(notes), src, "--force")
    assert proc.returncode == 0, proc.stderr
    assert json.loads(notes.read_text())["traceEvents"]
    assert not [n for n in os.listdir(tmp_path) if ".part" in n]


def test_export_never_overwrites_its_input_or_the_recorded_script(tmp_path, recorded):
    src, script = recorded
    before = snapshot(str(tmp_path))
    for force in ([], ["--force"]):
        assert_one_line_error(export(src, src, *force), "input", "refusing to overwrite")
        assert_one_line_error(export(script, src, *force), "refusing to overwrite")
    assert_one_line_error(export(script, src, "--force"), "the recorded script")
    fifo = str(tmp_path / "pipe.json")
    os.mkfifo(fifo)
    assert_one_line_error(export(fifo, src, "--force"), "FIFO")
    os.unlink(fifo)
    assert snapshot(str(tmp_path)) == before


def test_merge_never_replaces_one_of_its_inputs(tmp_path):
    run = str(tmp_path / "run.brrr")
    w = RecordingWriter(run)
    w.set_meta(status="finished", dist={"launcher": "torch.distributed.run", "world_size": 1,
                                        "ranks": [{"rank": 0, "file": "run.rank0.brrr"}]})  # fmt: skip
    w.close()
    kept = open(run, "rb").read()
    assert_one_line_error(run_brrrtui("merge", "-o", run, run, timeout=T), "input")
    assert open(run, "rb").read() == kept


class _FollowingApp:
    """Stands in for the live TUI: what it was told to follow, and what lay where while the script ran."""

    seen: dict[str, object] = {}

    def __init__(self, path, feed, script, on_interrupt=None, **options):  # options: make_app's (analyze=…)
        self.path, self.feed = path, feed

    def run(self):
        from brrrtui.record.feed import Exited

        deadline = time.monotonic() + T
        while not any(isinstance(ev, Exited) for ev in self.feed.drain()):
            assert time.monotonic() < deadline, "the script's exit never reached the UI"
            time.sleep(0.05)
        # the script has ended and the recording is final, but the UI still reads the file it follows
        _FollowingApp.seen = {"path": self.path, "meta": load_recording(self.path).meta}


def test_the_live_ui_follows_the_file_being_written_and_it_is_renamed_after_the_ui(tmp_path, monkeypatch):
    import brrrtui.cli as cli
    import brrrtui.tui.app

    out = str(tmp_path / "r.brrr")
    assert record(out, EXIT3).returncode == 3
    kept = open(out, "rb").read()
    monkeypatch.setattr(cli, "_tui_available", lambda: True)
    monkeypatch.setattr(brrrtui.tui.app, "make_app", _FollowingApp)
    assert cli.main(["-o", out, "--no-calibrate", EXIT3]) == 3
    followed = _FollowingApp.seen["path"]
    assert isinstance(followed, str) and followed.startswith(f"{out}.part"), followed
    assert _FollowingApp.seen["meta"]["exit_code"] == 3  # type: ignore[index]
    assert not os.path.exists(followed) and sorted(os.listdir(tmp_path)) == ["r.brrr"]
    assert open(out, "rb").read() != kept and load_recording(out).meta["exit_code"] == 3


def test_a_launchers_training_script_is_never_a_rank_or_job_file(tmp_path, monkeypatch):
    """torchrun / spawn: the job file and every rank file go through the same policy as `record -o`."""
    from brrrtui.contract.errors import InputError
    from brrrtui.record.targets import check_out_path

    monkeypatch.chdir(tmp_path)
    (tmp_path / "train.py").write_text("print('train')\n")
    for target in (["-m", "torch.distributed.run", "--nproc_per_node=2", "train.py"], [":spawn", "train.py"]):
        with pytest.raises(InputError, match="the training script|the script itself"):
            check_out_path("train.py", target, force=True)
    assert (tmp_path / "train.py").read_text() == "print('train')\n"


def test_the_demo_unpacks_only_into_new_files(tmp_path):
    from brrrtui.commands.demo import UNPACKED, demo_recording
    from brrrtui.contract.errors import InputError

    victim = tmp_path / "victim"
    victim.write_text("precious\n")
    os.symlink(victim, tmp_path / UNPACKED)
    with pytest.raises(InputError, match="already exists"):
        demo_recording(str(tmp_path))
    assert victim.read_text() == "precious\n"


def test_a_replacing_recording_whose_new_file_is_deleted_continues_in_a_sibling_and_keeps_the_earlier(tmp_path):
    """The recorder's sink (record/sink.py): the new file beside the target goes away mid-run; the recording
    continues in `r.brrr.1` with what it held, and the earlier recording at `r.brrr` is left as it was."""
    from brrrtui.record.sink import Sink

    out = str(tmp_path / "r.brrr")
    assert record(out, EXIT3).returncode == 3
    kept = open(out, "rb").read()
    said: list[str] = []
    sink = Sink(out, said.append)
    assert sink.open([EXIT3]) is True
    temp = sink.path
    assert temp.startswith(f"{out}.part")
    sink.set_meta(status="running", argv=["x.py"])
    os.remove(temp)
    sink.set_meta(status="finished", exit_code=0)
    sink.close()
    assert said and f"continues in {out}.1" in said[-1], said
    assert open(out, "rb").read() == kept
    assert load_recording(out + ".1").meta["status"] == "finished"
    assert sorted(os.listdir(tmp_path)) == ["r.brrr", "r.brrr.1"]
