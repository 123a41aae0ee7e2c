"""A fusion candidate as the findings see it: a chain of kernels (fusion/chains.py), or everything that compiling one
function would fuse (fusion/scope.py)."""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from analyzers.fusion.patterns import ChainOp, match_pattern, named_pattern


@dataclass(frozen=True)
class FusionChain:
    """One fusable sequence of kernels, possibly repeated (`occurrences`) across steps and windows."""

    rows: list[int]  # gpu rows of the first occurrence, in stream order
    ops: list[int]  # op rows of the first occurrence
    op_names: list[str]
    line_ids: list[int]  # distinct lines, in order of first appearance
    kernel_names: list[str]
    occurrences: int = 1
    # totals over all occurrences
    bytes_now: float | None = None  # bytes the kernels move (inputs + outputs of each op)
    bytes_saved: float = 0.0  # intermediates written and re-read that a fused kernel would not move
    kernel_ns: float = 0.0  # GPU time of the kernels
    saving_ns: float = 0.0  # estimated time saved by fusing
    # gpu rows of every occurrence (an array: a scope can hold most of the run's kernels)
    all_rows: np.ndarray = field(default_factory=lambda: np.zeros(0, np.int64), compare=False)
    windows: set[int] = field(default_factory=set)
    chain_ops: list[ChainOp] = field(default_factory=list)  # op_names with their recorded operands
    # a function's whole scope (fusion/scope.py): every run of fusable kernels that compiling it fuses
    scope: bool = False
    launches: int | None = None  # launches fusing removes, over all occurrences (scope: per run, kernels - 1)

    @property
    def bytes_fused(self) -> float | None:
        return None if self.bytes_now is None else self.bytes_now - self.bytes_saved

    @property
    def launches_saved(self) -> float:
        """Launches fusing removes per occurrence: kernels - 1 for a chain."""
        if self.launches is None:
            return float(len(self.rows) - 1)
        return self.launches / max(self.occurrences, 1)

    @property
    def pattern(self) -> str | None:
        """The fused function the chain computes, when its ops match that function's formula
        (fusion/patterns.py says what is checked); never for a function's scope."""
        if self.scope:
            return None
        return match_pattern(self.chain_ops) if self.chain_ops else named_pattern(self.op_names)
