"""What the user asked to run and where to write it, checked before anything starts: a mistake gets one
clear line (InputError) instead of Python's or SQLite's own complaint."""

from __future__ import annotations

import os

from analyzers.errors import InputError
from brrrtui.recording.store import is_brrrtui_recording


def check_target(target: list[str]) -> None:
    """Reject what `python` would reject, with one clear line instead of Python's own complaint."""
    if not target:
        raise InputError("no script given; usage: brrrtui [record -o FILE] SCRIPT [ARGS...]")
    if target[0] == "-m":
        if len(target) < 2:
            raise InputError("-m needs a module name, e.g. brrrtui -m mypkg.train")
        return
    script = target[0]
    if not os.path.exists(script):
        raise InputError(f"{script}: no such file")
    if os.path.isdir(script) and not os.path.exists(os.path.join(script, "__main__.py")):
        raise InputError(f"{script} is a directory without __main__.py; give a Python script")
    if os.path.isfile(script):
        with open(script, "rb") as f:
            head = f.read(4096)
        if b"\x00" in head or head.startswith((b"\x7fELF", b"SQLite format 3", b"\x1f\x8b", b"PK\x03\x04")):
            raise InputError(f"{script} is not a Python script (binary file)")
        try:
            compile(open(script, "rb").read(), script, "exec")
        except SyntaxError as e:
            raise InputError(f"{script}:{e.lineno}: not valid Python ({e.msg})") from None
        except ValueError:
            raise InputError(f"{script} is not a Python script") from None


def check_out_path(path: str, target: list[str] | None = None, force: bool = False) -> bool:
    """Reject a recording path that cannot be written, or whose file is not ours to replace: only an earlier
    brrrtui recording (or an empty file) is replaced; anything else needs `force`; the script itself never.
    Returns whether an existing recording (or, forced, another file) will be replaced."""
    parent = os.path.dirname(os.path.abspath(path))
    if os.path.isdir(path):
        raise InputError(f"{path} is a directory; give a file name for the recording (-o run.brrr)")
    if not os.path.isdir(parent):
        raise InputError(f"cannot write {path}: folder {parent} does not exist")
    if not os.access(parent, os.W_OK) or (os.path.exists(path) and not os.access(path, os.W_OK)):
        raise InputError(f"cannot write {path}: permission denied; choose another path with -o")
    if not os.path.exists(path):
        return False
    script = target[0] if target and target[0] != "-m" else None
    if script is not None and os.path.exists(script) and os.path.samefile(path, script):
        raise InputError(
            f"-o {path} is the script itself; refusing to overwrite it, choose another path with -o"
        )
    if os.path.getsize(path) == 0:
        return False
    if is_brrrtui_recording(path):
        return True
    if not force:
        raise InputError(
            f"{path} exists and is not a brrrtui recording; refusing to overwrite it "
            "(choose another path with -o, or add --force)"
        )
    return True
