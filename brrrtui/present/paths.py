"""Paths people can read: `validation/workloads/hf_gpt2.py:32` and `transformers/activations.py:66`, not the
absolute paths the recording holds (`/home/u/runs/2026-12-01/validation/workloads/hf_gpt2.py`).

A file below the current directory is written relative to it (a terminal, VS Code's included, then opens
`path:line` with a click); else a file below the folder the script ran in, relative to that; a file of an
installed library, from its package (`transformers/…`); anything else as recorded. The JSON keeps the
recorded path beside this one (`display`).
"""

from __future__ import annotations

import os
import re

from brrrtui.contract.userfiles import package_path

_PY_PATH = re.compile(r"(?<![\w./-])(/[^\s:,;()'\"`]+\.py)\b")


def readable_path(path: str, run_cwd: str | None = None) -> str:
    if not os.path.isabs(path):
        return path
    library = package_path(path)
    if library is not None:
        return library
    for base in (os.getcwd(), run_cwd):
        if base and path.startswith(base.rstrip(os.sep) + os.sep):
            return os.path.relpath(path, base)
    return path


def readable_text(text: str, run_cwd: str | None = None) -> str:
    """Every absolute `.py` path in `text` (a finding's message, a report) made readable."""
    return _PY_PATH.sub(lambda m: readable_path(m.group(1), run_cwd), text)
