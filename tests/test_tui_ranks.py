"""The view of a distributed run: `r` picks a rank and the whole view switches to it (timeline, source, hot
lines, details, header). Two hand-made rank recordings and their run file, as `brrrtui torchrun` / `spawn`
writes them; rank 1's GEMM has a name of its own, so the screens tell the ranks apart."""

import dataclasses
import os

import pytest
from tui_fakes import analysed, run_async, write_recording

from brrrtui.present.ranks_report import rank_choices
from brrrtui.present.status import status_spans
from brrrtui.recording.store import RecordingWriter, load_recording, write_trace
from brrrtui.tui.app import make_app
from brrrtui.tui.screens.help import HelpScreen
from brrrtui.tui.screens.ranks import RankPicker

SIZE = (140, 36)
RANK1_GEMM = "rank1_only_sgemm_128x128_nn"


def write_run(folder: str) -> str:
    """run.brrr and run.rank{0,1}.brrr in `folder`: each rank one window of 40 kernels (tui_fakes)."""
    entries = []
    for r in (0, 1):
        src = os.path.join(folder, f"src{r}.brrr")
        write_recording(src, names={0: RANK1_GEMM} if r else None)
        trace = load_recording(src)
        dist = {"rank": r, "local_rank": r, "world_size": 2, "restart": 0, "run": "run.brrr"}
        write_trace(
            dataclasses.replace(trace, meta={**trace.meta, "dist": dist, "status": "finished"}),  # a finished rank
            os.path.join(folder, f"run.rank{r}.brrr"),
        )
        os.remove(src)
        entries.append({"rank": r, "restart": 0, "file": f"run.rank{r}.brrr", "windows": 1, "steps": 0})
    run = os.path.join(folder, "run.brrr")
    w = RecordingWriter(run)
    w.set_meta(argv=["spawn", "train.py"], status="finished", exit_code=0,
               dist={"launcher": "spawn", "world_size": 2, "ranks": entries})  # fmt: skip
    w.close()
    return run


@pytest.fixture
def run(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    return write_run(str(tmp_path))


def header(app) -> str:
    return "".join(chunk for chunk, _ in status_spans(app.state))


def kernel_names(app) -> set[str]:
    t = app.snapshot.trace
    return {t.strings[i] for i in set(t.gpu.name.tolist())}


def test_the_picker_rows():
    meta = {
        "rank_set": {"run": "run.brrr", "files": {1: "/x/run.rank1.brrr", 0: "/x/run.rank0.brrr"}, "shown": 1}
    }
    assert rank_choices(meta) == (
        [(0, "rank 0 · run.rank0.brrr"), (1, "rank 1 · run.rank1.brrr  (on screen)")],
        1,
    )
    assert rank_choices({}) == ([], None)
    assert rank_choices({"rank_set": {"files": {0: "a"}, "shown": 0}}) == (
        [],
        None,
    )  # one rank: nothing to pick


@run_async
async def test_r_switches_the_whole_view_to_the_rank_picked(run):
    app = make_app(run, None, None)  # the real analysis
    async with app.run_test(size=SIZE) as pilot:
        await analysed(pilot)
        assert "rank 0 of 2" in header(app) and RANK1_GEMM not in kernel_names(app)
        log = "\n".join(strip.text for strip in app.main.log_pane.lines)
        assert "a run of 2 ranks: rank 0 is shown" in log  # what the file itself says comes with the analysis
        await pilot.press("r")
        assert isinstance(app.screen, RankPicker)
        await pilot.press("enter")  # the picker opens on the next rank
        await analysed(pilot, 2)
        assert not isinstance(app.screen, RankPicker)
        assert "rank 1 of 2" in header(app) and RANK1_GEMM in kernel_names(app)
        assert app.snapshot.trace.meta["rank_set"]["shown"] == 1
        assert app.main.timeline.selection is not None  # the timeline was redrawn on rank 1's window
        await pilot.press("r", "escape")  # Esc keeps the rank on screen
        await pilot.pause(0.1)
        assert app.analyses == 2 and "rank 1 of 2" in header(app)
        await pilot.press("r", "down", "enter")  # the picker opens on rank 0; down: rank 1, shown already
        await pilot.pause(0.1)
        assert app.analyses == 2
        await pilot.press("r", "enter")  # Enter alone: rank 0
        await analysed(pilot, 3)
        assert "rank 0 of 2" in header(app) and RANK1_GEMM not in kernel_names(app)


@run_async
async def test_r_on_a_single_process_recording_says_so(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    app = make_app(write_recording(str(tmp_path / "one.brrr")), None, None)
    async with app.run_test(size=SIZE) as pilot:
        await analysed(pilot)
        await pilot.press("r")
        await pilot.pause(0.1)
        assert not isinstance(app.screen, RankPicker)
        assert any("One rank only" in str(n.message) for n in app._notifications)
        await pilot.press("question_mark")
        assert isinstance(app.screen, HelpScreen)
        assert "everywhere: r — Rank shown (a distributed run)" in app.screen.text()


def test_rank_picker_140x36(snap_compare, run):
    async def run_before(pilot):
        await analysed(pilot)
        await pilot.press("r")
        await pilot.pause()

    assert snap_compare(make_app(run, None, None), terminal_size=SIZE, run_before=run_before)
