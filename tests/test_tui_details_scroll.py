"""The details pane is one scrolling document: every row of a node's wrapped text can be brought into view with
the keyboard, at 80x24 and wider (none is cut), and the drill list below it still moves with the arrows."""

import re

import pytest
from textual.widgets import OptionList
from tui_fakes import analysed, resnet_copy, run_async

from brrrtui.present.selection import SUMMARY
from brrrtui.tui.app import make_app


@pytest.fixture
def resnet(tmp_path, monkeypatch):
    path = resnet_copy(tmp_path)
    monkeypatch.chdir(tmp_path)
    return make_app(path, None, None)  # the real analysis: its findings' text is long


def screen_rows(app) -> list[str]:
    return [strip.text for strip in app.screen._compositor.render_strips()]


def visible_body_rows(app) -> dict[int, str]:
    """Document row -> the text drawn for it, for the body rows now inside the details pane."""
    det = app.main.details
    body = det.query_one("#details-body")
    view, x = det.scrollable_content_region, body.content_region
    rows = screen_rows(app)
    top = round(det.scroll_y)
    out = {}
    for i in range(view.height):
        doc_row = top + i
        if doc_row < body.virtual_region.height:
            out[doc_row] = rows[view.y + i][x.x : x.x + x.width]
    return out


async def read_down(pilot) -> str:
    """Press down until the pane stops scrolling, collecting every body row drawn; the text, whitespace-free."""
    app = pilot.app
    det = app.main.details
    seen = visible_body_rows(app)
    for _ in range(200):
        before = det.scroll_y
        await pilot.press("down")
        seen.update(visible_body_rows(app))
        if det.scroll_y == before:
            break
    return re.sub(r"\s+", "", "".join(seen[k] for k in sorted(seen)))


def squashed(text: str) -> str:
    return re.sub(r"\s+", "", text)


@pytest.mark.parametrize("size", [(80, 24), (120, 40)])
@run_async
async def test_every_row_of_every_finding_can_be_read_with_the_arrows(resnet, size):
    async with resnet.run_test(size=size) as pilot:
        await analysed(pilot)
        main = resnet.main
        det = main.details
        findings = main.snapshot.findings
        assert findings
        longest = 0
        for k in range(len(findings)):
            await pilot.press("n")  # the finding, at the top of its text, the drill list focused
            assert det.node.key == (k,) and det.scroll_y == 0
            longest = max(longest, det.query_one("#details-body").virtual_region.height)
            text = squashed("".join(chunk for line in det.detail.body for chunk, _ in line))
            assert await read_down(pilot) == text, f"finding {k} at {size}"
            for _ in range(200):  # and back up to its first row
                await pilot.press("up")
            assert det.scroll_y == 0
        assert longest > det.scrollable_content_region.height  # the pane was too short for some text


@run_async
async def test_the_arrows_read_the_text_then_move_through_the_drill_list(resnet):
    async with resnet.run_test(size=(80, 24)) as pilot:
        await analysed(pilot)
        main = resnet.main
        det = main.details
        main.show_summary()
        await pilot.pause()
        det.query_one(OptionList).focus(scroll_visible=False)
        await pilot.pause()
        assert det.node == SUMMARY and det.scroll_y == 0
        drill = det.query_one(OptionList)
        n = drill.option_count
        assert n > 3
        rows_of_text = det.query_one("#details-body").virtual_region.height
        assert rows_of_text > det.scrollable_content_region.height
        presses = 0
        while drill.highlighted == 0:  # the text scrolls by until the first row of the list is in view
            await pilot.press("down")
            presses += 1
            assert presses < 200
        assert presses > rows_of_text - det.scrollable_content_region.height
        assert drill.highlighted == 1
        view = det.scrollable_content_region
        assert view.y <= drill.region.y + 1 < view.bottom  # the highlighted row is in view
        await pilot.press("end")
        assert drill.highlighted == n - 1 and det.scroll_y == det.max_scroll_y
        await pilot.press("home")
        assert drill.highlighted == 0 and det.scroll_y == 0
        await pilot.press("pagedown")
        assert det.scroll_y == min(det.max_scroll_y, det.scrollable_content_region.height - 1)
        await pilot.press("enter")  # the highlighted child still opens
        assert len(det.stack) == 2
