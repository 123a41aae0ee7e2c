"""Names from a recording are data: a kernel, op, file or function named like markup is shown literally and
never parsed. Titles were markup strings: a raw `[link=file:///...]` or `[/]` raised MarkupError, and
rich.markup.escape misses Textual's own markup (`[$accent]`, `[ bold]`, `[_x]`, a trailing backslash)."""

import pytest
from textual.widgets import OptionList
from tui_fakes import analysed, fake_analyze, run_async, write_recording

from brrrtui.tui.app import make_app

SIZE = (120, 40)
EVIL_KERNEL = "[link=file:///etc/passwd]x[/link]_gemm"
EVIL_OP = "aten::[bold"
EVIL_COS = "[$accent]cos[ bold]\\"
EVIL_FUNCTION = "[/]step[red"


@pytest.fixture(params=[fake_analyze, None], ids=["fake", "analyze"])
def evil_app(tmp_path, monkeypatch, request):
    folder = tmp_path / "[_x]"
    folder.mkdir()
    path = write_recording(
        str(folder / "run.brrr"),
        windows=2,
        names={0: EVIL_KERNEL, 1: EVIL_COS, 3: EVIL_OP},
        function=EVIL_FUNCTION,
    )
    monkeypatch.chdir(tmp_path)
    return make_app(path, None, None, analyze=request.param)


def _shown(app) -> str:
    """The screen as text, row by row."""
    return "\n".join(strip.text for strip in app.screen._compositor.render_strips())


@run_async
async def test_markup_in_names_is_shown_literally_while_drilling(evil_app):
    app = evil_app
    async with app.run_test(size=SIZE) as pilot:
        await analysed(pilot)
        main = app.main
        assert app.snapshot is not None
        await pilot.press("tab", "enter")  # source: the hottest line's details
        for _ in range(3):  # line -> op -> kernel name -> kernel
            await pilot.press("enter")
            await pilot.pause()
        assert main.details.node.kind == "kernel"
        assert EVIL_OP in _shown(app) and "[_x]/train.py:4" in _shown(app)
        await pilot.press("escape")
        assert main.details.node.kind == "kname"
        await pilot.press("shift+tab", "shift+tab", "shift+tab")  # the timeline
        await pilot.press("home", "right_square_bracket")
        assert EVIL_KERNEL in _shown(app)
        for _ in range(6):  # the next kernels and gaps, until the cos kernel
            await pilot.press("right_square_bracket")
            if EVIL_COS in _shown(app):
                break
        assert EVIL_COS in _shown(app)  # the selection, in the timeline's subtitle
        assert "source · [_x]/train.py:" in _shown(app)
        for _ in range(4):
            await pilot.press("escape")
        await pilot.press("n")  # findings name the lines
        await pilot.pause()
        main.details.query_one(OptionList).focus()
        await pilot.press("enter")
        await pilot.pause()
        await pilot.press("slash", *"link=file")
        await pilot.pause()
        results = app.screen.query_one("#search-results", OptionList)
        assert results.option_count >= 1
        assert EVIL_KERNEL in str(results.get_option_at_index(0).prompt)
        await pilot.press("enter")
        await pilot.pause()
        assert main.timeline.selection is not None
        assert app.return_value is None and app._exception is None
