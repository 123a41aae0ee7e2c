"""Recordings, and the source files they name, are untrusted input: a crafted one ends in one
`brrrtui: error:` line (or a report), in bounded time and memory, and is never written to.

- SQL in the file: views and triggers are refused, and so are virtual tables and computed columns where the
  readers read; the connection reads only the expected tables, writes nothing, and its work is bounded.
- Source files: read only when regular, text and at most 8 MB, when shown; a FIFO never blocks the view, a
  sparse 6 GB file is never read.
- `.brrr.gz`: unpacked streamed, cut at the size the SQLite header states, with an honest error when TMPDIR
  has no room (not "damaged gzip").
"""

from __future__ import annotations

import contextlib
import gzip
import io
import os
import resource
import sqlite3
import subprocess
import sys
import time
import zlib

import pytest
from conftest import ROOT, run_brrrtui
from tui_fakes import write_recording

from brrrtui.cli import main
from brrrtui.recording import checks
from brrrtui.recording.store import RecordingError, load_recording, open_readonly

TESTS = os.path.join(ROOT, "tests")
AS_LIMIT = 4 << 30  # a child reading a 6 GB file whole fails here instead of taking the machine's memory


def recording(tmp_path) -> str:
    return write_recording(str(tmp_path / "run.brrr"), windows=2)


def plant(path: str, sql: str) -> None:
    db = sqlite3.connect(path)
    db.executescript(sql)
    db.close()


def one_error_line(proc: subprocess.CompletedProcess) -> str:
    assert proc.returncode == 2, (proc.returncode, proc.stderr[-2000:])
    lines = proc.stderr.splitlines()
    assert len(lines) == 1 and lines[0].startswith("brrrtui: error: "), proc.stderr[-2000:]
    return lines[0]


def report_here(path: str) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        code = main(["report", path])
    return code, out.getvalue(), err.getvalue()


# ---------------------------------------------------------------- SQL in the file

NEVER_ENDS = (
    "WITH RECURSIVE c(i) AS (SELECT 0 UNION ALL SELECT i + 1 FROM c) SELECT i, 'x' FROM c WHERE i < 0"
)
PLANTED = {
    "a view in place of the strings table": (f"DROP TABLE strings; CREATE VIEW strings(id, s) AS {NEVER_ENDS};", "view"),
    "a view beside the tables": ("CREATE VIEW v AS SELECT * FROM meta;", "view"),
    "a trigger": ("CREATE TRIGGER t AFTER INSERT ON meta BEGIN SELECT 1; END;", "trigger"),
    "a virtual strings table": (
        "DROP TABLE strings; CREATE VIRTUAL TABLE strings USING fts5(id, s);"
        "INSERT INTO strings(id, s) VALUES (0, 'k');",
        "virtual table",
    ),
    "a computed column": (
        "DROP TABLE lines; CREATE TABLE lines(id INTEGER PRIMARY KEY, file TEXT, line INTEGER, "
        "function TEXT GENERATED ALWAYS AS (printf('%.*c', 100000, 'x')));"
        "INSERT INTO lines(id, file, line) VALUES (0, 'train.py', 4);",
        "computed columns",
    ),
}  # fmt: skip


@pytest.mark.parametrize("case", sorted(PLANTED))
def test_sql_planted_in_a_recording_is_refused_with_one_line_in_bounded_time(tmp_path, case):
    path = recording(tmp_path)
    sql, word = PLANTED[case]
    plant(path, sql)
    before = open(path, "rb").read()
    for command in ("report", "view"):
        t = time.monotonic()
        line = one_error_line(run_brrrtui(command, path, timeout=60))
        assert time.monotonic() - t < 30
        assert word in line and "not read" in line, line
    assert open(path, "rb").read() == before


def test_a_reader_s_connection_reads_only_the_expected_tables_and_writes_nothing(tmp_path):
    path = recording(tmp_path)
    plant(path, "CREATE TABLE extra(x); INSERT INTO extra VALUES (1);")
    db = open_readonly(path)
    try:
        assert db.execute("SELECT count(*) FROM meta").fetchone()[0] > 0
        for sql in (
            "SELECT * FROM extra",
            "DELETE FROM meta",
            "UPDATE strings SET s = 'x'",
            "CREATE TABLE t(x)",
            "DROP TABLE gpu",
            "PRAGMA writable_schema = ON",
            f"ATTACH DATABASE '{tmp_path / 'other.db'}' AS o",
            "WITH RECURSIVE c(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM c WHERE i < 5) SELECT * FROM c",
        ):
            with pytest.raises(sqlite3.DatabaseError):
                db.execute(sql).fetchall()
    finally:
        db.close()
    assert not os.path.exists(tmp_path / "other.db")


def test_a_recording_whose_read_needs_more_work_than_its_size_allows_is_stopped(tmp_path, monkeypatch):
    path = recording(tmp_path)
    # names enough that reading them is a statement of some thousands of SQLite instructions
    plant(
        path,
        "INSERT INTO strings(id, s) WITH RECURSIVE c(i) AS (SELECT 9 UNION ALL SELECT i + 1 FROM c WHERE i < 3000) "
        "SELECT i, 'x' FROM c",
    )
    assert report_here(path)[0] == 0
    monkeypatch.setattr(checks, "READ_BUDGET_OPS", 0)
    monkeypatch.setattr(checks, "READ_OPS_PER_BYTE", 0)
    with pytest.raises(RecordingError, match="needs far more work than a recording of its size"):
        load_recording(path)
    code, _, err = report_here(path)
    assert code == 2 and len(err.splitlines()) == 1 and "(stopped)" in err, err


def test_a_fifo_given_as_the_recording_is_refused_at_once(tmp_path):
    fifo = str(tmp_path / "run.brrr")
    os.mkfifo(fifo)
    for command in ("report", "view"):
        assert "is not a regular file" in one_error_line(run_brrrtui(command, fifo, timeout=60))


# ---------------------------------------------------------------- source files named by a recording

READ_SOURCE = """
import resource, sys, time
resource.setrlimit(resource.RLIMIT_AS, ({limit}, {limit}))
from brrrtui.present.source import read_highlighted
t = time.monotonic()
print(read_highlighted(sys.argv[1]) is None, round(time.monotonic() - t, 3))
"""
VIEW_SOURCE = """
import asyncio, resource, sys
resource.setrlimit(resource.RLIMIT_AS, ({limit}, {limit}))
sys.path.insert(0, {tests!r})
from tui_fakes import analysed, fake_analyze
from brrrtui.tui.app import make_app

async def show():
    app = make_app(sys.argv[1], None, None, analyze=fake_analyze)
    async with app.run_test(size=(320, 40)) as pilot:
        await analysed(pilot)
        await pilot.pause(0.2)
        print("\\n".join(strip.text for strip in app.screen._compositor.render_strips()))

asyncio.run(show())
"""


def child(code: str, *args: str, timeout: float = 60) -> subprocess.CompletedProcess:
    """`code` in a fresh interpreter with this tree's brrrtui, at most 4 GiB of address space."""
    env = dict(os.environ, PYTHONPATH=ROOT)
    code = code.format(limit=AS_LIMIT, tests=TESTS)
    return subprocess.run(
        [sys.executable, "-c", code, *args], env=env, capture_output=True, text=True, timeout=timeout
    )


def test_a_sparse_6_gb_source_file_is_not_read(tmp_path):
    path = recording(tmp_path)
    script = tmp_path / "train.py"
    os.truncate(script, 6 << 30)  # what the recording names: 6 GB, sparse (no disk used)
    proc = child(READ_SOURCE, str(script))
    assert proc.returncode == 0, proc.stderr[-2000:]
    none, seconds = proc.stdout.split()
    assert none == "True" and float(seconds) < 1.0
    proc = child(VIEW_SOURCE, path, timeout=120)
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert "train.py is too big to show (6.4 GB; at most 8.4 MB)" in proc.stdout


def test_a_fifo_named_as_a_source_file_never_blocks_the_view(tmp_path):
    path = recording(tmp_path)
    script = tmp_path / "train.py"
    os.remove(script)
    os.mkfifo(script)  # nobody ever writes it: a reader that opens it waits for ever
    proc = child(READ_SOURCE, str(script), timeout=30)
    assert proc.returncode == 0 and proc.stdout.split()[0] == "True", proc.stderr[-2000:]
    proc = child(VIEW_SOURCE, path, timeout=120)
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert "train.py is not on this machine" in proc.stdout or "is not a regular file" in proc.stdout


def test_a_binary_source_file_or_one_with_terminal_control_is_not_shown_and_a_text_one_is(tmp_path):
    from brrrtui.present.source import MAX_SOURCE_BYTES, read_highlighted, read_source

    binary = tmp_path / "lib.py"
    binary.write_bytes(b"\x7fELF\x02\x01\x01\x00" + bytes(range(256)) * 10)
    assert (
        read_source(str(binary)) == "is not text to show (it holds the control character U+007F): not shown"
    )
    evil = tmp_path / "evil.py"
    evil.write_text("x = 1  # \x1b]52;c;cm0gLXJmIH4=\x07\n")  # shown, it would write the clipboard
    assert read_source(str(evil)) == "is not text to show (it holds the control character U+001B): not shown"
    assert read_highlighted(str(evil)) is None  # so search results never quote it either
    text = tmp_path / "ok.py"
    text.write_text("x = 1\r\n\x0c\ny = 'é\t'\n")
    assert ["".join(t for t, _ in line) for line in read_source(str(text))] == ["x = 1", " ", "y = 'é  '"]
    big = tmp_path / "big.py"
    big.write_bytes(b"x = 1\n" * (MAX_SOURCE_BYTES // 6 + 1))
    assert read_source(str(big)).startswith("is too big to show")


# ---------------------------------------------------------------- gzipped recordings


def gz(data_parts: list[bytes]) -> bytes:
    z = zlib.compressobj(6, zlib.DEFLATED, 31)
    return b"".join([*(z.compress(p) for p in data_parts), z.flush()])


def with_pages(data: bytes, pages: int, valid: bool = True) -> bytes:
    """`data` (an SQLite file) with its header's page count set to `pages` (or made invalid)."""
    out = bytearray(data)
    out[28:32] = pages.to_bytes(4, "big")
    if not valid:
        out[92:96] = (int.from_bytes(out[24:28], "big") + 1).to_bytes(4, "big")
    return bytes(out)


def limited_report(path: str, fsize: int, env: dict | None = None) -> subprocess.CompletedProcess:
    """`brrrtui report` in a process that may write files of at most `fsize` bytes."""

    def limit() -> None:
        resource.setrlimit(resource.RLIMIT_FSIZE, (fsize, fsize))

    e = dict(os.environ, PYTHONPATH=ROOT, BRRRTUI_CALIBRATE="0", **(env or {}))
    return subprocess.run(
        [sys.executable, "-m", "brrrtui", "report", path], cwd=ROOT, env=e, capture_output=True, text=True,
        timeout=120, preexec_fn=limit,
    )  # fmt: skip


def test_a_gzip_that_expands_past_its_recording_is_cut_there_not_unpacked_whole(tmp_path):
    plain = open(recording(tmp_path), "rb").read()
    bomb = tmp_path / "bomb.brrr.gz"
    bomb.write_bytes(gz([plain, bytes(64 << 20)]))  # 64 MiB of zeros after the database the header states
    assert bomb.stat().st_size < 200_000
    proc = limited_report(str(bomb), 16 << 20, env={"TMPDIR": str(tmp_path)})
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert "kernel" in proc.stdout.lower()


def test_a_gzip_claiming_more_than_tmpdir_holds_says_so_before_unpacking(tmp_path):
    plain = open(recording(tmp_path), "rb").read()
    claims = tmp_path / "huge.brrr.gz"
    claims.write_bytes(gz([with_pages(plain, 2**32 - 1)]))  # 4 G pages of 4 KB: 17.6 TB
    line = one_error_line(limited_report(str(claims), 16 << 20, env={"TMPDIR": str(tmp_path)}))
    assert f"not enough space in TMPDIR ({tmp_path}) to unpack {claims}: it needs 17,592.19 GB" in line
    assert "damaged" not in line


@contextlib.contextmanager
def small_tmpdir(folder: str, size: str):
    """A tmpfs of `size` mounted on `folder` (skips where this process may not mount)."""
    os.makedirs(folder)
    proc = subprocess.run(
        ["mount", "-t", "tmpfs", "-o", f"size={size}", "tmpfs", folder], capture_output=True
    )
    if proc.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs here: {proc.stderr.decode(errors='replace').strip()}")
    try:
        yield folder
    finally:
        subprocess.run(["umount", folder], check=True)


def test_a_full_tmpdir_is_reported_as_such_not_as_a_damaged_gzip(tmp_path):
    plain = open(recording(tmp_path), "rb").read()
    pad = bytes(24 << 20)
    no_size = tmp_path / "nosize.brrr.gz"  # no size in its header: SQLite reads the whole file
    no_size.write_bytes(gz([with_pages(plain, 1, valid=False), pad]))
    sized = tmp_path / "sized.brrr.gz"  # a header that states all 24 MB
    sized.write_bytes(gz([with_pages(plain, (len(plain) + len(pad)) // 4096), pad]))
    with small_tmpdir(str(tmp_path / "small"), "8m") as small:
        for path in (no_size, sized):
            line = one_error_line(run_brrrtui("report", str(path), env={"TMPDIR": small}, timeout=120))
            assert f"not enough space in TMPDIR ({small}) to unpack {path}" in line and "damaged" not in line
            assert os.listdir(small) == []
    assert gzip.decompress(sized.read_bytes())[:16] == b"SQLite format 3\x00"
