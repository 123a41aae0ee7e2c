"""The terminal is brrrtui's: nothing the script prints, no name or path from a recording, and no path the user
gave reaches it as control. One sanitiser (brrrtui.contract.safe) does it: unit tests of its three forms,
then the live UI's log pane, the header, the source view and the CLI's error line, end to end."""

from __future__ import annotations

import os
import re
import time

from conftest import run_brrrtui
from hypothesis import given, settings, strategies as st
from textual.content import Content
from tui_fakes import analysed, fake_analyze, run_async, wait_until, write_recording

from brrrtui.contract.safe import escape_markup, safe_text, terminal_line
from brrrtui.record.feed import Feed, LogLine
from brrrtui.tui.app import make_app

OSC_TITLE = "\x1b]0;owned\x07"
OSC_CLIPBOARD = "\x1b]52;c;cm0gLXJmIH4=\x07"
CLEAR = "\x1b[2J"
DCS = "\x1bPq#0;2;0;0;0\x1b\\"
C1_CSI = "\x9b31m"
CLICK = "[@click=app.quit]x[/]"
HOSTILE = f"a{OSC_TITLE}b{CLEAR}c{OSC_CLIPBOARD}d{DCS}e{C1_CSI}f"
CONTROL = re.compile("[\x00-\x1f\x7f-\x9f\u2028\u2029\u202a-\u202e\u2066-\u2069]")
SIZE = (120, 40)


def assert_no_control(text: str) -> None:
    assert CONTROL.search(text) is None, repr(text)


def screen_segments(app) -> list[str]:
    """The text of every segment the app would write to the terminal now."""
    return [seg.text for strip in app.screen._compositor.render_strips() for seg in strip]


def screen_text(app) -> str:
    return "\n".join(strip.text for strip in app.screen._compositor.render_strips())


# ---------------------------------------------------------------- the sanitiser


def test_safe_text_shows_every_control_escaped_and_keeps_the_text():
    assert safe_text(HOSTILE) == (
        "a\\x1b]0;owned\\x07b\\x1b[2Jc\\x1b]52;c;cm0gLXJmIH4=\\x07d\\x1bPq#0;2;0;0;0\\x1b\\e\\x9b31mf"
    )
    assert safe_text("line\u2028sep\u202eevil\nnext") == "line\\u2028sep\\u202eevil\\x0anext"
    assert safe_text(safe_text(HOSTILE)) == safe_text(HOSTILE)  # applying it again changes nothing
    assert safe_text(b"k\x1b[2J") == "k\\x1b[2J" and safe_text("aten::mm") == "aten::mm"


def test_terminal_line_drops_escape_sequences_and_keeps_what_a_terminal_shows():
    assert terminal_line(HOSTILE) == "abcdef"
    assert terminal_line("\x1b[1;31mred\x1b[0m plain") == "red plain"  # colours: not text
    assert terminal_line(" 10%|#   |\r 50%|##  |\r100%|####|\r") == "100%|####|"  # a progress bar
    assert terminal_line("a\tb\x07\x08") == "a    b\\x07\\x08"  # what is left: escaped
    assert terminal_line("\x1b]0;no terminator, the rest is the title") == ""
    assert terminal_line("cut\x1b") == "cut\\x1b" and terminal_line("\x1b[") == ""
    assert terminal_line(CLICK) == CLICK  # markup is text here: the log pane never parses it


def test_escape_markup_makes_textual_show_markup_as_written():
    for text in (
        CLICK,
        "[link=file:///etc/passwd]x[/link]",
        "[$accent]cos[ bold]\\",
        "a\\[b]",
        "[_x]",
        "x\\",
    ):
        assert Content.from_markup(escape_markup(text)).plain == text
    assert Content.from_markup(escape_markup(f"{CLICK}{CLEAR}")).plain == f"{CLICK}\\x1b[2J"


def test_the_sanitiser_takes_linear_time_on_hostile_lines():
    for line in (
        "\x1b[" + "0" * 200_000,
        "\x1b]" * 100_000,
        "\x1b[" * 100_000,
        "\x90" + "x" * 200_000,
        "\r" * 200_000,
    ):
        t = time.perf_counter()
        assert_no_control(terminal_line(line))
        assert_no_control(safe_text(line))
        assert time.perf_counter() - t < 2.0, repr(line[:10])


@settings(max_examples=300, deadline=None, database=None)
@given(
    st.text(alphabet=st.sampled_from(list("\x1b\x07\x9b\x9c\x9d\x90[]\\;0123JmPX^_ \r\n\t\x00\x7fab\u202e")))
)
def test_no_control_survives_any_mix(text):
    assert_no_control(safe_text(text))
    assert_no_control(terminal_line(text))
    assert safe_text(safe_text(text)) == safe_text(text)
    assert Content.from_markup(escape_markup(text)).plain == safe_text(text)


# ---------------------------------------------------------------- the live UI


@run_async
async def test_the_log_pane_never_sends_the_script_s_control_sequences_to_the_terminal(tmp_path):
    path = write_recording(str(tmp_path / "run.brrr"), windows=2)
    feed = Feed()
    app = make_app(path, feed, "train.py", analyze=fake_analyze, poll_s=0.02)
    async with app.run_test(size=SIZE) as pilot:
        feed.put(LogLine("stdout", f"title{OSC_TITLE} wiped{CLEAR} clipboard{OSC_CLIPBOARD} {CLICK}"))
        feed.put(LogLine("stderr", "", [f"block{DCS}{C1_CSI}", f"bell\x07{CLEAR}"]))
        feed.put(LogLine("brrrtui", f"a path {CLEAR}/x.brrr"))
        pane = app.main.log_pane
        await wait_until(pilot, lambda: pane.lines_written >= 4)
        await pilot.pause(0.2)
        for text in screen_segments(app):
            assert_no_control(text)
        shown = screen_text(app)
        assert f"title wiped clipboard {CLICK}" in shown  # the text kept, the markup as written
        assert "blockm" not in shown and "block" in shown and "bell\\x07" in shown
        assert "a path \\x1b[2J/x.brrr" in shown  # brrrtui's own lines: a path shown whole, escaped
        assert app.return_value is None and app.is_running


@run_async
async def test_names_paths_and_source_lines_from_a_recording_reach_the_screen_as_text(tmp_path, monkeypatch):
    folder = tmp_path / "d"
    folder.mkdir()
    path = write_recording(
        str(folder / f"run{OSC_TITLE}.brrr"),
        windows=2,
        names={0: f"gemm{OSC_CLIPBOARD}{CLICK}", 3: f"aten::mm{CLICK}"},
        function=f"step{CLICK}",
    )
    with open(folder / "train.py") as f:
        text = f.read()
    with open(
        folder / "train.py", "w"
    ) as f:  # the source the recording names: its hottest line holds control
        f.write(text.replace("    y = x @ w\n", f"    y = x @ w  # {OSC_TITLE}{CLEAR}{CLICK}\n"))
    monkeypatch.chdir(tmp_path)
    app = make_app(path, None, None, analyze=fake_analyze)
    async with app.run_test(size=(320, 50)) as pilot:
        await analysed(pilot)
        await pilot.pause(0.2)
        for text in screen_segments(app):
            assert_no_control(text)
        shown = screen_text(app)
        assert "run\\x1b]0;owned\\x07.brrr" in shown  # the header names the file, escaped
        assert "train.py is not text to show (it holds the control character U+001B): not shown" in shown
        assert f"d/train.py:4 step{CLICK}" in shown  # the function, in the hot lines: markup as written
        await pilot.click("#source")
        await pilot.pause()
        assert app.is_running and app.return_value is None


# ---------------------------------------------------------------- the CLI


def test_an_error_line_that_echoes_a_path_prints_it_escaped_on_one_line(tmp_path):
    for name in (f"x{OSC_CLIPBOARD}.brrr", f"x{CLEAR}\nforged line.brrr", f"x{C1_CSI}.json"):
        proc = run_brrrtui("report", str(tmp_path / name), timeout=60)
        assert proc.returncode == 2
        assert_no_control(proc.stderr.rstrip("\n"))
        lines = proc.stderr.splitlines()
        assert len(lines) == 1 and lines[0].startswith("brrrtui: error: ") and "no such file" in lines[0]
    bad = tmp_path / f"evil{OSC_TITLE}.brrr"
    bad.write_bytes(b"SQLite format 3\x00" + b"\xff" * 200)
    proc = run_brrrtui("report", str(bad), timeout=60)
    assert proc.returncode == 2 and os.fspath(bad) not in proc.stderr
    assert_no_control(proc.stderr.rstrip("\n")) and len(proc.stderr.splitlines()) == 1


def test_the_scripts_last_lines_printed_after_the_ui_carry_no_control_sequences(capsys):
    from brrrtui import cli

    cli._print_output_tail([("stdout", "\x1b]0;owned\x07title"), ("stderr", "\x1b[2Jwiped \x1b]52;c;SGVsbG8=\x07")])
    err = capsys.readouterr().err
    assert "\x1b" not in err and "\x07" not in err
    assert err.splitlines()[1:] == ["title", "wiped "]
