"""The nn.Module chain a torch call ran in, as one string (a span's `module` column).

The capture writes, outermost first, every module whose forward was on the stack: its qualified name under the
outermost one (`named_modules()` names; "" for that root) and its class::

    =GPT2LMHeadModel;transformer=GPT2Model;transformer.h.3=GPT2Block;transformer.h.3.attn=GPT2Attention

A string rather than a table because Kineto carries it in the scope's name and the recording interns it like
any other name. Analyses group by the collapsed path (`transformer.h.*.attn`): the twelve blocks of a model
are one row, and the tree stays small.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

_SEP = ";"
_EQ = "="
_INDEX = re.compile(r"(?<![^.])\d+(?![^.])")  # a whole dotted component that is a number


@dataclass(frozen=True)
class ModuleFrame:
    path: str  # qualified name under the root module ("" for the root itself)
    kind: str  # the module's class name

    @property
    def label(self) -> str:
        """The path, or the class for the root (`GPT2LMHeadModel`)."""
        return self.path or self.kind


def encode(chain: Sequence[tuple[str, str]]) -> str:
    """(path, class) pairs, outermost first -> the span's module string. `;` and `=` cannot occur in
    Python identifiers, so they are safe separators; any that a custom name holds are dropped."""
    return _SEP.join(f"{_clean(p)}{_EQ}{_clean(k)}" for p, k in chain)


def decode(s: str) -> tuple[ModuleFrame, ...]:
    """The span's module string -> its frames, outermost first; () for "" or a malformed string."""
    if not s:
        return ()
    frames = []
    for part in s.split(_SEP):
        path, eq, kind = part.partition(_EQ)
        if not eq:
            return ()
        frames.append(ModuleFrame(path, kind))
    return tuple(frames)


def collapse(path: str) -> str:
    """`encoder.layer.3.attention` -> `encoder.layer.*.attention` (every numeric component)."""
    return _INDEX.sub("*", path)


def _clean(s: str) -> str:
    return s.replace(_SEP, "").replace(_EQ, "")


_DIGITS = re.compile(r"\d+")
ChainPaths = tuple[str, ...]  # a chain's qualified names, outermost first


def fold_chains(chains: Iterable[Sequence[ModuleFrame]]) -> dict[ChainPaths, ChainPaths]:
    """Each chain's paths -> the paths its levels fold to, siblings folded by structure.

    Numbered components collapse as `collapse` does (`h.3` -> `h.*`). Beyond that, siblings of one class
    whose subtrees have the same shape (as many modules of the same classes under the same folded names, all
    the way down) are one node whatever they are called: `encoder_layer_0 … encoder_layer_11` fold to
    `encoder_layer_*` (their names with every run of digits as `*`), and siblings whose names share no such
    pattern to `{first,second}`.
    Only modules with modules of their own below them fold this way, and only when every sibling of that class
    has the same shape: two leaves (`fc1`, `fc2`, both Linear) or stages of one class that differ below
    (ResNet's `layer1` … `layer4`) stay apart. `chains` are what the kernels ran in, so "the same children"
    means the same children that ran.
    """
    chains = list(chains)
    root = _Tree("", "", "")
    for chain in chains:
        node = root
        for frame in chain:
            key = (frame.path, frame.kind)
            child = node.children.get(key)
            if child is None:
                child = node.children[key] = _Tree(frame.path, frame.kind, _relative(node.path, frame.path))
            node = child
    shapes: dict[tuple[object, ...], int] = {}
    for top in root.children.values():
        _settle(top, shapes)
    out: dict[ChainPaths, ChainPaths] = {}
    folded: list[str]
    for chain in chains:
        node, folded = root, []
        for frame in chain:
            parent, parent_folded = node.path, (folded[-1] if folded else "")
            node = node.children[(frame.path, frame.kind)]
            nested = bool(parent) and frame.path.startswith(parent + ".")
            folded.append(f"{parent_folded}.{node.label}" if nested else node.label)
        out[tuple(f.path for f in chain)] = tuple(folded)
    return out


def _relative(parent: str, path: str) -> str:
    return path[len(parent) + 1 :] if parent and path.startswith(parent + ".") else path


class _Tree:
    """One module as the chains reached it: its children keyed by qualified name."""

    __slots__ = ("path", "kind", "rel", "label", "children")

    def __init__(self, path: str, kind: str, rel: str):
        self.path, self.kind, self.rel = path, kind, rel
        self.label = collapse(rel)  # its name under its parent once folded
        self.children: dict[tuple[str, str], _Tree] = {}  # by (qualified name, class)


def _settle(node: _Tree, shapes: dict[tuple[object, ...], int]) -> int:
    """Fold `node`'s children (deepest first) and return the id of its shape: its class and, for each folded
    child name, the class and the shapes folded there, as many times as they occur (a stage of three blocks
    is not the shape of one of six)."""
    child_shape = {key: _settle(c, shapes) for key, c in node.children.items()}
    groups: dict[tuple[str, str], list[tuple[str, str]]] = {}  # (folded name, class) -> children keys
    for key, c in node.children.items():
        groups.setdefault((c.label, c.kind), []).append(key)
    by_kind: dict[str, list[tuple[str, str]]] = {}
    for name, kind in groups:
        by_kind.setdefault(kind, []).append((name, kind))

    def group_shape(g: tuple[str, str]) -> tuple[int, ...]:
        return tuple(sorted(child_shape[k] for k in groups[g]))

    for names in by_kind.values():
        if len(names) < 2:
            continue
        members = [node.children[k] for g in names for k in groups[g]]
        if any(not m.children for m in members) or len({group_shape(g) for g in names}) != 1:
            continue
        labels = sorted(name for name, _ in names)
        patterns = {_DIGITS.sub("*", name) for name in labels}
        label = patterns.pop() if len(patterns) == 1 else "{" + ",".join(labels) + "}"
        for m in members:
            m.label = label
    folded: dict[tuple[str, str], list[int]] = {}
    for key, c in node.children.items():
        folded.setdefault((c.label, c.kind), []).append(child_shape[key])
    shape = (node.kind, tuple(sorted((n, k, tuple(sorted(s))) for (n, k), s in folded.items())))
    return shapes.setdefault(shape, len(shapes))
