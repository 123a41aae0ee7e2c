"""`/` search by key: kernel names, the operators the timeline's CPU lanes show, source lines with figures and
any other source text; Enter jumps the selection to the chosen result and n / N step through the results (a
kernel or operator result: its next / previous call); Esc at the top gives n / N back to the findings."""

import pytest
from tui_fakes import analysed, fake_analyze, resnet_copy, run_async

from brrrtui.tui.app import make_app
from brrrtui.tui.screens.main import MainScreen
from brrrtui.tui.screens.search import SearchScreen

SIZE = (120, 40)


@pytest.fixture
def resnet(tmp_path, monkeypatch):
    path = resnet_copy(tmp_path)
    monkeypatch.chdir(tmp_path)
    return make_app(path, None, None, analyze=fake_analyze)


def selected(app) -> tuple[str, str, float]:
    """(kind, name, start on the page) of the timeline's selection."""
    snap, sel = app.main.snapshot, app.main.timeline.selection
    table = snap.trace.gpu if sel.kind == "kernel" else snap.trace.ops
    return sel.kind, snap.trace.name(int(table.name[sel.row])), sel.start


async def search_for(pilot, text: str) -> None:
    await pilot.press("slash")
    assert isinstance(pilot.app.screen, SearchScreen)
    await pilot.press(*text, "enter")
    assert isinstance(pilot.app.screen, MainScreen)


@run_async
async def test_an_operator_of_the_cpu_lanes_is_found_and_n_steps_through_its_calls(resnet):
    async with resnet.run_test(size=SIZE) as pilot:
        await analysed(pilot)
        await search_for(pilot, "aten::add_")
        kind, name, first = selected(resnet)
        assert (kind, name) == ("op", "aten::add_")
        assert resnet.main.focused_pane() == "timeline"
        await pilot.press("n")  # one result: its next call
        kind, name, second = selected(resnet)
        assert (kind, name) == ("op", "aten::add_") and second > first
        await pilot.press("N")
        assert selected(resnet) == ("op", "aten::add_", first)


@run_async
async def test_n_and_shift_n_step_through_the_results_and_esc_gives_them_back_to_the_findings(resnet):
    async with resnet.run_test(size=SIZE) as pilot:
        await analysed(pilot)
        await search_for(pilot, "conv")
        found = resnet.main.found
        # one kernel, aten::conv2d, its backward
        assert [h.kind for h in found.hits] == ["kernel", "op", "op"]
        kind, name, _ = selected(resnet)
        assert kind == "kernel" and name == found.hits[0].key
        await pilot.press("n")
        assert selected(resnet)[:2] == ("op", "aten::conv2d")
        await pilot.press("n")
        assert selected(resnet)[:2] == ("op", found.hits[2].key)
        await pilot.press("n")  # wraps around
        assert selected(resnet)[:2] == ("kernel", found.hits[0].key)
        await pilot.press("N")
        assert selected(resnet)[:2] == ("op", found.hits[2].key)
        await pilot.press("escape", "escape")  # the details back to the summary, then the search is cleared
        assert resnet.main.found is None
        await pilot.press("n")
        assert resnet.main.details.node.kind == "finding"


@run_async
async def test_source_text_without_figures_is_found_and_the_search_reopens_with_its_query(resnet):
    async with resnet.run_test(size=SIZE) as pilot:
        await analysed(pilot)
        await search_for(pilot, "import")  # line 1 of resnet_train.py: no GPU time, no figures
        main = resnet.main
        assert main.focused_pane() == "source" and main.source.current_lineno() == 1
        await search_for(pilot, "")  # the input opens holding "import": Enter jumps again
        assert main.found is not None and main.found.query == "import"
        await pilot.press("slash", *["backspace"] * 6, "enter")  # an empty query clears the search
        assert main.found is None
