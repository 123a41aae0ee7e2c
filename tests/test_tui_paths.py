"""Paths in the TUI: readable (`examples/train_gpt.py:43`, `transformers/activations.py:66`), cut in the middle of
their folders when a pane is narrow (the file name and line are kept; the line number is never cut), and
terminal hyperlinks (OSC 8) to `file://HOST/ABS/PATH` of the file on this machine; `BRRRTUI_LINKS=0` turns the
links off. The SVG snapshots do not carry links, so these tests read the rendered segments' link styles and
the escape sequences the screen's lines render to."""

from __future__ import annotations

import os
import re
import socket

import pytest
from textual.widgets import OptionList, Static
from tui_fakes import ROOT, analysed, h200_recording, run_async

from brrrtui.present.paths import Location, file_uri, fit_location, fit_parts, locations_in
from brrrtui.tui.app import make_app
from brrrtui.tui.screens.modules import ModuleScreen
from brrrtui.tui.widgets.hot_lines import HotLines

TRAIN_GPT = os.path.join(ROOT, "examples", "train_gpt.py")
HF_GPT2 = os.path.join(ROOT, "validation", "workloads", "hf_gpt2.py")


def uri(path: str) -> str:
    return file_uri(path, socket.gethostname())


# ---------------------------------------------------------------------------------------------- cutting


def test_a_location_loses_the_middle_of_its_folders_first_then_the_folders_then_the_name_start():
    p = "validation/workloads/hf_gpt2.py"
    assert fit_location(p, 32, 40) == "validation/workloads/hf_gpt2.py:32"
    assert fit_location(p, 32, 30) == "…/workloads/hf_gpt2.py:32"
    assert fit_location(p, 32, 20) == "…/hf_gpt2.py:32"
    assert fit_location(p, 32, 13) == "hf_gpt2.py:32"
    assert fit_location(p, 32, 10) == "…pt2.py:32"
    assert fit_location("/tmp/a/b/c/deep/train.py", 4, 25) == "/tmp/…/c/deep/train.py:4"
    assert fit_location("/tmp/a/b/c/deep/train.py", 4, 15) == "/…/train.py:4"
    assert fit_location("transformers/models/gpt2/modeling_gpt2.py", 697, 30) == "…/gpt2/modeling_gpt2.py:697"


@pytest.mark.parametrize("path,line", [("validation/workloads/hf_gpt2.py", 32), ("/a/bb/ccc/dddd/x.py", 12345),
                                       ("train.py", 7), ("/x.py", 1), ("a/b.py", None)])  # fmt: skip
def test_the_line_number_is_never_cut_and_the_width_is_kept(path, line):
    tail = f":{line}" if line is not None else ""
    for width in range(60):
        s = fit_location(path, line, width)
        assert s.endswith(tail) and len(s) <= max(width, len("…" + tail)), (width, s)
        if len(path + tail) <= width:
            assert s == path + tail


def test_a_row_cuts_its_location_to_the_room_after_what_comes_before_it():
    loc = Location("validation/workloads/hf_gpt2.py", 32, "/x/validation/workloads/hf_gpt2.py")
    parts = fit_parts(["55.2 ms M ", loc, " loss_of"], 30)
    assert parts[0] == "55.2 ms M " and parts[1] == "…/hf_gpt2.py:32" and parts[2] == " loss_of"
    assert isinstance(parts[1], Location) and parts[1].target == loc.target


def test_the_link_target_is_a_quoted_file_uri_with_the_host():
    assert file_uri("/tmp/a b/é;x.py", "box") == "file://box/tmp/a%20b/%C3%A9%3Bx.py"
    assert "\x1b" not in file_uri("/tmp/\x1b]8;;evil\x07.py", "box")  # a crafted path cannot end the sequence


def test_paths_in_a_message_become_locations():
    parts = locations_in(
        "3 kernels on /r/v/hf_gpt2.py:32 (M=8) and /r/c.py.", lambda f, n: Location(f[3:], n, f)
    )
    assert parts == ["3 kernels on ", "v/hf_gpt2.py:32", " (M=8) and ", "c.py", "."]
    assert [p.target for p in parts if isinstance(p, Location)] == ["/r/v/hf_gpt2.py", "/r/c.py"]


# ---------------------------------------------------------------------------------------------- on screen


def screen_lines(app) -> list[str]:
    return ["".join(s.text for s in strip) for strip in app.screen._compositor.render_strips()]


def screen_links(app) -> dict[str, set[str]]:
    """Link target -> the texts that carry it, over every segment on screen."""
    out: dict[str, set[str]] = {}
    for strip in app.screen._compositor.render_strips():
        for seg in strip:
            if seg.style is not None and seg.style.link:
                out.setdefault(seg.style.link, set()).add(seg.text)
    return out


def screen_ansi(app) -> str:
    return "\n".join(strip.render(app.console) for strip in app.screen._compositor.render_strips())


@pytest.fixture
def gpt_small(tmp_path, monkeypatch):
    monkeypatch.chdir(ROOT)
    return h200_recording("h200_gpt_small", tmp_path)


@pytest.mark.parametrize("width", [80, 60])
@run_async
async def test_hot_lines_and_the_source_title_keep_file_and_line_and_link_the_file(gpt_small, width):
    app = make_app(gpt_small, None, None)
    async with app.run_test(size=(width, 24)) as pilot:
        await analysed(pilot)
        await pilot.pause()
        hot = app.screen.query_one(HotLines)
        rows = ["".join(s.text for s in hot.render_line(y)) for y in range(3)]
        for row, line in zip(rows, (43, 180, 101), strict=True):
            assert re.search(rf"(^|[ /])train_gpt\.py:{line}\b", row), rows  # whole, never `train_gpt.p…`
        assert "… " not in rows[0] and "train_gpt.py:43" in str(app.main.source.border_title)
        links = screen_links(app)
        assert set(links) == {uri(TRAIN_GPT)}, links  # hot lines, the source title: all the same file
        assert any(t.endswith("train_gpt.py:43") for t in links[uri(TRAIN_GPT)])
        ansi = screen_ansi(app)
        osc8 = re.findall(r"\x1b\]8;id=[^;]*;([^\x1b]*)\x1b\\", ansi)
        assert osc8 and set(osc8) - {""} == {uri(TRAIN_GPT)}  # Textual writes them as OSC 8 hyperlinks


@run_async
async def test_brrrtui_links_0_turns_the_links_off(gpt_small, monkeypatch):
    monkeypatch.setenv("BRRRTUI_LINKS", "0")
    app = make_app(gpt_small, None, None)
    async with app.run_test(size=(80, 24)) as pilot:
        await analysed(pilot)
        await pilot.pause()
        assert screen_links(app) == {}
        assert "\x1b]8;" not in screen_ansi(app)
        assert any("train_gpt.py:180" in line for line in screen_lines(app))  # the text stays


@pytest.fixture
def hf_gpt2(tmp_path, monkeypatch):
    monkeypatch.chdir(ROOT)
    return h200_recording("h200_hf_gpt2_modules", tmp_path)


@run_async
async def test_a_findings_message_names_its_line_readably_and_links_it(hf_gpt2):
    """The recording holds the GPU box's path (/work/main/.snap/validation/...); on screen it is the file of
    this checkout, relative to the current folder, and opens it."""
    app = make_app(hf_gpt2, None, None)
    async with app.run_test(size=(120, 36)) as pilot:
        await analysed(pilot)
        await pilot.press("n")
        await pilot.pause()
        body = str(app.screen.query_one("#details-body", Static).render())
        assert "validation/workloads/hf_gpt2.py:32" in body and ".snap" not in body
        assert any("hf_gpt2.py:32" in t for t in screen_links(app).get(uri(HF_GPT2), ())), screen_links(app)


@run_async
async def test_drill_rows_keep_the_file_and_line_in_a_narrow_details_pane(hf_gpt2):
    app = make_app(hf_gpt2, None, None)
    async with app.run_test(size=(60, 24)) as pilot:
        await analysed(pilot)
        await pilot.pause()
        drill = app.screen.query_one("#details-children", OptionList)
        rows = ["".join(s.text for s in drill.render_line(y)) for y in range(drill.size.height)]
        line_rows = [r for r in rows if r.startswith("line ")]  # the selected kernel's line
        assert line_rows and all(re.search(r"\.py:\d+\b", r) for r in line_rows), rows


@run_async
async def test_the_module_trees_library_and_calling_lines_are_readable_and_link_what_is_here(hf_gpt2):
    app = make_app(hf_gpt2, None, None)
    async with app.run_test(size=(140, 44)) as pilot:
        await analysed(pilot)
        await pilot.press("M", "down", "down", "down")
        await pilot.pause()
        assert isinstance(app.screen, ModuleScreen)
        text = str(app.screen.query_one("#module-details-body", Static).render())
        assert "library line: transformers/activations.py:66" in text  # the package's path, not site-packages
        assert "called from: validation/workloads/hf_gpt2.py:32" in text
        assert uri(HF_GPT2) in screen_links(app)  # transformers is not installed here: no link for it
