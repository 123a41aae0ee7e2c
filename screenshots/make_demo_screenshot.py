"""Regenerate screenshots/demo.svg: what `brrrtui demo` opens on (the H200 HF GPT-2 recording shipped in the
package), at 160x48.

    python screenshots/make_demo_screenshot.py [--out screenshots/demo.svg]

Unpacks the demo recording the way `brrrtui demo` does (brrrtui/commands/demo.py) into a temporary folder,
runs the real app headless from it and saves one SVG once the analysis is shown.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from brrrtui.commands.demo import UNPACKED, demo_recording  # noqa: E402
from brrrtui.tui.app import make_app  # noqa: E402


async def shoot(out: str, size: tuple[int, int]) -> None:
    app = make_app(UNPACKED, None, None)
    async with app.run_test(size=size) as pilot:
        deadline = time.monotonic() + 120
        while app.analyses < 1:
            if time.monotonic() > deadline:
                raise SystemExit("make_demo_screenshot: the analysis did not finish in time")
            await pilot.pause(0.05)
        await pilot.pause(0.5)
        app.save_screenshot(os.path.basename(out), os.path.dirname(out) or ".")


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--out", default=os.path.join(os.path.dirname(os.path.abspath(__file__)), "demo.svg"))
    out = os.path.abspath(p.parse_args().out)
    here = os.getcwd()
    with tempfile.TemporaryDirectory(prefix="brrrtui-demo-") as folder:
        demo_recording(folder)
        os.chdir(folder)
        try:
            asyncio.run(shoot(out, (160, 48)))
        finally:
            os.chdir(here)
    print(f"wrote {out}")


if __name__ == "__main__":
    main()
