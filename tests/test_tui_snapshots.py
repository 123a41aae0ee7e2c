"""Snapshot tests (pytest-textual-snapshot) of the main screens on the one-step resnet50 H200 fixture.

Fixed terminal sizes, no animation; the fixture and its script are copied into a temporary folder that
becomes the cwd, so paths read `resnet_train.py:12` in every run. Regenerate after a deliberate change with
`pytest tests/test_tui_snapshots.py --snapshot-update` and look at the SVGs before committing them.
"""

import os

import pytest
from tui_fakes import analysed, fake_analyze, resnet_copy, wait_until, write_recording

from brrrtui.app import make_app
from brrrtui.feed import Feed, LogLine, StepsAdded, TelemetrySample


@pytest.fixture
def resnet(tmp_path, monkeypatch):
    path = resnet_copy(tmp_path)
    monkeypatch.chdir(tmp_path)
    return os.path.basename(path)


async def ready(pilot):
    await analysed(pilot)


def test_main_200x60(snap_compare, resnet):
    assert snap_compare(
        make_app(resnet, None, None, analyze=fake_analyze), terminal_size=(200, 60), run_before=ready
    )


def test_main_80x24(snap_compare, resnet):
    assert snap_compare(
        make_app(resnet, None, None, analyze=fake_analyze), terminal_size=(80, 24), run_before=ready
    )


def test_zoomed_on_a_gap_120x40(snap_compare, resnet):
    async def run_before(pilot):
        await ready(pilot)
        await pilot.press(*["plus"] * 6)
        tl = pilot.app.main.timeline
        while tl.selection is None or tl.selection.kind != "gap":
            await pilot.press("right_square_bracket")

    app = make_app(resnet, None, None, analyze=fake_analyze)
    assert snap_compare(app, terminal_size=(120, 40), run_before=run_before)


def test_drill_line_to_op_120x40(snap_compare, resnet):
    async def run_before(pilot):
        await ready(pilot)
        await pilot.press("tab", "enter", "enter")

    app = make_app(resnet, None, None, analyze=fake_analyze)
    assert snap_compare(app, terminal_size=(120, 40), run_before=run_before)


def test_help_100x40(snap_compare, resnet):
    app = make_app(resnet, None, None, analyze=fake_analyze)
    assert snap_compare(app, terminal_size=(100, 40), run_before=ready, press=["question_mark"])


def test_no_color_120x36(snap_compare, resnet, monkeypatch):
    monkeypatch.setenv("NO_COLOR", "1")
    app = make_app(resnet, None, None, analyze=fake_analyze)
    assert app.no_color
    assert snap_compare(app, terminal_size=(120, 36), run_before=ready)


def test_missing_source_file_100x30(snap_compare, resnet):
    os.remove("resnet_train.py")
    app = make_app(resnet, None, None, analyze=fake_analyze)
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
