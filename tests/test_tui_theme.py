"""Colours: every one comes from the theme; regimes and gap causes stay distinct in truecolor and 256 colours."""

import os
import re

from rich.color import ColorSystem
from tui_fakes import analysed, fake_analyze, resnet_copy, run_async

from brrrtui.tui.app import THEME_VARIABLES, make_app

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
DISTINCT = (
    ["compute", "memory", "overhead"],
    [
        "gap-host",
        "gap-sync",
        "gap-h2d",
        "gap-data",
        "gap-wait",
        "gap-other",
    ],
)


def test_no_hard_coded_colours_in_the_ui():
    hex_colour = re.compile(r"#[0-9a-fA-F]{3,8}\b")
    ui = ["brrrtui/tui/app.py", "brrrtui/tui/app.tcss"]
    for folder in ("brrrtui/tui/widgets", "brrrtui/tui/screens", "brrrtui/present"):
        ui += [os.path.join(folder, f) for f in os.listdir(os.path.join(ROOT, folder)) if f.endswith(".py")]
    for rel in ui:
        with open(os.path.join(ROOT, rel)) as f:
            assert not hex_colour.findall(f.read()), rel


@run_async
async def test_regime_and_gap_colours_are_distinct_in_every_builtin_theme(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    app = make_app(resnet_copy(tmp_path), None, None, analyze=fake_analyze)
    async with app.run_test(size=(100, 30)) as pilot:
        await analysed(pilot)
        tl = app.main.timeline
        from textual.theme import BUILTIN_THEMES

        for theme in (
            t for t in BUILTIN_THEMES if not t.startswith("ansi")
        ):  # ansi-*: the terminal's palette
            app.theme = theme
            await pilot.pause()
            for group in DISTINCT:
                colours = [tl.role_style(role).color for role in group]
                assert all(c is not None for c in colours), (theme, group)
                assert len({c.get_truecolor() for c in colours}) == len(group), (theme, group)
            regimes = [tl.role_style(r).color.downgrade(ColorSystem.EIGHT_BIT) for r in DISTINCT[0]]
            assert len({c.number for c in regimes}) == 3, (
                theme
            )  # still three colours in a 256-colour terminal


def test_theme_variables_name_real_theme_colours():
    from textual.theme import BUILTIN_THEMES

    generated = BUILTIN_THEMES["textual-dark"].to_color_system().generate()
    assert set(THEME_VARIABLES.values()) <= set(generated)
