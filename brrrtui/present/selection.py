"""One vocabulary for what the user can point at: a timeline selection, a details-pane node and the items of a
timeline lane are all named by `Kind`.

A `Selection` is what the timeline's cursor is on (a row of the table its kind names, and where it lies on the
page); a `Node` is what the details pane describes (a kind and the key that finds it in a snapshot).
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum


class Kind(StrEnum):
    SUMMARY = "summary"  # the whole run (key: ())
    LINE = "line"  # a source line (key: line id)
    OP = (
        "op"  # an operator: an op row (selection), or a line's calls of one op (node key: line, name, shapes)
    )
    KERNEL_NAME = "kname"  # every call of a kernel (key: name id[, line id, op name id, shapes id])
    KERNEL = "kernel"  # one GPU activity (key: gpu row)
    GAP = "gap"  # an idle stretch of the GPU (key: gap row)
    FINDING = "finding"  # a finding (key: its index in the snapshot's findings)
    STREAMED = "streamed"  # a kernel streamed between windows (selection: stream row; node key: its rowid)


@dataclass(frozen=True)
class Node:
    kind: Kind
    key: tuple = ()


SUMMARY = Node(Kind.SUMMARY)
# Nodes keyed by a row or an index of one analysis, which the next analysis numbers afresh (lines, kernel names,
# a line's calls of an op and streamed kernels, keyed by rowid, mean the same in every analysis)
ROW_KEYED = frozenset({Kind.KERNEL, Kind.GAP, Kind.FINDING})


@dataclass(frozen=True)
class Selection:
    kind: Kind  # KERNEL, OP, GAP or STREAMED
    row: int  # gpu, op, gap or stream row (of the snapshot's stream table)
    start: float  # ns relative to the page start
    end: float
