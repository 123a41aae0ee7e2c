"""Snapshot tests (pytest-textual-snapshot) of the main screens, on the real analysis of recorded fixtures.

- the one-step resnet50 H200 torch.profiler trace (tests/fixtures/resnet50_h200_tui.json.gz), copied with its
  script into a temporary folder that becomes the cwd, so paths read `resnet_train.py:12` in every run;
- brrrtui's own H200 recordings (tests/fixtures/h200_*.brrr.gz), viewed from the repository root, where their
  scripts (examples/, validation/) live.

Fixed terminal sizes, no animation, no blinking cursor. The verdicts come from `analyzers.analyze`, so a
deliberate change there changes these pictures too: regenerate with
`pytest tests/test_tui_snapshots.py --snapshot-update` and look at the SVGs before committing them.
"""

import os

import pytest
from tui_fakes import (
    ROOT,
    analysed,
    fake_analyze,
    h200_recording,
    resnet_copy,
    wait_until,
    write_phased_recording,
    write_recording,
)

from brrrtui.record.feed import Feed, LogLine, StepsAdded, TelemetrySample
from brrrtui.tui.app import make_app
from brrrtui.tui.widgets.source_view import SourceView


@pytest.fixture
def resnet(tmp_path, monkeypatch):
    path = resnet_copy(tmp_path)
    monkeypatch.chdir(tmp_path)
    return os.path.basename(path)


async def ready(pilot):
    """Analysed, and the source view has centred its cursor line: it does so after a layout pass, which on a
    loaded machine can come after the first pause (a CI run caught the view still at line 1)."""
    await analysed(pilot)
    await wait_until(pilot, lambda: all(v.size.height == 0 or v.scroll_y <= v.cursor < v.scroll_y + v.size.height
                                        for v in pilot.app.screen.query(SourceView)))  # fmt: skip


def test_main_200x60(snap_compare, resnet):
    assert snap_compare(make_app(resnet, None, None), terminal_size=(200, 60), run_before=ready)


def test_main_80x24(snap_compare, resnet):
    assert snap_compare(make_app(resnet, None, None), terminal_size=(80, 24), run_before=ready)


def test_zoomed_on_a_gap_120x40(snap_compare, resnet):
    async def run_before(pilot):
        await ready(pilot)
        await pilot.press(*["plus"] * 6)
        tl = pilot.app.main.timeline
        while tl.selection is None or tl.selection.kind != "gap":
            await pilot.press("right_square_bracket")

    app = make_app(resnet, None, None)
    assert snap_compare(app, terminal_size=(120, 40), run_before=run_before)


def test_drill_line_to_op_120x40(snap_compare, resnet):
    async def run_before(pilot):
        await ready(pilot)
        await pilot.press("tab", "enter", "enter")
        await pilot.wait_for_scheduled_animations()
        await pilot.pause()  # let the drill-down's messages settle, also on a loaded machine

    app = make_app(resnet, None, None)
    assert snap_compare(app, terminal_size=(120, 40), run_before=run_before)


def test_help_100x40(snap_compare, resnet):
    app = make_app(resnet, None, None)
    assert snap_compare(app, terminal_size=(100, 40), run_before=ready, press=["question_mark"])


def test_no_color_120x36(snap_compare, resnet, monkeypatch):
    monkeypatch.setenv("NO_COLOR", "1")
    app = make_app(resnet, None, None)
    assert app.no_color
    assert snap_compare(app, terminal_size=(120, 36), run_before=ready)


def test_missing_source_file_100x30(snap_compare, resnet):
    os.remove("resnet_train.py")
    app = make_app(resnet, None, None)
    assert snap_compare(app, terminal_size=(100, 30), run_before=ready)


def test_live_running_120x36(snap_compare, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    path = write_recording(str(tmp_path / "run.brrr"), windows=2)
    feed = Feed()
    feed.put(StepsAdded(last_step=41, count=2))
    for k in range(30):
        feed.put(TelemetrySample(k, 40.0 + 2 * k, 3.0e10 + 1e9 * k, 300.0 + 10 * k, 1980.0))
    for k in range(12):
        feed.put(LogLine("stdout" if k % 4 else "stderr", f"step {k} loss {1 / (k + 1):.3f}"))
    app = make_app(os.path.basename(path), feed, "train.py --lr 3e-4", analyze=fake_analyze, poll_s=0.02,
                   clock=lambda: 0.0)  # fmt: skip

    async def run_before(pilot):
        await analysed(pilot)
        await wait_until(pilot, lambda: pilot.app.main.log_pane.lines_written >= 12)

    assert snap_compare(app, terminal_size=(120, 36), run_before=run_before)


def test_setup_page_120x36(snap_compare, tmp_path, monkeypatch):
    """A run with set-up, warm-up and steady windows, `P` pressed twice: the set-up's own window and lines."""
    monkeypatch.chdir(tmp_path)
    path = write_phased_recording(str(tmp_path / "run.brrr"))
    app = make_app(os.path.basename(path), None, None, analyze=fake_analyze)

    async def run_before(pilot):
        await ready(pilot)
        for k in (2, 3):
            await pilot.press("P")
            await analysed(pilot, k)
        await ready(pilot)

    assert snap_compare(app, terminal_size=(120, 36), run_before=run_before)


@pytest.fixture
def at_root(monkeypatch):
    monkeypatch.chdir(ROOT)


def test_h200_known_regimes_200x60(snap_compare, tmp_path, at_root):
    app = make_app(h200_recording("h200_known_regimes", tmp_path), None, None)
    assert snap_compare(app, terminal_size=(200, 60), run_before=ready)


def test_h200_gpt_small_80x24(snap_compare, tmp_path, at_root):
    app = make_app(h200_recording("h200_gpt_small", tmp_path), None, None)
    assert snap_compare(app, terminal_size=(80, 24), run_before=ready)


def test_h200_gpt_small_60x24(snap_compare, tmp_path, at_root):
    """60 columns: the hot lines keep each line's file name and line (`…/train_gpt.py:43`), dropping their
    figures first; the source title cuts the folders, not the line number."""
    app = make_app(h200_recording("h200_gpt_small", tmp_path), None, None)
    assert snap_compare(app, terminal_size=(60, 24), run_before=ready)


def test_h200_bert_line_ops_160x48(snap_compare, tmp_path, at_root):
    async def run_before(pilot):
        await ready(pilot)
        await pilot.press("tab", "enter", "enter")
        await pilot.wait_for_scheduled_animations()
        await pilot.pause()  # let the drill-down's messages settle, also on a loaded machine

    app = make_app(h200_recording("h200_bert", tmp_path), None, None)
    assert snap_compare(app, terminal_size=(160, 48), run_before=run_before)


def test_h200_known_regimes_next_finding_140x40(snap_compare, tmp_path, at_root):
    app = make_app(h200_recording("h200_known_regimes", tmp_path), None, None)
    assert snap_compare(app, terminal_size=(140, 40), run_before=ready, press=["n"])


def test_search_finds_operators_120x40(snap_compare, resnet):
    """`/relu`: the kernel, and the operators the CPU lanes show (forward and backward)."""

    async def run_before(pilot):
        await ready(pilot)
        await pilot.press("slash", *"relu")
        await pilot.pause()

    assert snap_compare(make_app(resnet, None, None), terminal_size=(120, 40), run_before=run_before)


def test_finding_read_down_80x24(snap_compare, resnet):
    """At 80x24 a finding's text is taller than the details pane: six rows down it, with a scroll bar."""

    async def run_before(pilot):
        await ready(pilot)
        await pilot.press("n", *["down"] * 6)
        await pilot.pause()

    assert snap_compare(make_app(resnet, None, None), terminal_size=(80, 24), run_before=run_before)
