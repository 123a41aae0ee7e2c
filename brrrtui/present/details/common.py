"""What every description shares: the `Detail` it returns, paths as a terminal opens them, short names."""

from __future__ import annotations

import math
import os
from dataclasses import dataclass, field

import numpy as np

from analyzers.results import GAP_CAUSE_CODES, Finding, GapCause
from brrrtui.contract.model import SourceLine
from brrrtui.present.finding_words import message
from brrrtui.present.paths import Location, location, locations_in
from brrrtui.present.selection import Kind, Node
from brrrtui.present.snapshot import Snapshot

Span = tuple[str, str]
CAUSES_BY_CODE = {v: k for k, v in GAP_CAUSE_CODES.items()}


@dataclass
class Detail:
    title: str
    body: list[list[Span]] = field(default_factory=list)
    children: list[tuple[str, Node]] = field(default_factory=list)

    def text(self) -> str:
        """Plain text (tests, screenshots' alt text)."""
        return "\n".join("".join(t for t, _ in line) for line in self.body)

    def add(self, *spans: Span) -> None:
        self.body.append(list(spans))

    def link(self, label: str, kind: Kind, *key: int) -> None:
        self.children.append((label, Node(kind, key)))


def display_path(snap: Snapshot, line: SourceLine) -> Location:
    """`file:line` as people read it (`present.paths.readable_path`), with the file on this machine it opens
    (the UI makes it a hyperlink; none when the file is not here)."""
    found = snap.resolve(line.file)
    return location(line.file, line.line, os.path.abspath(found) if found else None, _run_cwd(snap))


def message_parts(snap: Snapshot, text: str) -> list[str]:
    """A finding's message in parts: every absolute `.py` path in it a Location (readable, and opening)."""

    def locate(file: str, line: int | None) -> Location:
        found = snap.resolve(file)
        return location(file, line, os.path.abspath(found) if found else None, _run_cwd(snap))

    return locations_in(text, locate)


def _run_cwd(snap: Snapshot) -> str | None:
    cwd = snap.trace.meta.get("cwd")
    return cwd if isinstance(cwd, str) else None


def cause_of(code: int) -> GapCause:
    return CAUSES_BY_CODE.get(code, GapCause.OTHER)


def per(snap: Snapshot) -> str:
    return "/step" if snap.per_step else "/window"


def short(s: str, n: int) -> str:
    return s if len(s) <= n else s[: n - 1] + "…"


def nansum(x: np.ndarray) -> float | None:
    return float(np.nansum(x)) if len(x) and np.isfinite(x).any() else None


def rate(amount: float | None, seconds: float | None) -> float | None:
    """amount / seconds, unknown when either is."""
    return amount / seconds if amount is not None and math.isfinite(amount) and seconds else None


def rel_start(snap: Snapshot, row: int) -> float:
    """A gpu row's start relative to its window's page."""
    tr = snap.trace
    wl = snap.lanes.get(int(tr.gpu.window[row]))
    return float(tr.gpu.start_ns[row] - (wl.start_ns if wl else 0))


def link_findings(d: Detail, findings: list[tuple[int, Finding]]) -> None:
    for i, f in findings:
        d.link(f"⚑ {message(f)}", Kind.FINDING, i)
