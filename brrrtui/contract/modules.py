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
from collections.abc import Sequence
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
