"""Communication in the TUI: the regime bars give collectives their own letter, glyph and colour, and the
summary and the hot lines name them (the hand-built DDP window of tests/test_communication.py)."""

import dataclasses

from test_communication import ddp_window
from tui_fakes import analysed, run_async

from brrrtui.present.details.summary import summary
from brrrtui.recording.store import write_trace
from brrrtui.tui.app import make_app
from brrrtui.tui.widgets.regime_bars import RegimeBars


@run_async
async def test_collectives_have_their_own_letter_glyph_and_colour(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "train.py").write_text("\n" * 30)
    trace = ddp_window()
    write_trace(
        dataclasses.replace(trace, meta={**trace.meta, "cwd": str(tmp_path)}), str(tmp_path / "c.brrr")
    )
    app = make_app(str(tmp_path / "c.brrr"), None, None)
    async with app.run_test(size=(140, 40)) as pilot:
        await analysed(pilot)
        bars = app.main.query_one(RegimeBars)
        text = bars.render()
        assert "C 40% M 10% N 30% O 20% (idle 20%)" in text.plain
        comm = bars.role_style("communication")
        assert comm.color is not None and comm != bars.role_style("compute") != bars.role_style("memory")
        glyphs = {text.plain[s.start : s.end] for s in text.spans if s.style == comm}
        assert any(g and set(g) == {"▒"} for g in glyphs) and "N 30%" in " ".join(glyphs)
        assert "communication 30%" in summary(app.snapshot).text()
        assert app.snapshot.hot_lines[0].regime.value == "communication"
        hot = [str(label) for label, node in summary(app.snapshot).children if node.kind.value == "line"]
        assert (
            " N " in hot[0] and " C " not in hot[0]
        )  # the summary's hot lines mark it N, as the gutter does
