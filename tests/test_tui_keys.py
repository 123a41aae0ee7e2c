"""Pilot tests: drive the app by keys (no mouse) and assert on what changed."""

import pytest
from textual.widgets import OptionList
from tui_fakes import analysed, fake_analyze, resnet_copy, run_async, write_recording

from brrrtui.tui.app import make_app
from brrrtui.tui.screens.confirm_quit import ConfirmQuit
from brrrtui.tui.screens.help import HelpScreen, key_label
from brrrtui.tui.screens.main import MainScreen
from brrrtui.tui.screens.search import SearchScreen
from brrrtui.tui.widgets.source_view import SourceView
from brrrtui.tui.widgets.timeline import Timeline

SIZE = (120, 40)


@pytest.fixture
def resnet(tmp_path, monkeypatch):
    path = resnet_copy(tmp_path)
    monkeypatch.chdir(tmp_path)
    return make_app(path, None, None, analyze=fake_analyze)


@run_async
async def test_tab_moves_between_panes_and_shift_tab_back(resnet):
    async with resnet.run_test(size=SIZE) as pilot:
        await analysed(pilot)
        main = resnet.main
        seen = [main.focused_pane()]
        for _ in range(4):
            await pilot.press("tab")
            seen.append(main.focused_pane())
        assert seen == ["timeline", "source", "hot", "details", "log"]
        await pilot.press("shift+tab")
        assert main.focused_pane() == "details"


@run_async
async def test_zoom_in_out_and_fit(resnet):
    async with resnet.run_test(size=SIZE) as pilot:
        await analysed(pilot)
        tl = resnet.main.timeline
        assert tl.view.zoom == pytest.approx(1)
        await pilot.press("plus", "plus", "plus")
        assert tl.view.zoom == pytest.approx(8)
        await pilot.press("minus")
        assert tl.view.zoom == pytest.approx(4)
        await pilot.press("0")
        assert tl.view.zoom == pytest.approx(1)


@run_async
async def test_cursor_keys_move_select_and_pan_at_the_edge(resnet):
    async with resnet.run_test(size=SIZE) as pilot:
        await analysed(pilot)
        tl = resnet.main.timeline
        await pilot.press(*["plus"] * 6)
        t0, col = tl.view.t0, tl.view.cursor
        await pilot.press("l", "l")
        assert tl.view.cursor == col + 2 and tl.view.t0 == t0
        await pilot.press(*["right"] * (tl.view.width - tl.view.cursor + 3))
        assert tl.view.cursor == tl.view.width - 1 and tl.view.t0 > t0  # the view panned
        before = tl.view.t0
        await pilot.press("shift+left")
        assert tl.view.t0 == pytest.approx(before - tl.view.span / 2)
        await pilot.press("h")
        assert tl.view.cursor == tl.view.width - 2


@run_async
async def test_brackets_step_through_kernels_and_gaps_and_details_follow(resnet):
    async with resnet.run_test(size=SIZE) as pilot:
        await analysed(pilot)
        tl, details = resnet.main.timeline, resnet.main.details
        await pilot.press("home")
        starts, kinds = [], []
        for _ in range(6):
            await pilot.press("right_square_bracket")
            starts.append(tl.selection.start)
            kinds.append(tl.selection.kind)
            assert details.node.kind == tl.selection.kind and details.node.key == (tl.selection.row,)
        assert starts == sorted(starts) and len(set(starts)) == 6
        assert {"kernel", "gap"} <= set(kinds)
        await pilot.press("left_square_bracket")
        assert tl.selection.start == starts[-2]


@run_async
async def test_lanes_up_down(resnet):
    async with resnet.run_test(size=SIZE) as pilot:
        await analysed(pilot)
        tl = resnet.main.timeline
        await pilot.press("j", "j")
        assert tl.lane == 2
        await pilot.press("down")
        assert tl.lane == 2  # last lane
        await pilot.press("k")
        assert tl.lane == 1


@run_async
async def test_enter_drills_down_and_escape_climbs_back(resnet):
    async with resnet.run_test(size=SIZE) as pilot:
        await analysed(pilot)
        main = resnet.main
        await pilot.press("tab")  # source: the cursor sits on the hottest line
        await pilot.press("enter")
        assert [n.kind for n in main.details.stack] == ["summary", "line"]
        assert main.focused_pane() == "details"
        await pilot.press("enter")  # first child of a line: its heaviest op
        assert main.details.node.kind == "op"
        await pilot.press("enter")  # the op's kernels
        assert main.details.node.kind == "kname"
        await pilot.press("enter")  # one kernel
        assert main.details.node.kind == "kernel"
        await pilot.press("escape", "escape")
        assert main.details.node.kind == "op"
        await pilot.press("escape", "escape")
        assert [n.kind for n in main.details.stack] == ["summary"]
        await pilot.press("escape")
        assert main.focused_pane() == "source"  # Esc at the top gives focus back
        assert [n.kind for n in main.details.stack] == ["summary", "line"]  # and details follow that pane


@run_async
async def test_g_goes_from_a_kernel_to_its_line_and_back(resnet):
    async with resnet.run_test(size=SIZE) as pilot:
        await analysed(pilot)
        main = resnet.main
        tl, src = main.timeline, main.source
        await pilot.press("plus", "plus", "right_square_bracket", "right_square_bracket")
        while tl.selection.kind != "kernel":
            await pilot.press("right_square_bracket")
        row = tl.selection.row
        await pilot.press("g")
        assert main.focused_pane() == "source"
        assert src.current_lineno() == 12
        await pilot.press("g")
        assert main.focused_pane() == "timeline"
        assert tl.selection.row == row


@run_async
async def test_search_jumps_to_a_kernel(resnet):
    async with resnet.run_test(size=SIZE) as pilot:
        await analysed(pilot)
        await pilot.press("slash")
        assert isinstance(resnet.screen, SearchScreen)
        await pilot.press(*"collect_statistics")
        await pilot.press("enter")
        assert isinstance(resnet.screen, MainScreen)
        tl = resnet.main.timeline
        assert "collect_statistics" in resnet.main.snapshot.kernel_name(tl.selection.row)
        assert resnet.main.focused_pane() == "timeline"
        await pilot.press("enter")  # the timeline's Drill: that kernel, in the focused details pane
        assert resnet.main.details.node == tl.selection_node()
        assert resnet.main.focused_pane() == "details"


@run_async
async def test_n_and_shift_n_cycle_findings(resnet):
    async with resnet.run_test(size=SIZE) as pilot:
        await analysed(pilot)
        d = resnet.main.details
        await pilot.press("n")
        assert d.node.kind == "finding" and d.node.key == (0,)
        await pilot.press("n")
        assert d.node.key == (1,)
        await pilot.press("N")
        assert d.node.key == (0,)
        f = resnet.main.snapshot.findings[0]
        assert resnet.main.timeline.selection.row == f.kernels[0]


@run_async
async def test_pause_toggles(resnet):
    async with resnet.run_test(size=SIZE) as pilot:
        await analysed(pilot)
        await pilot.press("p")
        assert resnet.state.paused
        assert "PAUSED" in str(resnet.main.query_one("#status").render())
        await pilot.press("p")
        assert not resnet.state.paused


@run_async
async def test_help_lists_every_key_and_closes(resnet):
    async with resnet.run_test(size=SIZE) as pilot:
        await analysed(pilot)
        await pilot.press("question_mark")
        assert isinstance(resnet.screen, HelpScreen)
        text = resnet.screen.text()
        for cls in (type(resnet), MainScreen, Timeline, SourceView):
            for b in cls.BINDINGS:
                assert key_label(b.key) in text, b
        for word in ("tab", "esc", "enter"):
            assert word in text
        await pilot.press("escape")
        assert isinstance(resnet.screen, MainScreen)


@run_async
async def test_q_quits_at_once_when_nothing_runs(resnet):
    async with resnet.run_test(size=SIZE) as pilot:
        await analysed(pilot)
        await pilot.press("q")
        await pilot.pause()
        assert resnet._exit  # the app is exiting


@run_async
async def test_source_keys_move_the_cursor_and_jump_between_hot_lines(tmp_path, monkeypatch):
    path = write_recording(str(tmp_path / "run.brrr"), windows=1)
    monkeypatch.chdir(tmp_path)
    app = make_app(path, None, None, analyze=fake_analyze)
    async with app.run_test(size=SIZE) as pilot:
        await analysed(pilot)
        src = app.main.source
        await pilot.press("tab")
        assert src.current_lineno() == 4  # the hottest line (the matmul)
        await pilot.press("right_square_bracket")
        assert src.current_lineno() == 5
        await pilot.press("down", "down")
        assert src.current_lineno() == 7
        await pilot.press("left_square_bracket")
        assert src.current_lineno() == 6
        await pilot.press("home")
        assert src.current_lineno() == 1
        # the hot-lines list drives the source view
        hot = app.main.snapshot.hot_lines
        await pilot.press("tab", "home")
        assert src.current_lineno() == hot[0].line.line
        await pilot.press("down")
        assert src.current_lineno() == hot[1].line.line != hot[0].line.line


@run_async
async def test_windows_switch_with_comma_and_full_stop(tmp_path):
    path = write_recording(str(tmp_path / "run.brrr"), windows=3)
    app = make_app(path, None, None, analyze=fake_analyze)
    async with app.run_test(size=SIZE) as pilot:
        await analysed(pilot)
        tl = app.main.timeline
        assert tl.window == 2  # view mode opens on the latest window as well
        await pilot.press("comma", "comma")
        assert tl.window == 0
        await pilot.press("comma")
        assert tl.window == 0
        await pilot.press("full_stop")
        assert tl.window == 1
        assert "window 2/3" in str(tl.border_title)


@run_async
async def test_details_enter_on_summary_child(resnet):
    async with resnet.run_test(size=SIZE) as pilot:
        await analysed(pilot)
        main = resnet.main
        main.show_summary()
        await pilot.pause()
        main.details.query_one(OptionList).focus()
        await pilot.press("enter")
        assert main.details.node.kind == "finding"
        assert len(main.details.stack) == 2


@run_async
async def test_quit_asks_while_the_script_runs(tmp_path):
    from brrrtui.record.feed import Feed

    path = write_recording(str(tmp_path / "run.brrr"), windows=1)
    stopped = []
    app = make_app(
        path, Feed(), "train.py", on_quit_confirm=lambda: stopped.append(True), analyze=fake_analyze
    )
    async with app.run_test(size=SIZE) as pilot:
        await analysed(pilot)
        await pilot.press("q")
        assert isinstance(app.screen, ConfirmQuit)
        await pilot.press("n")
        assert isinstance(app.screen, MainScreen) and not stopped and not app._exit
        await pilot.press("q", "y")
        await pilot.pause()
        assert stopped == [True] and app._exit


@run_async
async def test_mouse_click_moves_the_timeline_cursor_and_the_source_cursor(resnet):
    from brrrtui.tui.widgets.timeline import LABEL_W

    async with resnet.run_test(size=SIZE) as pilot:
        await analysed(pilot)
        tl, src = resnet.main.timeline, resnet.main.source
        await pilot.click(Timeline, offset=(1 + LABEL_W + 5, 1 + 2))  # inside the border: lane 2, column 5
        assert (tl.lane, tl.view.cursor) == (2, 5)
        await pilot.click(SourceView, offset=(20, 1 + 3))
        assert src.current_lineno() == src.rows[int(src.scroll_y) + 3].lineno
        assert resnet.main.focused_pane() == "source"


@run_async
async def test_source_view_shows_a_new_files_line_when_the_layout_comes_late(resnet, tmp_path):
    """Told to show line 300 of a long file while showing a file short enough for no scrollbar, the view has
    the line in view once the app settles, even where its after-refresh retry runs before the layout pass that
    turns scrolling on (as on a loaded CI machine, which caught the view stuck at line 1)."""
    from brrrtui.contract.model import SourceLine

    (tmp_path / "short.py").write_text("a = 1\n")
    (tmp_path / "long.py").write_text("".join(f"x{k} = {k}\n" for k in range(400)))
    async with resnet.run_test(size=SIZE) as pilot:
        await analysed(pilot)
        src = resnet.main.source
        src.show_line(SourceLine("short.py", 1, ""), notify=False)
        await pilot.pause()
        assert not src.show_vertical_scrollbar
        later = src.call_after_refresh
        early = [True]

        def racing(callback, *args):  # the first retry runs at once, before any layout
            if early.pop() if early else False:
                callback(*args)
                return True
            return later(callback, *args)

        src.call_after_refresh = racing
        src.show_line(SourceLine("long.py", 300, ""), notify=False)
        assert not early and src.current_lineno() == 300
        await pilot.pause()
        await pilot.pause()
        assert src.scroll_y <= src.cursor < src.scroll_y + src.scrollable_content_region.height
