"""The details pane's drill-down, as data: summary -> line -> ops -> kernels -> kernel -> gap -> advice; a
streamed kernel (between windows) -> the window kernel it was matched to and its inferred line.

`describe(snapshot, node)` returns a title, body lines of (text, role) spans and the children one can drill
into with Enter. Everything is computed on demand from the snapshot's columns (numpy masks over at most the
kernels of one line), so a drill step stays well under a frame at a million kernels. One module per kind of
thing described: summary (and findings), line (and its ops), kernel (by name and one call), gap, streamed.
"""

from __future__ import annotations

from collections.abc import Callable

from brrrtui.present.details.common import CAUSES_BY_CODE, Detail, Span, display_path
from brrrtui.present.details.gap import gap
from brrrtui.present.details.kernel import kernel, kernel_name
from brrrtui.present.details.line import line, op
from brrrtui.present.details.streamed import streamed
from brrrtui.present.details.summary import finding, summary
from brrrtui.present.selection import SUMMARY, Kind, Node
from brrrtui.present.snapshot import Snapshot

__all__ = ["CAUSES_BY_CODE", "SUMMARY", "Detail", "Kind", "Node", "Span", "describe", "display_path"]

_DESCRIBE: dict[Kind, Callable[..., Detail]] = {
    Kind.SUMMARY: summary,
    Kind.LINE: line,
    Kind.OP: op,
    Kind.KERNEL_NAME: kernel_name,
    Kind.KERNEL: kernel,
    Kind.GAP: gap,
    Kind.FINDING: finding,
    Kind.STREAMED: streamed,
}


def describe(snap: Snapshot, node: Node) -> Detail:
    fn = _DESCRIBE.get(node.kind)
    if fn is None:
        return Detail(f"unknown item {node.kind}")
    try:
        return fn(snap, *node.key)
    except (IndexError, KeyError):
        return Detail("gone", [[("This item is not in the current snapshot.", "muted")]])
