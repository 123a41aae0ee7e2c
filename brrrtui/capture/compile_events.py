"""What torch.compile does to the script: the graph breaks it meets and the functions it compiles again,
each with its line and Dynamo's reason.

Dynamo writes each break to its `graph_breaks` artifact loggers ("Graph break in user code at FILE:LINE /
Graph Break Reason: …"). A handler on them hears every break without TORCH_LOGS; when the script did not ask
for those logs, the loggers are set to DEBUG with propagation off, so nothing reaches the script's stderr,
and when it did, they are left as they are. Dynamo then formats the message it would print: compile-time
work only; what it compiles does not change.

A recompilation's reasons are worked out by Dynamo's own `get_and_maybe_log_recompilation_reasons` whenever it
recompiles (it logs them only with TORCH_LOGS=recompiles); a wrapper on that name in
`torch._dynamo.convert_frame`, the module that calls it, hears the first reason and passes the result on
unchanged.
"""

from __future__ import annotations

import logging
import re
from collections.abc import Callable
from typing import Any

from brrrtui.contract.userfiles import package_path

_WHERE = re.compile(r"in user code at (?P<file>.+?):(?P<line>\d+)\s*$", re.MULTILINE)
_REASON = re.compile(r"Graph Break Reason:\s*(?P<reason>.*)")
_EXPLANATION = re.compile(r"^\s*Explanation:\s*(?P<text>.+)$", re.MULTILINE)


_FRAME = re.compile(r'^.*File "(?P<file>[^"]+)", line (?P<line>\d+), in ', re.MULTILINE)
Frames = tuple[tuple[str, int], ...]


def parse_break(message: str) -> tuple[str, int, str, Frames] | None:
    """(file, line, reason, the user stack's frames outermost first) of one graph-break log message, or None
    when it names no line. Dynamo's "user code" is any traced code: a library's too."""
    where = _WHERE.search(message)
    if where is None:
        return None
    reason_m = _REASON.search(message)
    reason = reason_m["reason"].strip() if reason_m else ""
    explanation = _EXPLANATION.search(message)
    if explanation is not None:  # newer torch: the first line is generic, the explanation says what broke
        reason = explanation["text"].strip()
    frames = tuple((m["file"], int(m["line"])) for m in _FRAME.finditer(message))
    return where["file"], int(where["line"]), reason[:300], frames


def user_place(
    file: str, line: int, reason: str, frames: Frames, is_user: Callable[[str], bool]
) -> tuple[str, int, str] | None:
    """Where a compile event belongs among the user's lines: its own line, or for a break in library code
    (`transformers/modeling_utils.py:4635`, inside a compiled HF model) the innermost user frame of its
    stack, the reason then saying where in the library it broke. None when no user frame is known."""
    if is_user(file):
        return file, line, reason
    for f, n in reversed(frames):
        if is_user(f):
            return f, n, f"{package_path(file) or file}:{line}: {reason}"
    return None


class _Handler(logging.Handler):
    def __init__(self, on_break: Callable[[str, int, str, Frames], None]):
        super().__init__(logging.DEBUG)
        self.on_break = on_break

    def emit(self, record: logging.LogRecord) -> None:
        try:
            found = parse_break(record.getMessage())
        except Exception:  # noqa: BLE001 - a message we cannot read is skipped, never raised into Dynamo
            return
        if found is not None:
            self.on_break(*found)


def watch_graph_breaks(on_break: Callable[[str, int, str, Frames], None]) -> int:
    """Call `on_break(file, line, reason, frames)` for every graph break; returns how many loggers it listens
    to."""
    try:
        import torch._dynamo  # noqa: F401 - registers the artifact loggers (torch.compile imports it anyway)
    except ImportError:
        return 0
    names = [n for n in list(logging.root.manager.loggerDict) if n.endswith(".__graph_breaks")]
    handler = _Handler(on_break)
    for name in names:
        log: Any = logging.getLogger(name)
        if not log.isEnabledFor(logging.DEBUG):  # the script did not ask for them: hear, do not print
            log.setLevel(logging.DEBUG)
            log.propagate = False
        log.addHandler(handler)
    return len(names)


_COMPILE_ID = re.compile(r"^\s*\d+/\d+:\s*")


def guard_text(reason: str) -> str:
    """Dynamo's guard-failure text -> the failed guard alone: `0/1: scale == 2    # return (…)  # file:11 …`
    and its user stack -> `scale == 2`."""
    first = reason.strip().splitlines()[0] if reason.strip() else ""
    return " ".join(_COMPILE_ID.sub("", first).split("#", 1)[0].split())[:200]


def watch_recompiles(on_recompile: Callable[[str, int, str], None]) -> bool:
    """Call `on_recompile(file, def line, reason)` whenever Dynamo compiles a function again; False when this
    torch has no such function to wrap."""
    try:
        import torch._dynamo.convert_frame as convert_frame
    except ImportError:
        return False
    reasons_of = getattr(convert_frame, "get_and_maybe_log_recompilation_reasons", None)
    if reasons_of is None:
        return False
    if getattr(reasons_of, "__brrrtui__", False):
        return True

    def wrapped(*args: Any, **kwargs: Any) -> Any:
        reasons = reasons_of(*args, **kwargs)
        frame = kwargs.get("frame", args[1] if len(args) > 1 else None)
        code = getattr(frame, "f_code", None)
        if code is not None and reasons:
            try:
                on_recompile(code.co_filename, code.co_firstlineno, guard_text(str(reasons[0])))
            except Exception:  # noqa: BLE001 - never raised into Dynamo
                pass
        return reasons

    wrapped.__brrrtui__ = True  # type: ignore[attr-defined]
    convert_frame.get_and_maybe_log_recompilation_reasons = wrapped
    return True
