"""Bad input: one clear line on stderr, a non-zero exit code, never a traceback of brrrtui's own."""

import gzip
import os
import shutil
import sqlite3

import pytest
from conftest import SCRIPTS, run_brrrtui

from brrrtui.recording.store import RecordingWriter


def assert_one_line_error(proc, *fragments: str, code: int = 2) -> None:
    assert proc.returncode == code, (proc.returncode, proc.stderr)
    err = proc.stderr.strip()
    assert "Traceback" not in proc.stderr
    assert len(err.splitlines()) == 1, err
    assert err.startswith("brrrtui: error: ")
    for fragment in fragments:
        assert fragment in err


def test_version_and_help():
    proc = run_brrrtui("--version")
    assert proc.returncode == 0 and proc.stdout.startswith("brrrtui ")
    for args in (["--help"], ["record", "--help"], ["view", "--help"], ["report", "--help"]):
        proc = run_brrrtui(*args)
        assert proc.returncode == 0 and "usage:" in proc.stdout, args


def test_missing_script(tmp_path):
    assert_one_line_error(
        run_brrrtui("record", "-o", str(tmp_path / "x.brrr"), "nope.py"), "nope.py: no such file"
    )
    assert not (tmp_path / "x.brrr").exists()


def test_no_script_and_no_output():
    assert_one_line_error(run_brrrtui("record", "-o", "x.brrr"), "no script given")
    assert_one_line_error(run_brrrtui("record", "x.py"), "-o/--output")
    assert_one_line_error(run_brrrtui(), "no script given")


def test_not_a_python_file(tmp_path):
    binary = tmp_path / "model.bin"
    binary.write_bytes(b"\x7fELF\x00\x01\x02")
    assert_one_line_error(
        run_brrrtui("record", "-o", str(tmp_path / "x.brrr"), str(binary)), "not a Python script"
    )
    broken = tmp_path / "broken.py"
    broken.write_text("def f(:\n    pass\n")
    assert_one_line_error(run_brrrtui("record", "-o", str(tmp_path / "y.brrr"), str(broken)), "broken.py:1",
                          "not valid Python")  # fmt: skip


def test_unwritable_output(tmp_path):
    script = os.path.join(SCRIPTS, "exit3.py")
    assert_one_line_error(run_brrrtui("record", "-o", str(tmp_path / "no" / "dir" / "x.brrr"), script),
                          "does not exist")  # fmt: skip
    assert_one_line_error(run_brrrtui("record", "-o", str(tmp_path), script), "is a directory")
    if os.geteuid() != 0:  # root may write anywhere
        locked = tmp_path / "locked"
        locked.mkdir(mode=0o500)
        assert_one_line_error(
            run_brrrtui("record", "-o", str(locked / "x.brrr"), script), "permission denied"
        )


def test_bad_option_values(tmp_path):
    script = os.path.join(SCRIPTS, "exit3.py")
    assert_one_line_error(
        run_brrrtui("record", "-o", str(tmp_path / "x.brrr"), "--duty", "2", script), "--duty"
    )
    assert_one_line_error(
        run_brrrtui("record", "-o", str(tmp_path / "x.brrr"), "--duty", "lots", script), "--duty"
    )


@pytest.mark.parametrize("command", ["view", "report"])
def test_unreadable_inputs(tmp_path, command):
    empty = tmp_path / "empty.brrr"
    empty.write_bytes(b"")
    garbage = tmp_path / "garbage.brrr"
    garbage.write_bytes(os.urandom(2048))
    text = tmp_path / "notes.json"
    text.write_text("{not json")
    gz = tmp_path / "trace.json.gz"
    gz.write_bytes(gzip.compress(b'{"traceEvents": [], "x": 1}'))
    other_db = tmp_path / "other.brrr"
    db = sqlite3.connect(other_db)
    db.execute("CREATE TABLE t(x)")
    db.commit()
    db.close()
    cases = {
        str(tmp_path / "missing.brrr"): "no such file",
        str(empty): "is empty",
        str(garbage): "neither a brrrtui recording nor a torch.profiler",
        str(text): "not a readable JSON trace",
        str(gz): "nothing to analyse",
        str(other_db): "not a brrrtui recording",
        str(tmp_path): "is a directory",
    }
    for path, fragment in cases.items():
        assert_one_line_error(run_brrrtui(command, path), fragment)


def test_truncated_recording(tmp_path):
    good = tmp_path / "good.brrr"
    w = RecordingWriter(str(good))
    w.append({"strings": [(i, f"kernel_{i}" * 20) for i in range(2000)]})
    w.close()
    cut = tmp_path / "cut.brrr"
    shutil.copy(good, cut)
    with open(cut, "r+b") as f:
        f.truncate(os.path.getsize(good) // 3)
    assert_one_line_error(run_brrrtui("report", str(cut)), "damaged")


def test_gzipped_recordings_open_and_a_cut_one_fails_cleanly(tmp_path):
    fixture = os.path.join(os.path.dirname(__file__), "fixtures", "h200_known_regimes.brrr.gz")
    proc = run_brrrtui("report", "--json", fixture)
    assert proc.returncode == 0, proc.stderr
    assert '"name": "NVIDIA H200"' in proc.stdout
    cut = tmp_path / "cut.brrr.gz"
    data = open(fixture, "rb").read()
    cut.write_bytes(data[: len(data) // 2])
    assert_one_line_error(run_brrrtui("report", str(cut)), "truncated or damaged gzip")


def test_output_never_destroys_the_script_or_a_file_that_is_no_recording(tmp_path):
    script = tmp_path / "v.py"
    shutil.copy(os.path.join(SCRIPTS, "exit3.py"), script)
    source = script.read_bytes()
    for force in ([], ["--force"]):  # the script itself: never, not even with --force
        assert_one_line_error(run_brrrtui("record", "-o", str(script), *force, str(script)), "the script itself")
        assert script.read_bytes() == source
    notes = tmp_path / "notes.txt"
    notes.write_text("my notes\n")
    assert_one_line_error(run_brrrtui("record", "-o", str(notes), str(script)), "not a brrrtui recording",
                          "--force")  # fmt: skip
    assert notes.read_text() == "my notes\n"
    proc = run_brrrtui("record", "-o", str(notes), "--force", str(script))
    assert proc.returncode == 3, proc.stderr
    assert notes.read_bytes().startswith(b"SQLite format 3")


def test_an_earlier_recording_is_replaced_and_said_so(tmp_path):
    script, out = os.path.join(SCRIPTS, "exit3.py"), tmp_path / "run.brrr"
    assert run_brrrtui("record", "-o", str(out), script).returncode == 3
    proc = run_brrrtui("record", "-o", str(out), script)
    assert proc.returncode == 3, proc.stderr
    assert [ln for ln in proc.stderr.splitlines() if "replacing" in ln] == [
        f"brrrtui: replacing the earlier file {out}"
    ]
    assert not (tmp_path / "run.brrr.lock").exists()


def test_running_out_of_memory_is_one_line(tmp_path):
    """A recording whose columns need more memory than the process may have (its address space capped at
    1 GiB, below the 1.4 GB of columns its 25 M kernels take): numpy's MemoryError becomes one line."""
    import resource

    import numpy as np

    from brrrtui.recording import codec

    path = str(tmp_path / "big.brrr")
    w = RecordingWriter(path)
    w.set_meta(status="finished")
    w.append({"strings": [(0, "k")], "windows": [(0, 0, 10, 10**6, 0, 0, 0, 5)],
              "gpu": [(0, 0, 0, 100 + i, 1, 0, 7, i, -1, -1, -1) for i in range(2)]})  # fmt: skip
    w.close()
    n = 25_000_000
    db = sqlite3.connect(path)
    with db:  # one byte a kernel: start times 0..255 above a base; every other column one value
        db.execute("UPDATE gpu SET batch_rows = ?, start_ns = ?", (n, codec.encode(np.arange(n) % 200 + 100)))
    db.close()

    def cap() -> None:
        resource.setrlimit(resource.RLIMIT_AS, (1 << 30, 1 << 30))

    assert_one_line_error(run_brrrtui("report", path, preexec_fn=cap), "out of memory")
