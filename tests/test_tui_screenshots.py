"""screenshots/make_screenshots.py writes one SVG per scene through make_app()."""

import importlib.util
import os

from tui_fakes import HERE, fake_analyze, resnet_copy


def test_make_screenshots_writes_every_scene(tmp_path, monkeypatch):
    spec = importlib.util.spec_from_file_location(
        "make_screenshots", os.path.join(os.path.dirname(HERE), "screenshots", "make_screenshots.py")
    )
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    path = resnet_copy(tmp_path)
    monkeypatch.chdir(tmp_path)
    written = mod.make_screenshots(path, str(tmp_path / "out"), analyze=fake_analyze)
    assert [os.path.basename(p) for p in written] == [f"{name}.svg" for name, _, _ in mod.SCENES]
    for p in written:
        with open(p) as f:
            svg = f.read()
        assert svg.startswith("<svg") and "resnet" in svg
    assert mod.main([str(tmp_path / "missing.brrr")]) == 2
