"""Graph breaks torch.compile meets in the script, with their line and reason.

Dynamo writes each break to its `graph_breaks` artifact loggers ("Graph break in user code at FILE:LINE /
Graph Break Reason: …"). A handler on them hears every break without TORCH_LOGS; when the script did not ask
for those logs, the loggers are set to DEBUG with propagation off, so nothing reaches the script's stderr,
and when it did, they are left as they are. Dynamo then formats the message it would print: compile-time
work only; what it compiles does not change.
"""

from __future__ import annotations

import logging
import re
from collections.abc import Callable
from typing import Any

_WHERE = re.compile(r"in user code at (?P<file>.+?):(?P<line>\d+)\s*$", re.MULTILINE)
_REASON = re.compile(r"Graph Break Reason:\s*(?P<reason>.*)")
_EXPLANATION = re.compile(r"^\s*Explanation:\s*(?P<text>.+)$", re.MULTILINE)


def parse_break(message: str) -> tuple[str, int, str] | None:
    """(file, line, reason) of one graph-break log message, or None when it names no user line."""
    where = _WHERE.search(message)
    if where is None:
        return None
    reason_m = _REASON.search(message)
    reason = reason_m["reason"].strip() if reason_m else ""
    explanation = _EXPLANATION.search(message)
    if explanation is not None:  # newer torch: the first line is generic, the explanation says what broke
        reason = explanation["text"].strip()
    return where["file"], int(where["line"]), reason[:300]


class _Handler(logging.Handler):
    def __init__(self, on_break: Callable[[str, int, str], None]):
        super().__init__(logging.DEBUG)
        self.on_break = on_break

    def emit(self, record: logging.LogRecord) -> None:
        try:
            found = parse_break(record.getMessage())
        except Exception:  # noqa: BLE001 - a message we cannot read is skipped, never raised into Dynamo
            return
        if found is not None:
            self.on_break(*found)


def watch_graph_breaks(on_break: Callable[[str, int, str], None]) -> int:
    """Call `on_break(file, line, reason)` for every graph break; returns how many loggers it listens to."""
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
