"""Every command behaves the same way, end to end through `python -m brrrtui`: `--help` prints help and
touches nothing, a mistyped command gets a suggestion, `view` and `diff --view` off a terminal print their text
and exit, conflicting output flags are one error line, and files are named by one rule (relative to the
current folder below it, else absolute)."""

from __future__ import annotations

import os
import shutil
import subprocess

import pytest
from conftest import ROOT, run_brrrtui

FIXTURES = os.path.join(ROOT, "tests", "fixtures")
SMALL = os.path.join(FIXTURES, "h200_known_regimes.brrr.gz")  # 17 KB: a report in well under a second
SMALL_AFTER = os.path.join(FIXTURES, "h200_known_regimes_sleep2.brrr.gz")

HELP = {  # every way into a command, and a word its help must show
    "brrrtui": ([], "brrrtui record -o run.brrr train.py"),
    "record": (["record"], "Capture headlessly"),
    "view": (["view"], "Browse a recording"),
    "report": (["report"], "--sarif"),
    "export": (["export"], "--perfetto"),
    "diff": (["diff"], "--fail-if-slower"),
    "demo": (["demo"], "H200"),
    "merge": (["merge"], "Merge the run files"),
    "torchrun": (["torchrun"], "every worker rank traced"),
    "spawn": (["spawn"], "starts its own ranks"),
    "torchrun, its options first": (["-o", "job.brrr", "--duty", "0.1", "torchrun"], "every worker rank"),
    "record torchrun": (["record", "-o", "job.brrr", "torchrun", "--nproc_per_node=2"], "every worker rank"),
    "record spawn": (["record", "-o", "job.brrr", "spawn"], "starts its own ranks"),
}


def assert_one_line_error(proc: subprocess.CompletedProcess, *fragments: str) -> None:
    err = proc.stderr.strip()
    assert proc.returncode == 2, (proc.returncode, proc.stderr)
    assert len(err.splitlines()) == 1 and err.startswith("brrrtui: error: "), err
    assert "Traceback" not in proc.stderr
    for fragment in fragments:
        assert fragment in err, err


def test_the_help_table_names_every_command():
    from brrrtui import cli

    named = {words[-1] for words, _ in HELP.values() if words}
    assert set(cli.SUBCOMMANDS) | set(getattr(cli, "LAUNCHERS", ("torchrun", "spawn"))) <= named


@pytest.mark.parametrize(
    ("case", "flag"), [(case, "--help") for case in sorted(HELP)] + [("torchrun", "-h"), ("spawn", "-h")]
)
def test_help_prints_help_and_touches_nothing(tmp_path, case, flag):
    words, shown = HELP[case]
    proc = run_brrrtui(*words, flag, cwd=str(tmp_path), timeout=60)
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert proc.stdout.startswith("usage: brrrtui") and shown in proc.stdout
    assert proc.stderr == ""
    assert os.listdir(tmp_path) == []  # no recording, no lock, no output


@pytest.mark.parametrize("launcher", ["torchrun", "spawn"])
def test_a_launcher_without_a_script_is_one_line_and_runs_nothing(tmp_path, launcher):
    assert_one_line_error(run_brrrtui(launcher, cwd=str(tmp_path), timeout=60), "no script given", launcher)
    assert os.listdir(tmp_path) == []


@pytest.mark.slow  # a real script under capture
def test_the_scripts_own_help_still_reaches_the_script(tmp_path):
    """After the script, `--help` is the script's: brrrtui runs it (headless here, no terminal)."""
    script = tmp_path / "train.py"
    script.write_text("import sys\nprint('script got', sys.argv[1:])\n")
    proc = run_brrrtui(
        "-o", "run.brrr", "--no-calibrate", "train.py", "--help", cwd=str(tmp_path), timeout=120
    )
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert "script got ['--help']" in proc.stdout + proc.stderr
    assert (tmp_path / "run.brrr").exists()


@pytest.mark.parametrize(
    ("typed", "meant"),
    [
        ("reprot", "report"),
        ("veiw", "view"),
        ("exprot", "export"),
        ("torchrn", "torchrun"),
        ("mrege", "merge"),
    ],
)
def test_a_mistyped_command_gets_a_suggestion(tmp_path, typed, meant):
    proc = run_brrrtui(typed, "run.brrr", cwd=str(tmp_path), timeout=60)
    assert_one_line_error(proc, f"did you mean '{meant}'?", typed)
    assert os.listdir(tmp_path) == []


def test_a_missing_script_is_not_taken_for_a_command(tmp_path):
    """`view.py` and `./report` name files: no such file, no suggestion."""
    for word in ("view.py", "./report"):
        proc = run_brrrtui(word, cwd=str(tmp_path), timeout=60)
        assert_one_line_error(proc, "no such file")
        assert "did you mean" not in proc.stderr


def _report(path: str, cwd: str) -> str:
    proc = run_brrrtui("report", path, cwd=cwd, timeout=60)
    assert proc.returncode == 0, proc.stderr
    return proc.stdout


def test_view_off_a_terminal_prints_the_report_and_exits(tmp_path):
    proc = run_brrrtui("view", SMALL, cwd=str(tmp_path), timeout=60, stdin=subprocess.DEVNULL)
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert "\x1b" not in proc.stdout + proc.stderr  # no terminal escape codes
    assert proc.stdout == _report(SMALL, str(tmp_path))
    assert proc.stderr.strip().splitlines() == [f"brrrtui: not a terminal: {SMALL}'s report, not the UI"]
    assert os.listdir(tmp_path) == []


def test_view_off_a_terminal_keeps_the_ceilings_and_the_one_line_errors(tmp_path):
    proc = run_brrrtui("view", "--peaks", "bw=1e12", SMALL, cwd=str(tmp_path), timeout=60,
                       stdin=subprocess.DEVNULL)  # fmt: skip
    assert proc.returncode == 0 and "1 TB/s" in proc.stdout and "\x1b" not in proc.stdout, proc.stderr[-2000:]
    missing = str(tmp_path / "missing.brrr")
    assert_one_line_error(run_brrrtui("view", missing, timeout=60, stdin=subprocess.DEVNULL), "no such file")


def test_diff_view_off_a_terminal_prints_the_diff_and_exits(tmp_path):
    proc = run_brrrtui("diff", "--view", SMALL, SMALL_AFTER, cwd=str(tmp_path), timeout=60,
                       stdin=subprocess.DEVNULL)  # fmt: skip
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert "\x1b" not in proc.stdout + proc.stderr
    text = run_brrrtui("diff", SMALL, SMALL_AFTER, cwd=str(tmp_path), timeout=60)
    assert proc.stdout == text.stdout and proc.stdout.startswith("brrrtui diff: ")
    assert proc.stderr.strip().splitlines() == ["brrrtui: not a terminal: the diff as text, not the UI"]


@pytest.mark.parametrize(
    ("words", "fragment"),
    [
        (["report", "--json", "--sarif", SMALL], "--sarif: not allowed with argument --json"),
        (["report", "--sarif", "--json", SMALL], "--json: not allowed with argument --sarif"),
        (["diff", "--json", "--view", SMALL, SMALL_AFTER], "--view: not allowed with argument --json"),
    ],
)
def test_conflicting_output_flags_are_one_error_line(tmp_path, words, fragment):
    proc = run_brrrtui(*words, cwd=str(tmp_path), timeout=60, stdin=subprocess.DEVNULL)
    assert_one_line_error(proc, fragment)
    assert proc.stdout == ""


@pytest.mark.slow  # four runs of the CLI
def test_files_are_named_relative_below_the_current_folder_and_absolute_elsewhere(tmp_path):
    here = tmp_path / "here"
    here.mkdir()
    before, after = str(here / "before.brrr.gz"), str(here / "after.brrr.gz")
    shutil.copy(SMALL, before)
    shutil.copy(SMALL_AFTER, after)
    # an absolute path below the current folder is shown relative to it
    proc = run_brrrtui("export", "--perfetto", str(here / "out.json"), before, cwd=str(here), timeout=60)
    assert proc.returncode == 0 and proc.stderr.startswith("brrrtui: wrote out.json: "), proc.stderr
    proc = run_brrrtui("diff", before, after, cwd=str(here), timeout=60)
    assert proc.stdout.startswith("brrrtui diff: before.brrr.gz -> after.brrr.gz\n"), proc.stdout[:200]
    # a relative path outside it, absolute
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    proc = run_brrrtui("export", "--perfetto", "../out.json", "../here/before.brrr.gz", cwd=str(elsewhere),
                       timeout=60)  # fmt: skip
    assert proc.returncode == 0 and proc.stderr.startswith(f"brrrtui: wrote {tmp_path / 'out.json'}: ")
    proc = run_brrrtui("diff", "--view", "../here/before.brrr.gz", after, cwd=str(elsewhere), timeout=60,
                       stdin=subprocess.DEVNULL)  # fmt: skip
    assert proc.stdout.startswith(f"brrrtui diff: {before} -> {after}\n"), proc.stdout[:200]
