"""Regenerate the README's screenshots (SVG) from a recording or a torch.profiler trace.

    python screenshots/make_screenshots.py RECORDING [--out screenshots]
    python screenshots/make_screenshots.py tests/fixtures/h200_known_regimes.brrr.gz   # the README's

Run it from the folder the recording's script paths are relative to (the repository root for the fixtures),
so the source view finds the files.

Runs the real app headless through the same `make_app()` the CLI uses, drives it with keys, and saves one
SVG per scene, so the pictures never drift from the code. Scenes: the main screen at 200x60 and 80x24, the
timeline zoomed onto an idle gap, a source line drilled down to its operators, and the help screen.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import sys
import time
from collections.abc import Awaitable, Callable

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from textual.pilot import Pilot  # noqa: E402

from brrrtui.tui.app import BrrrApp, make_app  # noqa: E402

Scene = tuple[str, tuple[int, int], Callable[[Pilot], Awaitable[None]]]


async def _ready(pilot: Pilot, timeout_s: float = 120.0) -> None:
    app = pilot.app
    assert isinstance(app, BrrrApp)
    deadline = time.monotonic() + timeout_s
    while app.analyses < 1:
        if time.monotonic() > deadline:
            raise SystemExit("make_screenshots: the analysis did not finish in time")
        await pilot.pause(0.05)
    if app.state.error:
        raise SystemExit(f"make_screenshots: {app.state.error}")
    await pilot.pause()
    src = app.main.source  # it centres its cursor line after a layout pass, which can come after the pause
    while src.size.height and not src.scroll_y <= src.cursor < src.scroll_y + src.size.height:
        if time.monotonic() > deadline:
            raise SystemExit("make_screenshots: the source view did not show its cursor line in time")
        await pilot.pause(0.05)
    src.refresh()  # and draws it: a frame drawn before the scroll can still be on screen
    await pilot.pause()


async def _main(pilot: Pilot) -> None:
    await _ready(pilot)


async def _gap(pilot: Pilot) -> None:
    await _ready(pilot)
    app = pilot.app
    assert isinstance(app, BrrrApp)
    tl = app.main.timeline
    # select the longest idle gap of the shown window (go_to zooms until it is a few cells wide)
    gaps = app.main.snapshot.analysis.gaps if app.main.snapshot else None
    if gaps is not None and len(gaps):
        rows = [r for r in range(len(gaps)) if int(gaps.window[r]) == tl.window] or list(range(len(gaps)))
        tl.go_to("gap", max(rows, key=lambda r: int(gaps.dur_ns[r])))
    await pilot.pause()


async def _drill(pilot: Pilot) -> None:
    await _ready(pilot)
    await pilot.press("tab", "enter", "enter")


async def _help(pilot: Pilot) -> None:
    await _ready(pilot)
    await pilot.press("question_mark")


SCENES: list[Scene] = [
    ("main", (200, 60), _main),
    ("main_80x24", (80, 24), _main),
    ("gap", (160, 48), _gap),
    ("drill", (160, 48), _drill),
    ("help", (110, 44), _help),
]


async def shoot(
    app: BrrrApp, size: tuple[int, int], scene: Callable[[Pilot], Awaitable[None]], path: str
) -> None:
    async with app.run_test(size=size) as pilot:
        await scene(pilot)
        await pilot.pause()
        app.save_screenshot(path)


def make_screenshots(recording: str, out_dir: str, analyze: Callable | None = None) -> list[str]:
    os.makedirs(out_dir, exist_ok=True)
    written = []
    for name, size, scene in SCENES:
        path = os.path.join(out_dir, f"{name}.svg")
        app = make_app(recording, None, None, analyze=analyze)
        asyncio.run(shoot(app, size, scene, path))
        written.append(path)
    return written


def _ungzipped(path: str, tmp: str) -> str:
    """Recordings are SQLite files; a gzipped one (`run.brrr.gz`, as tests/fixtures keeps them) is unpacked."""
    if not path.endswith(".brrr.gz"):
        return path
    import gzip
    import shutil

    out = os.path.join(tmp, os.path.basename(path)[: -len(".gz")])
    with gzip.open(path) as src, open(out, "wb") as dst:
        shutil.copyfileobj(src, dst)
    return out


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description="Regenerate the README screenshots from a recording.")
    p.add_argument("recording", help="a .brrr recording or a torch.profiler .json/.json.gz trace")
    p.add_argument("--out", default=os.path.dirname(os.path.abspath(__file__)), help="folder for the SVGs")
    ns = p.parse_args(argv)
    if not os.path.exists(ns.recording):
        print(f"make_screenshots: {ns.recording}: no such file", file=sys.stderr)
        return 2
    import tempfile

    with tempfile.TemporaryDirectory() as tmp:
        for path in make_screenshots(_ungzipped(ns.recording, tmp), ns.out):
            print(path)
    return 0


if __name__ == "__main__":
    sys.exit(main())
