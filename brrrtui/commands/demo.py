"""`brrrtui demo`: the UI on a real H200 recording shipped in the package, with no GPU and no torch.

The recording (demo_data/h200_hf_gpt2.brrr.gz, a copy of tests/fixtures/h200_hf_gpt2_modules.brrr.gz) is Hugging
Face GPT-2 small training (bf16 autocast, fused AdamW, 120 steps) recorded on an H200 with the default options.
It is regenerated on an H200 with
`RUN_DIR=DIR PLAIN=0 STEPS_HF_GPT2=120 bash validation/run_workloads.sh hf_gpt2` (what step 1 of
validation/run_h200_followup.sh runs), then `gzip DIR/hf_gpt2.brrr`. The script's two files ship beside it
(validation/workloads/hf_gpt2.py and common.py, as `.py.txt`): the demo unpacks the recording into a temporary
folder, copies them there, points the recording's lines at the copies and opens the UI from that folder, so the
source pane shows the code that ran and paths read `validation/workloads/hf_gpt2.py:32`.
"""

from __future__ import annotations

import gzip
import os
import shutil
import sqlite3
import sys
import tempfile
from importlib import resources

from brrrtui.commands.args import Parser

RECORDING = "h200_hf_gpt2.brrr.gz"
SOURCES = {
    "hf_gpt2.py.txt": "validation/workloads/hf_gpt2.py",
    "common.py.txt": "validation/workloads/common.py",
}
UNPACKED = "h200_hf_gpt2_demo.brrr"


def _data(name: str) -> bytes:
    return (resources.files("brrrtui.commands") / "demo_data" / name).read_bytes()


def _write_new(path: str, data: bytes) -> None:
    """A new file (brrrtui.recording.outputs: made exclusively, no link followed; a file already there, or a
    link, is refused with one line, never replaced)."""
    from brrrtui.contract.errors import InputError
    from brrrtui.recording.outputs import create_new

    try:
        fd = create_new(path)
    except FileExistsError:
        raise InputError(f"{path} already exists; the demo unpacks only into a new folder") from None
    with os.fdopen(fd, "wb") as f:
        f.write(data)


def demo_recording(folder: str) -> str:
    """Unpack the demo recording and its sources into `folder`; its lines then name the copies there (the
    script's cwd on the H200 becomes `folder`). Returns the recording's path."""
    path = os.path.join(folder, UNPACKED)
    _write_new(path, gzip.decompress(_data(RECORDING)))
    for name, rel in SOURCES.items():
        dest = os.path.join(folder, rel)
        os.makedirs(os.path.dirname(dest), exist_ok=True)
        _write_new(dest, _data(name))
    db = sqlite3.connect(path)
    try:
        (cwd,) = db.execute("SELECT json_extract(value, '$') FROM meta WHERE key = 'cwd'").fetchone()
        prefix = cwd.rstrip("/") + "/"
        with db:
            db.execute(
                "UPDATE lines SET file = ? || substr(file, ?) WHERE substr(file, 1, ?) = ?",
                (folder.rstrip("/") + "/", len(prefix) + 1, len(prefix), prefix),
            )
            db.execute("UPDATE meta SET value = json_quote(?) WHERE key = 'cwd'", (folder,))
    finally:
        db.close()
    return path


def cmd_demo(argv: list[str]) -> int:
    p = Parser(
        prog="brrrtui demo",
        description="Open the UI on Hugging Face GPT-2 training recorded on an NVIDIA H200 (shipped with "
        "brrrtui: no GPU and no torch needed).",
    )
    p.add_argument("--peaks", metavar="SPEC", help="override ceilings, e.g. flops=800e12,bw=4.2e12")
    ns = p.parse_args(argv)
    from brrrtui.commands.peaks import peaks_analyzer

    analyze = peaks_analyzer(ns.peaks)
    folder = tempfile.mkdtemp(prefix="brrrtui-demo-")
    old = os.getcwd()
    try:
        demo_recording(folder)
        os.chdir(folder)
        if not (sys.stdout.isatty() and sys.stdin.isatty()):
            from brrrtui.commands.report import cmd_report

            print("brrrtui: not a terminal: the demo's report instead of the UI", file=sys.stderr)
            return cmd_report([UNPACKED] + (["--peaks", ns.peaks] if ns.peaks else []))
        from brrrtui.tui.app import make_app

        make_app(UNPACKED, None, None, analyze=analyze).run()
    finally:
        os.chdir(old)
        shutil.rmtree(folder, ignore_errors=True)
    return 0
