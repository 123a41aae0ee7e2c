"""The TUI leads with the steady state; the phase key shows set-up and warm-up, each on its own windows."""

import pytest
from tui_fakes import (
    PHASED_STEPS,
    analysed,
    append_phased,
    fake_analyze,
    resnet_copy,
    run_async,
    wait_until,
    write_phased_recording,
)

from analyzers.phases.run_phases import Phase
from brrrtui.present.selection import SUMMARY
from brrrtui.present.status import PhaseView, phase_hint, phase_text, status_spans
from brrrtui.record.feed import Feed, WindowAdded
from brrrtui.tui.app import make_app
from brrrtui.tui.screens.help import HelpScreen

SIZE = (160, 40)


def header(app) -> str:
    return "".join(chunk for chunk, _ in status_spans(app.state))


def test_the_header_names_the_phase_and_how_to_see_the_others():
    both = ((Phase.STEADY, 2), (Phase.WARMUP, 1), (Phase.SETUP, 1))
    steady = PhaseView(Phase.STEADY, both, 200, 6, 58e6)
    assert phase_text(steady) == "steady state · from step 6 of 200 · 58 ms/step"
    assert phase_hint(steady) == "P for warm-up, set-up"
    warm = PhaseView(Phase.WARMUP, ((Phase.WARMUP, 2),), 9, None, None)
    assert phase_text(warm) == "warm-up only — no steady-state window" and phase_hint(warm) == ""
    setup = PhaseView(Phase.SETUP, both, 200, 6, 58e6, picked=True, new=((Phase.STEADY, 1),))
    assert phase_text(setup) == "set-up (before the first step)"
    assert phase_hint(setup) == "P for steady (1 new), warm-up"
    assert (
        phase_text(PhaseView(Phase.UNKNOWN, (), 0, None, None)) == "no optimizer steps: every window analysed"
    )


@pytest.fixture
def phased(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    return write_phased_recording(str(tmp_path / "run.brrr"))


@run_async
async def test_phase_key_cycles_steady_warmup_setup_and_redraws_every_pane(phased, monkeypatch):
    from brrrtui.recording import load

    loads = []
    real = load.load_trace
    monkeypatch.setattr(load, "load_trace", lambda p: loads.append(p) or real(p))
    app = make_app(phased, None, None)  # the real analysis: it picks the windows
    async with app.run_test(size=SIZE) as pilot:
        await analysed(pilot)
        main = app.main
        a = app.snapshot.analysis
        assert (a.phase, a.windows) == (Phase.STEADY, (2,))
        text = header(app)
        assert "steady state · from step 3 of 40 · 5 ms/step" in text
        assert "5 ms/step  P for warm-up, set-up" in text and "windows 3" in text
        assert main.timeline.window == 2 and "steady window 1/1 · step 20" in main.timeline.border_title

        await pilot.press("P")
        await analysed(pilot, 2)
        a = app.snapshot.analysis
        assert (a.phase, a.windows) == (Phase.WARMUP, (1,))
        assert "warm-up (before step 3 of 40)  P for steady, set-up" in header(app)
        assert main.timeline.window == 1 and "warm-up window 1/1 · step 1" in main.timeline.border_title

        await pilot.press("P")
        await analysed(pilot, 3)
        a = app.snapshot.analysis
        assert (a.phase, a.windows) == (Phase.SETUP, (0,))
        assert "set-up (before the first step)  P for steady, warm-up" in header(app)
        assert main.timeline.window == 0
        # the source view, the hot lines and the details start over on the set-up's own lines and kernels
        assert main.source.current_lineno() == 4
        assert app.snapshot.hot_lines[0].line.line == 4
        assert main.details.stack == [SUMMARY, main.timeline.selection_node()]
        assert int(app.snapshot.trace.gpu.window[main.timeline.selection.row]) == 0

        await pilot.press("P")  # back to the steady state: the automatic choice again
        await analysed(pilot, 4)
        assert app.snapshot.analysis.phase is Phase.STEADY and app.phases.picked is None
        assert main.source.current_lineno() == 8
    assert len(loads) == 1  # the phase key re-analyses the loaded trace


@run_async
async def test_the_help_lists_the_phase_key(phased):
    app = make_app(phased, None, None, analyze=fake_analyze)
    async with app.run_test(size=SIZE) as pilot:
        await analysed(pilot)
        await pilot.press("question_mark")
        assert isinstance(app.screen, HelpScreen)
        assert "everywhere: P — Phase shown: steady ⇄ warm-up ⇄ set-up" in app.screen.text()


@run_async
async def test_phase_key_says_when_there_is_no_other_phase(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    app = make_app(resnet_copy(tmp_path), None, None, analyze=fake_analyze)
    async with app.run_test(size=SIZE) as pilot:
        await analysed(pilot)
        await pilot.press("P")
        await pilot.pause(0.1)
        assert app.analyses == 1 and app._busy is False
        assert any("No other phase to show" in str(n.message) for n in app._notifications)


async def add_window(pilot, feed, path, window, steps):
    append_phased(path, range(window, window + 1), steps)
    feed.put(WindowAdded(window=window, kernels=1, ops=1))
    count = pilot.app.analyses + 1
    await wait_until(pilot, lambda: pilot.app.analyses >= count)


def log_text(app) -> str:
    return "\n".join(strip.text for strip in app.main.log_pane.lines)


@run_async
async def test_live_moves_to_the_steady_state_by_itself(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    path = write_phased_recording(str(tmp_path / "run.brrr"), windows=1, steps=1)
    feed = Feed()
    app = make_app(path, feed, "train.py", analyze=fake_analyze, poll_s=0.02)
    async with app.run_test(size=SIZE) as pilot:
        await analysed(pilot)
        assert app.snapshot.analysis.phase is Phase.SETUP
        assert "set-up (before the first step)" in header(app)
        await add_window(pilot, feed, path, 1, range(1, 11))
        assert app.snapshot.analysis.phase is Phase.WARMUP
        assert "warm-up only — no steady-state window  P for set-up" in header(app)
        await add_window(pilot, feed, path, 2, range(11, PHASED_STEPS))
        assert app.snapshot.analysis.phase is Phase.STEADY and app.main.timeline.window == 2
        assert "steady state · from step 3 of 40" in header(app)
        assert "now showing steady state · from step 3 of 40 · 5 ms/step (window 2; P cycles" in log_text(app)


@run_async
async def test_live_keeps_a_picked_phase_and_says_what_is_new(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    path = write_phased_recording(str(tmp_path / "run.brrr"), windows=2, steps=11)
    feed = Feed()
    app = make_app(path, feed, "train.py", analyze=fake_analyze, poll_s=0.02)
    async with app.run_test(size=SIZE) as pilot:
        await analysed(pilot)
        assert app.snapshot.analysis.phase is Phase.WARMUP
        await pilot.press("P")
        await analysed(pilot, 2)
        assert app.snapshot.analysis.phase is Phase.SETUP and app.phases.picked is Phase.SETUP
        assert "set-up (before the first step) (picked)  P for warm-up" in header(app)  # live: it stays
        assert "now showing set-up (before the first step) (window 0)" in log_text(app)
        await add_window(pilot, feed, path, 2, range(11, PHASED_STEPS))
        assert app.snapshot.analysis.phase is Phase.SETUP and app.main.timeline.window == 0
        assert "windows 3" in header(app)
        assert "set-up (before the first step) (picked)  P for steady (1 new), warm-up" in header(app)
        assert "the run now has 1 steady window(s); still showing the picked set-up" in log_text(app)
        await pilot.press("P")  # set-up -> steady, the automatic choice: following again
        await analysed(pilot, 4)
        assert app.snapshot.analysis.phase is Phase.STEADY and app.phases.picked is None
