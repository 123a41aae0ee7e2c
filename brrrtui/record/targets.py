"""What the user asked to run and where to write it, checked before anything starts: a mistake gets one
clear line (InputError) instead of Python's or SQLite's own complaint."""

from __future__ import annotations

import os

from analyzers.errors import InputError
from brrrtui.recording.outputs import SQLITE_SIDECARS, Output, Protected


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


def recording_output(path: str, target: list[str] | None = None, force: bool = False) -> Output:
    """The policy for a recording at `path` (brrrtui.recording.outputs): a new file, or an earlier brrrtui
    recording (an empty file; with `force`, any regular file) replaced; never a FIFO, device, socket,
    directory or link, never the script, the module run with -m or a file of its package, never beside a
    journal that is not brrrtui's."""
    return Output(
        path,
        "a brrrtui recording",
        force=force,
        protected=Protected.of_target(target),
        sidecars=SQLITE_SIDECARS,
        room=(".lock", *SQLITE_SIDECARS),
    )


def check_out_path(path: str, target: list[str] | None = None, force: bool = False) -> bool:
    """Reject a recording path that cannot be written, or whose file is not ours to replace (one line);
    returns whether an earlier file will be replaced."""
    existing = recording_output(path, target, force).check()
    return existing is not None and existing.st_size > 0
