"""`brrrtui demo`: the shipped H200 recording opens in the UI with torch made unimportable, and the shipped
files are the fixture and the script that made it."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap

import pytest
from tui_fakes import analysed, wait_until

from brrrtui.commands.demo import RECORDING, SOURCES, UNPACKED, demo_recording
from brrrtui.recording.load import load_trace
from brrrtui.tui.app import make_app
from brrrtui.tui.widgets.source_view import SourceView

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
DATA = os.path.join(ROOT, "brrrtui", "commands", "demo_data")

# A meta-path finder in front of every other: `import torch` (or any torch.*) fails as in a venv without it.
NO_TORCH = textwrap.dedent(
    """
    import sys
    class NoTorch:
        def find_spec(self, name, path=None, target=None):
            if name == "torch" or name.startswith("torch."):
                raise ModuleNotFoundError("No module named 'torch' (blocked by the test)")
            return None
    sys.meta_path.insert(0, NoTorch())
    """
)


def _bytes(path: str) -> bytes:
    with open(path, "rb") as f:
        return f.read()


def test_the_shipped_files_are_the_fixture_and_its_script():
    # One copy of the recording: the tests' fixture of that name is a link to the shipped file.
    fixture = os.path.join(ROOT, "tests", "fixtures", "h200_hf_gpt2_modules.brrr.gz")
    assert os.path.realpath(fixture) == os.path.realpath(os.path.join(DATA, RECORDING))
    for name, rel in SOURCES.items():
        assert _bytes(os.path.join(DATA, name)) == _bytes(os.path.join(ROOT, rel))
    assert os.path.getsize(os.path.join(DATA, RECORDING)) < 4 * 2**20


def test_the_recording_s_lines_point_at_the_shipped_script(tmp_path):
    path = demo_recording(str(tmp_path))
    trace = load_trace(path)
    assert trace.meta["cwd"] == str(tmp_path)
    hf = [ln for ln in trace.lines if ln.file.endswith("hf_gpt2.py")]
    assert hf and all(ln.file == str(tmp_path / "validation" / "workloads" / "hf_gpt2.py") for ln in hf)
    with open(hf[0].file) as f:
        source = f.read().splitlines()
    assert "return model(input_ids=ids, labels=ids).loss" in source[32 - 1]  # the hot line, as recorded


def _run(code: str, cwd: str) -> subprocess.CompletedProcess[str]:
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([ROOT, os.path.join(ROOT, "tests")]))
    return subprocess.run(
        [sys.executable, "-c", NO_TORCH + textwrap.dedent(code)],
        capture_output=True,
        text=True,
        cwd=cwd,
        env=env,
        timeout=180,
    )


def test_the_demo_ui_starts_without_torch(tmp_path):
    r = _run(
        """
        import asyncio, os
        from tui_fakes import analysed
        from brrrtui.commands.demo import UNPACKED, demo_recording
        from brrrtui.tui.app import make_app
        demo_recording(os.getcwd())

        async def main():
            app = make_app(UNPACKED, None, None)
            async with app.run_test(size=(160, 48)) as pilot:
                await analysed(pilot)
                hot = app.main.snapshot.hot_lines[0]
                print("hot", os.path.basename(hot.line.file), hot.line.line, app.main.snapshot.analysis.phase.value)
                await pilot.press("q")

        asyncio.run(main())
        try:
            import torch
        except ModuleNotFoundError:
            print("torch blocked")
        print("torch loaded:", [m for m in sys.modules if m == "torch" or m.startswith("torch.")])
        """,
        str(tmp_path),
    )
    assert r.returncode == 0, r.stderr[-3000:]
    assert "hot hf_gpt2.py 32 steady" in r.stdout
    assert "torch blocked" in r.stdout and "torch loaded: []" in r.stdout


def test_the_demo_command_without_a_terminal_prints_the_report_without_torch(tmp_path):
    r = _run("from brrrtui.cli import main\nsys.exit(main(['demo']))", str(tmp_path))
    assert r.returncode == 0, r.stderr[-3000:]
    assert "not a terminal" in r.stderr
    assert "NVIDIA H200" in r.stdout and "hf_gpt2.py:32" in r.stdout and "slow_gemm" in r.stdout


@pytest.fixture
def demo(tmp_path, monkeypatch):
    demo_recording(str(tmp_path))
    monkeypatch.chdir(tmp_path)
    return UNPACKED


async def ready(pilot):
    """Analysed, and the source view has centred its cursor line (after a layout pass that can come after the
    first pause on a loaded machine; tests/test_tui_snapshots.py waits the same way)."""
    await analysed(pilot)
    await wait_until(
        pilot,
        lambda: all(
            v.size.height == 0 or v.scroll_y <= v.cursor < v.scroll_y + v.size.height
            for v in pilot.app.screen.query(SourceView)
        ),
    )


def test_demo_first_screen_120x36(snap_compare, demo):
    assert snap_compare(make_app(demo, None, None), terminal_size=(120, 36), run_before=ready)
