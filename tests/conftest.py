import os
import subprocess
import sys

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SCRIPTS = os.path.join(ROOT, "tests", "scripts")


def run_brrrtui(
    *args: str, cwd: str | None = None, timeout: float = 120, **kw
) -> subprocess.CompletedProcess:
    """Run the CLI as a user would, in a fresh interpreter (`python -m brrrtui`)."""
    env = dict(os.environ, PYTHONPATH=ROOT, BRRRTUI_CALIBRATE="0")
    env.update(kw.pop("env", {}))
    return subprocess.run([sys.executable, "-m", "brrrtui", *args], cwd=cwd or ROOT, env=env, capture_output=True,
                          text=True, timeout=timeout, **kw)  # fmt: skip


@pytest.fixture
def scripts() -> str:
    return SCRIPTS


def line_of(path: str, marker: str) -> int:
    """The line number of the line tagged `# L:<marker>` in a test script (formatters may move lines)."""
    with open(path) as f:
        for number, text in enumerate(f, 1):
            if f"# L:{marker}" in text:
                return number
    raise LookupError(f"no '# L:{marker}' in {path}")


@pytest.fixture(autouse=True)
def _snapshots_without_links(request, monkeypatch):
    """SVG snapshots are drawn with terminal hyperlinks off: an SVG does not show them, and a link's random id
    makes Rich split or merge the runs around it differently from run to run (tests/test_tui_paths.py checks
    the links)."""
    if "snap_compare" in request.fixturenames:
        monkeypatch.setenv("BRRRTUI_LINKS", "0")
