"""The module tree screen (`M`) on a real H200 recording of Hugging Face GPT-2: folded modules with their time,
share and regime; the highlighted module's details follow the cursor and name the findings placed in it."""

from __future__ import annotations

import pytest
from textual.widgets import Static, Tree
from tui_fakes import ROOT, analysed, h200_recording, run_async

from brrrtui.tui.app import make_app
from brrrtui.tui.screens.modules import ModuleScreen


@pytest.fixture
def hf_gpt2(tmp_path, monkeypatch):
    monkeypatch.chdir(ROOT)
    return h200_recording("h200_hf_gpt2_modules", tmp_path)


def _details(app) -> str:
    return str(app.screen.query_one("#module-details-body", Static).render())


@run_async
async def test_m_opens_the_tree_and_the_details_follow_the_cursor(hf_gpt2):
    app = make_app(hf_gpt2, None, None)
    async with app.run_test(size=(140, 44)) as pilot:
        await analysed(pilot)
        await pilot.press("M")
        await pilot.pause()
        assert isinstance(app.screen, ModuleScreen)
        tree = app.screen.query_one(Tree)
        labels = [str(n.label) for n in tree.root.children]
        assert labels[0].startswith("GPT2LMHeadModel") and labels[-1].startswith("outside any module")
        assert "GPT2LMHeadModel" in _details(app)
        # the tree opens on the hot path: model > transformer > h.* > mlp > act
        path = []
        for _ in range(6):
            await pilot.press("down")
            await pilot.pause()
            node = tree.cursor_node
            path.append(node.data.label if node and node.data else None)
        assert path[:5] == ["GPT2LMHeadModel", "transformer", "transformer.h.*", "transformer.h.*.mlp",
                            "transformer.h.*.mlp.act"]  # fmt: skip
        for _ in range(len(path) - 1 - path.index("transformer.h.*.mlp.act")):
            await pilot.press("up")
        await pilot.pause()
        assert tree.cursor_node.data.label == "transformer.h.*.mlp.act"
        assert "NewGELUActivation" in _details(app) and "gelu_pytorch_tanh" in _details(app)
        await pilot.press("escape")
        await pilot.pause()
        assert not isinstance(app.screen, ModuleScreen)


@run_async
async def test_m_explains_when_there_is_no_tree(tmp_path, monkeypatch):
    monkeypatch.chdir(ROOT)
    app = make_app(h200_recording("h200_gpt_small", tmp_path), None, None)  # recorded without module names
    async with app.run_test(size=(120, 36)) as pilot:
        await analysed(pilot)
        await pilot.press("M")
        await pilot.pause()
        assert not isinstance(app.screen, ModuleScreen)


def test_module_tree_140x44(snap_compare, hf_gpt2):
    async def run_before(pilot):
        await analysed(pilot)
        await pilot.press("M", "down", "down")
        await pilot.pause()

    assert snap_compare(make_app(hf_gpt2, None, None), terminal_size=(140, 44), run_before=run_before)


@run_async
async def test_s_opens_the_modules_library_line_in_the_source_view_with_its_gpu_time(hf_gpt2):
    app = make_app(hf_gpt2, None, None)
    async with app.run_test(size=(140, 44)) as pilot:
        await analysed(pilot)
        await pilot.press("M")
        await pilot.pause()
        tree = app.screen.query_one(Tree)
        while tree.cursor_node is None or tree.cursor_node.data is None or (
            tree.cursor_node.data.label != "transformer.h.*.mlp.act"
        ):
            await pilot.press("down")
            await pilot.pause()
        await pilot.press("s")
        await pilot.pause()
        assert not isinstance(app.screen, ModuleScreen)
        source = app.main.source
        assert source.file.endswith("transformers/activations.py") and source.current_lineno() == 66
        stat = source.current_stat()  # the library line's own GPU time: NewGELUActivation's kernels
        assert stat is not None and stat.regime.value == "memory" and stat.gpu_ns > 10 * stat.kernels
