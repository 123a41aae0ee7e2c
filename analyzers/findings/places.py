"""Put each finding in its module: the nn.Module path and model-library line of the kernels it is about.

A finding about kernels from `model(...)` would otherwise point at that one line of the user's script. Its
place is the deepest module that holds at least PLACE_SHARE of the finding's GPU time (a chain spread over a
block's attention and MLP lands on the block), and the library line holding most of that time. Modules are
the module tree's folded nodes: repeated siblings folded by structure (`encoder_layer_*` for
`encoder_layer_0 … encoder_layer_11`, as `h.*` for `h.0 … h.11`), so a finding spread over every block lands
on the blocks, not on their container.
"""

from __future__ import annotations

from dataclasses import replace

import numpy as np

from analyzers.findings.library_knobs import library_knob, library_of
from analyzers.link.links import Links
from analyzers.results import Finding, Place
from analyzers.totals.modules import ModuleTree
from brrrtui.contract.model import Trace
from brrrtui.contract.modules import collapse, decode

PLACE_SHARE = 0.6


def place_findings(
    trace: Trace, links: Links, tree: ModuleTree | None, findings: list[Finding]
) -> list[Finding]:
    """`tree`: the analysis' module tree, whose nodes say how many modules each collapsed path folds."""
    instances: dict[tuple[int, str, str], int] = {}
    for n in tree.nodes if tree is not None else ():
        key = (n.depth, n.path, n.kind)
        instances[key] = max(instances.get(key, 0), n.instances)
    folded = tree.folded_paths if tree is not None else {}
    return [_placed(trace, links, f, instances, folded) for f in findings]


def _placed(
    trace: Trace,
    links: Links,
    f: Finding,
    instances: dict[tuple[int, str, str], int],
    folded: dict[int, tuple[str, ...]],
) -> Finding:
    rows = np.asarray([r for r in f.kernels if 0 <= r < len(trace.gpu)], dtype=np.int64)
    if not len(rows):
        return f
    dur = trace.gpu.dur_ns[rows].astype(np.float64)
    total = float(dur.sum())
    if total <= 0:
        return f
    time: dict[tuple[int, str, str], float] = {}  # inclusive, per (depth, collapsed path, class)
    for sid, ns in zip(links.kernel_module[rows].tolist(), dur.tolist(), strict=True):
        if sid < 0:
            continue
        paths = folded.get(sid)
        for depth, frame in enumerate(decode(trace.name(sid))):
            path = paths[depth] if paths is not None and depth < len(paths) else collapse(frame.path)
            key = (depth, path, frame.kind)
            time[key] = time.get(key, 0.0) + ns
    held = [k for k, ns in time.items() if ns >= PLACE_SHARE * total]
    if not held:
        return f
    depth, path, kind = max(held, key=lambda k: (k[0], time[k]))
    lib_ids = links.kernel_lib_line[rows]
    lib = None
    if (lib_ids >= 0).any():
        ok = lib_ids >= 0
        ids, inv = np.unique(lib_ids[ok], return_inverse=True)
        best = int(ids[int(np.argmax(np.bincount(inv, weights=dur[ok])))])
        lib = trace.lines[best] if best < len(trace.lines) else None
    label = path or kind
    count = instances.get((depth, path, kind), 1)
    knob = library_knob(f.kind, path, kind, lib)
    place = Place(label, kind, max(count, 1), lib, knob, library_of(lib) if knob else None)
    return replace(f, place=place)
