"""`M`: the module tree — GPU and idle time per nn.Module, folded (`layer.*` holds every layer), with the
highlighted module's regimes, library line, calling line and the findings placed in it."""

from __future__ import annotations

from collections.abc import Callable

from rich.style import Style
from rich.text import Text
from textual.app import ComposeResult
from textual.containers import VerticalScroll
from textual.screen import Screen
from textual.widgets import Footer, Static, Tree
from textual.widgets.tree import TreeNode

from analyzers.results import Analysis
from analyzers.totals.modules import ModuleNode, ModuleTree
from brrrtui.contract.model import SourceLine
from brrrtui.contract.units import fmt_ns
from brrrtui.present.module_report import library_path, node_details, node_label
from brrrtui.present.paths import Phrase
from brrrtui.tui.keymap import bindings
from brrrtui.tui.widgets.links import with_link

OPEN_DEPTH = 2  # levels expanded when the screen opens; below them, the modules holding HOT_SHARE of the step
HOT_SHARE = 0.2
NAME_WIDTH = 48  # the tree's guides take 4 columns a level: names padded to line the figures up


class ModuleScreen(Screen[SourceLine | None]):
    """Dismissed with the library line to show in the source view (`s`), or None (Esc)."""

    BINDINGS = bindings("modules")

    def __init__(self, analysis: Analysis, locate: Callable[[SourceLine], str] | None = None) -> None:
        super().__init__()
        self.analysis = analysis
        self.locate = locate or library_path  # the main screen's: Locations of the files on this machine

    def compose(self) -> ComposeResult:
        tree = self.analysis.modules
        assert tree is not None
        widget: Tree[ModuleNode] = Tree(Text("modules"), id="module-tree")
        widget.show_root = False
        parents: dict[tuple[str, ...], TreeNode[ModuleNode]] = {(): widget.root}
        step = max(tree.total_gpu_ns + tree.idle_ns, 1)
        for n in tree.nodes:
            hot = n.depth < OPEN_DEPTH or n.gpu_ns + n.idle_ns >= HOT_SHARE * step
            parent = parents.get(n.key[:-1], widget.root)
            width = NAME_WIDTH - 4 * n.depth + (0 if n.children else 2)  # a leaf has no fold icon
            label = Text(node_label(n, tree, width=max(16, width)))
            parents[n.key] = (
                parent.add(label, data=n, expand=hot) if n.children else parent.add_leaf(label, data=n)
            )
        outside = tree.outside_gpu_ns + tree.outside_idle_ns
        widget.root.add_leaf(Text(f"outside any module (optimizer, loss, data)  {_per_step(tree, outside)}"))
        yield widget
        with VerticalScroll(id="module-details"):
            yield Static(id="module-details-body")
        yield Footer()

    def on_mount(self) -> None:
        widget = self.query_one(Tree)
        widget.border_title = (
            "modules · GPU + idle time per step · share · regime · enter folds · s source · esc back"
        )
        widget.focus()
        first = self.analysis.modules.nodes[0] if self.analysis.modules else None
        if first is not None:
            self._show(first)

    def on_tree_node_highlighted(self, event: Tree.NodeHighlighted[ModuleNode]) -> None:
        if event.node.data is not None:
            self._show(event.node.data)

    def _show(self, node: ModuleNode) -> None:
        text = Text()
        for k, line in enumerate(node_details(node, self.analysis, self.locate)):
            text.append("\n" if k else "")
            for part in line.parts if isinstance(line, Phrase) else (line,):
                text.append(part, with_link(part, Style()))
        self.query_one("#module-details-body", Static).update(text)

    def action_close(self) -> None:
        self.dismiss(None)

    def action_source(self) -> None:
        node = self.query_one(Tree).cursor_node
        module = node.data if node is not None else None
        line = module.lib_line or module.user_line if module is not None else None
        if line is None:
            self.notify("No source line for this row.", timeout=2)
        else:
            self.dismiss(line)


def _per_step(tree: ModuleTree, ns: int) -> str:
    return fmt_ns(tree.per_step(ns)) + (" per step" if tree.steps else "")
