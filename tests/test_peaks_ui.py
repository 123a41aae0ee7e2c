"""`--peaks` on `view` and on the live `brrrtui SCRIPT`: the UI judges against the ceilings given, and a spec
brrrtui cannot use is one error line before any script or UI starts."""

from __future__ import annotations

import os
import subprocess
import sys

from tui_fakes import analysed, run_async

import brrrtui.cli as cli
from analyzers.phases.run_phases import Phase
from brrrtui.commands.peaks import peaks_analyzer
from brrrtui.recording.load import load_trace
from brrrtui.tui import app as tui_app

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
FIXTURE = os.path.join(ROOT, "tests", "fixtures", "h200_hf_gpt2_steady.brrr.gz")


def test_the_analyzer_applies_the_override_to_every_phase():
    assert peaks_analyzer(None) is None
    fn = peaks_analyzer("flops=1e15,bw=2e12")
    trace = load_trace(FIXTURE)
    for a in (fn(trace), fn(trace, None, phase=Phase.SETUP)):  # the two calls the UI makes
        assert a.peaks.source == "override"
        assert a.peaks.tensor_flops_per_s == 1e15 and a.peaks.bytes_per_s == 2e12
        assert a.peaks.fp32_flops_per_s == trace.peaks.fp32_flops_per_s  # the fields not named: measured


class _App:
    def __init__(self, seen: dict):
        self.seen = seen

    def run(self) -> None:
        self.seen["ran"] = True


def test_view_passes_the_ceilings_to_the_ui(monkeypatch):
    seen: dict = {}
    monkeypatch.setattr(cli, "_tui_available", lambda: True)  # the UI opens on a terminal only

    def fake_make_app(path, feed=None, script=None, **kwargs):
        seen.update(kwargs, path=path)
        return _App(seen)

    monkeypatch.setattr(tui_app, "make_app", fake_make_app)
    assert cli.main(["view", "--peaks", "bw=1e12", FIXTURE]) == 0
    assert seen["ran"] and seen["analyze"](load_trace(FIXTURE)).peaks.bytes_per_s == 1e12
    seen.clear()
    assert cli.main(["view", FIXTURE]) == 0
    assert seen["analyze"] is None


def test_the_live_command_passes_the_ceilings_and_the_script_keeps_its_own_peaks_flag(monkeypatch, tmp_path):
    seen: dict = {}
    monkeypatch.setattr(cli, "_tui_available", lambda: True)
    monkeypatch.setattr(
        cli, "_run_live", lambda spec, analyze=None: seen.update(spec=spec, analyze=analyze) or 0
    )
    script = tmp_path / "train.py"
    script.write_text("print('hi')\n")
    assert cli.main(["--peaks", "flops=9e14", str(script), "--peaks", "mine"]) == 0
    assert seen["spec"].target == [str(script), "--peaks", "mine"]  # after the script: its own arguments
    assert seen["analyze"](load_trace(FIXTURE)).peaks.tensor_flops_per_s == 9e14


def test_a_bad_spec_is_one_line_before_anything_runs(tmp_path):
    marker = tmp_path / "ran"
    script = tmp_path / "train.py"
    script.write_text(f"open({str(marker)!r}, 'w').write('x')\n")
    for argv in (["view", "--peaks", "flops=fast", FIXTURE], ["--peaks", "speed=1", str(script)]):
        r = subprocess.run([sys.executable, "-m", "brrrtui", *argv], capture_output=True, text=True, cwd=ROOT)
        assert (
            r.returncode == 2
            and r.stderr.startswith("brrrtui: error: peaks override")
            and "Traceback" not in r.stderr
        )
    assert not marker.exists()


@run_async
async def test_the_view_ui_shows_the_override(tmp_path):
    app = tui_app.make_app(FIXTURE, None, None, analyze=peaks_analyzer("bw=1e12"))
    async with app.run_test(size=(120, 36)) as pilot:
        await analysed(pilot)
        assert app.main.snapshot.analysis.peaks.source == "override"
        assert app.main.snapshot.analysis.peaks.bytes_per_s == 1e12
