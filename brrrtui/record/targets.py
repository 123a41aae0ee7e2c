"""What the user asked to run and where to write it, checked before anything starts: a mistake gets one
clear line (InputError) instead of Python's or SQLite's own complaint."""

from __future__ import annotations

import os
import sys
from collections.abc import Sequence
from importlib.machinery import PathFinder

from brrrtui.contract.errors import InputError
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
        protected=protected_by(target),
        sidecars=SQLITE_SIDECARS,
        room=(".lock", *SQLITE_SIDECARS),
    )


def check_out_path(path: str, target: list[str] | None = None, force: bool = False) -> bool:
    """Reject a recording path that cannot be written, or whose file is not ours to replace (one line);
    returns whether an earlier file will be replaced."""
    existing = recording_output(path, target, force).check()
    return existing is not None and existing.st_size > 0


LAUNCHERS = ("torch.distributed.run", "torch.distributed.launch")


def protected_by(target: Sequence[str] | None) -> Protected:
    """What a run never overwrites: the script, the module run with -m and its package, and for a launcher
    (torchrun, spawn) the training script or module it starts."""
    p = Protected()
    args = list(target or ())
    if args[:1] == [":spawn"]:
        args = args[1:]
    if args[:1] == ["-m"] and len(args) >= 2:
        _add_module(p, args[1])
        if args[1] in LAUNCHERS:
            _add_launched(p, args[2:])
    elif args:
        _add_script(p, args[0], "the script itself")
    return p


def _add_script(p: Protected, script: str, what: str) -> None:
    if os.path.isfile(script):
        p.files.append((script, what))
    elif os.path.isdir(script):
        p.trees.append((script, f"a file of {script}, the package the run starts"))


def _add_module(p: Protected, name: str) -> None:
    """The module's file, or its top package's folders: found as `python -m` would (the current folder, then
    PYTHONPATH, then this Python's path), without running any of it (a dotted find would import the top)."""
    top = name.split(".")[0]
    roots = [os.getcwd(), *filter(None, os.environ.get("PYTHONPATH", "").split(os.pathsep)), *sys.path[1:]]
    try:
        spec = PathFinder.find_spec(top, roots)
    except (ImportError, ValueError, OSError):
        spec = None
    if spec is None:
        return
    for folder in spec.submodule_search_locations or ():
        p.trees.append((folder, f"a file of the package {top} that `-m {name}` runs"))
    if not spec.submodule_search_locations and spec.origin and os.path.isfile(spec.origin):
        p.files.append((spec.origin, f"the module `-m {name}` runs"))


def _add_launched(p: Protected, args: list[str]) -> None:
    """torchrun's training script (a .py or a folder it names), or its module after `-m/--module`."""
    module = False
    for a in args:
        if a in ("-m", "--module"):
            module = True
        elif module and not a.startswith("-"):
            _add_module(p, a)
            return
        elif a.endswith(".py") or os.path.isfile(os.path.join(a, "__main__.py")):
            _add_script(p, a, "the training script the launcher runs")
