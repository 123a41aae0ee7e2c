"""The module tree and findings' places as text and JSON (the report's `modules` section).

modules (GPU + idle time per step, folded by structure; 12 blocks are one `h.*` row, as twelve
`encoder_layer_N` would be one `encoder_layer_*` row)
  GPT2LMHeadModel                        55.2 ms  98%  memory   …
    transformer                          34.3 ms  61%  memory
      h.* ×12  GPT2Block                 33.8 ms  60%  memory
…
  outside any module                      1 ms    2%
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from analyzers.results import Analysis, Finding, Place
from analyzers.totals.modules import ModuleNode, ModuleTree
from brrrtui.contract.model import SourceLine
from brrrtui.contract.units import fmt_ns, fmt_pct
from brrrtui.present.finding_words import action, knob
from brrrtui.present.paths import Phrase, readable_path

MIN_SHARE = 0.01  # nodes holding less of the step are left out of the text (the JSON keeps them all)
MAX_DEPTH = 6


def library_path(line: SourceLine) -> str:
    """`transformers/activations.py:66` rather than the site-packages path it came from."""
    return f"{readable_path(line.file)}:{line.line}"


def _line_json(line: SourceLine | None) -> dict[str, Any] | None:
    if line is None:
        return None
    return {
        "file": line.file,
        "line": int(line.line),
        "function": line.function,
        "display": library_path(line),
    }


def modules_json(tree: ModuleTree | None) -> dict[str, Any] | None:
    if tree is None:
        return None
    return {
        "steps": tree.steps,
        "gpu_ns": tree.total_gpu_ns,
        "outside_gpu_ns": tree.outside_gpu_ns,
        "outside_idle_ns": tree.outside_idle_ns,
        "idle_ns": tree.idle_ns,
        "nodes": [_node_json(n) for n in tree.nodes],
    }


def _node_json(n: ModuleNode) -> dict[str, Any]:
    return {
        "path": n.label,
        "name": n.name,
        "class": n.kind,
        "depth": n.depth,
        "instances": n.instances,
        "gpu_ns": n.gpu_ns,
        "self_gpu_ns": n.self_gpu_ns,
        "idle_ns": n.idle_ns,
        "regime": n.regime.value,
        "gpu_ns_by_regime": {r.value: ns for r, ns in n.gpu_ns_by_regime.items()},
        "kernels": n.kernels,
        "flops": n.flops,
        "bytes": n.bytes,
        "library_line": _line_json(n.lib_line),
        "user_line": _line_json(n.user_line),
    }


def place_json(place: Place | None) -> dict[str, Any]:
    if place is None:
        return {"module": None, "library_line": None, "knob": None}
    return {
        "module": {"path": place.module, "class": place.module_kind, "instances": place.instances},
        "library_line": _line_json(place.library_line),
        "knob": knob(place),
    }


def place_text(place: Place) -> str:
    """`in transformer.h.*.mlp.act (NewGELUActivation ×12) · transformers/activations.py:66`."""
    count = f" ×{place.instances}" if place.instances > 1 else ""
    where = f"in {place.module} ({place.module_kind}{count})"
    return where + (f" · {library_path(place.library_line)}" if place.library_line else "")


def finding_place_lines(f: Finding) -> list[str]:
    if f.place is None:
        return []
    out = [f"     {place_text(f.place)}"]
    if f.place.knob:
        out.append(f"     → or, without editing the library: {knob(f.place)}")
    return out


def modules_text(a: Analysis, width: int = 44) -> list[str]:
    tree = a.modules
    if tree is None or not tree.nodes:
        return []
    step = tree.total_gpu_ns + tree.idle_ns
    per = tree.per_step
    out = [
        "",
        f"modules (GPU + idle time{' per step' if tree.steps else ''}, folded by structure: "
        "`layer.*` holds every layer of one shape, whatever its name)",
    ]
    for n in tree.nodes:
        share = (n.gpu_ns + n.idle_ns) / step if step else 0.0
        if share < MIN_SHARE or n.depth > MAX_DEPTH:
            continue
        count = f" ×{n.instances}" if n.instances > 1 else ""
        label = f"{'  ' * n.depth}{n.name}{count}  {n.kind if n.depth else ''}".rstrip()
        lib = f"  {library_path(n.lib_line)}" if n.lib_line else ""
        out.append(
            f"  {label:<{width}} {fmt_ns(per(n.gpu_ns)):>9} gpu {fmt_ns(per(n.idle_ns)):>9} idle"
            f" {fmt_pct(share):>5}  {n.regime.value:<8}{lib}"
        )
    outside = tree.outside_gpu_ns + tree.outside_idle_ns
    out.append(
        f"  {'outside any module (optimizer, loss, data)':<{width}} {fmt_ns(per(tree.outside_gpu_ns)):>9} gpu"
        f" {fmt_ns(per(tree.outside_idle_ns)):>9} idle {fmt_pct(outside / step if step else 0):>5}"
    )
    return out


def library_lines_text(a: Analysis, top: int = 10) -> list[str]:
    """Where in a model library the GPU time went, when no module tree says it: a library model compiled
    whole (its kernels carry the library lines Inductor traced them to, not a module path)."""
    if a.modules is not None or not a.library_lines:
        return []
    per = a.steps_analysed or 1
    total = sum(s.gpu_ns for s in a.library_lines)
    out = [
        "",
        f"library lines (GPU time{' per step' if a.steps_analysed else ''}, of the kernels that have one)",
    ]
    for s in sorted(a.library_lines, key=lambda s: -s.gpu_ns)[:top]:
        share = s.gpu_ns / total if total else 0.0
        out.append(
            f"  {library_path(s.line):<60} {fmt_ns(s.gpu_ns / per):>9} {fmt_pct(share):>5}  {s.regime.value}"
        )
    return out


def node_label(n: ModuleNode, tree: ModuleTree, width: int = 0) -> str:
    """One row of the TUI's module tree: `h.* ×12  GPT2Block      33.8 ms  61%  memory` (GPU + idle time per
    step); `width` pads the name so the figures line up under a tree's indentation."""
    step = tree.total_gpu_ns + tree.idle_ns
    share = (n.gpu_ns + n.idle_ns) / step if step else 0.0
    count = f" ×{n.instances}" if n.instances > 1 else ""
    kind = f"  {n.kind}" if n.depth else ""
    name = f"{n.name}{count}{kind}"
    return f"{name:<{width}}  {fmt_ns(tree.per_step(n.gpu_ns + n.idle_ns)):>9}  {fmt_pct(share):>5}  {n.regime.value}"


def node_details(n: ModuleNode, a: Analysis, locate: Callable[[SourceLine], str] = library_path) -> list[str]:
    """The details under the TUI's module tree for the highlighted module; its lines are written by `locate`
    (the TUI's give Locations, which it draws as links) and kept as parts (`paths.Phrase`)."""
    tree = a.modules
    assert tree is not None
    per = tree.per_step
    r = n.gpu_ns_by_regime
    count = f" ({n.instances} modules folded)" if n.instances > 1 else ""
    out = [
        f"{n.label}  {n.kind}{count}",
        f"GPU {fmt_ns(per(n.gpu_ns))} (own kernels {fmt_ns(per(n.self_gpu_ns))}) · idle before its kernels "
        f"{fmt_ns(per(n.idle_ns))} · {n.kernels / max(tree.steps, 1):.0f} kernels"
        f"{' per step' if tree.steps else ''}",
        "by regime: " + " · ".join(f"{reg.value} {fmt_ns(per(ns))}" for reg, ns in r.items()),
    ]
    if n.lib_line:
        out.append(Phrase("library line: ", locate(n.lib_line), f" ({n.lib_line.function})"))
    if n.user_line:
        out.append(Phrase("called from: ", locate(n.user_line)))
    for f in a.findings:
        if f.place is not None and (f.place.module == n.label or f.place.module.startswith(n.path + ".")):
            saving = f" ~{fmt_ns(f.saving_ns)}" if f.saving_ns else ""
            out.append(f"finding [{f.kind}]{saving} in {f.place.module}: {action(f)}")
            if f.place.knob:
                out.append(f"  or: {knob(f.place)}")
    return out
