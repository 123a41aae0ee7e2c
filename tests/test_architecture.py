"""The layout is part of the design: each layer imports only the layers it sits on. docs/architecture.md draws
the layers; this file enforces them. (A module holds one concept whatever its length: no line count is enforced.)"""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent

# Each layer and the layers it may import (besides itself). A module's layer is the first of these prefixes
# that its dotted name starts with; every product module must have one.
LAYERS: dict[str, set[str]] = {
    "brrrtui.runtime": set(),  # process settings any layer may use: the allocator, threads for numpy passes
    "brrrtui.contract": {"brrrtui.runtime"},
    "brrrtui.capture": {"brrrtui.contract", "brrrtui.runtime"},
    "analyzers": {"brrrtui.contract", "brrrtui.runtime"},
    "brrrtui.recording": {"brrrtui.contract", "brrrtui.runtime"},
    "brrrtui.record": {"brrrtui.contract", "brrrtui.recording", "brrrtui.runtime"},
    "brrrtui.present": {"brrrtui.contract", "analyzers", "brrrtui.runtime"},
    # the headless core every front end uses: it opens, follows and analyses; it never imports the UI
    "brrrtui.session": {"brrrtui.contract", "analyzers", "brrrtui.recording", "brrrtui.present", "brrrtui.runtime"},
    # the UI renders what the session hands it and dispatches keys: it reads no file itself (the live feed's
    # events come from the recorder, brrrtui.record.feed)
    "brrrtui.tui": {"brrrtui.contract", "analyzers", "brrrtui.record", "brrrtui.present", "brrrtui.session",
                    "brrrtui.runtime"},
    "brrrtui.cli": {"brrrtui.contract", "analyzers", "brrrtui.recording", "brrrtui.record", "brrrtui.present",
                    "brrrtui.session", "brrrtui.tui", "brrrtui.capture", "brrrtui", "brrrtui.commands",
                    "brrrtui.runtime"},
    "brrrtui.commands": {"brrrtui.contract", "analyzers", "brrrtui.recording", "brrrtui.record", "brrrtui.present",
                         "brrrtui.session", "brrrtui.tui", "brrrtui", "brrrtui.runtime"},  # cli.py dispatches to them
    "brrrtui.__main__": {"brrrtui.cli"},
    "brrrtui": set(),  # brrrtui/__init__.py (the version, which any layer may read), numpy_start.py (for cli)
}  # fmt: skip
UI_PACKAGES = {"textual", "rich"}
UI_FREE = {"brrrtui.contract", "brrrtui.capture", "analyzers", "brrrtui.recording", "brrrtui.record",
           "brrrtui.present", "brrrtui.session", "brrrtui.runtime"}  # fmt: skip


def product_modules() -> dict[str, Path]:
    out = {}
    for top in ("brrrtui", "analyzers"):
        for path in sorted((ROOT / top).rglob("*.py")):
            parts = list(path.relative_to(ROOT).with_suffix("").parts)
            if parts[-1] == "__init__":
                parts.pop()
            out[".".join(parts)] = path
    return out


def layer_of(module: str) -> str:
    for layer in sorted(LAYERS, key=len, reverse=True):
        if module == layer or module.startswith(layer + "."):
            return layer
    raise AssertionError(f"{module} belongs to no layer: add it to LAYERS and docs/architecture.md")


def imported_modules(path: Path, module: str) -> set[str]:
    tree = ast.parse(path.read_text(), str(path))
    package = module if path.name == "__init__.py" else module.rpartition(".")[0]
    found = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found |= {a.name for a in node.names}
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")
                base = base[: len(base) - (node.level - 1)]
                found.add(".".join(base + ([node.module] if node.module else [])))
            elif node.module:
                found.add(node.module)
                found |= {f"{node.module}.{a.name}" for a in node.names} & MODULES.keys()
    return found


MODULES = product_modules()


@pytest.mark.parametrize("module", sorted(MODULES))
def test_each_module_imports_only_the_layers_below_it(module):
    layer = layer_of(module)
    allowed = LAYERS[layer] | {layer}
    for name in imported_modules(MODULES[module], module):
        top = name.split(".")[0]
        if top in UI_PACKAGES:
            assert layer not in UI_FREE, f"{module} ({layer}) imports {name}: this layer is UI-free"
        if top not in ("brrrtui", "analyzers") or name in ("brrrtui", "analyzers"):  # the root: the version
            continue
        target = layer_of(name)
        assert target in allowed, f"{module} ({layer}) imports {name} ({target}); allowed: {sorted(allowed)}"


def test_every_layer_exists_and_holds_modules():
    layers = {layer_of(m) for m in MODULES}
    assert layers == set(LAYERS), set(LAYERS) ^ layers


def test_analysis_and_present_load_without_ui_or_torch():
    code = (
        "import sys, analyzers.analyze, brrrtui.present.report, brrrtui.recording.load, brrrtui.session\n"
        "bad = {'textual', 'rich', 'torch'} & {m.split('.')[0] for m in sys.modules}\n"
        "assert not bad, bad\n"
    )
    subprocess.run([sys.executable, "-c", code], check=True, cwd=ROOT)


def test_no_format_skips_in_product_code():
    marked = [str(p.relative_to(ROOT)) for p in MODULES.values() if "fmt: skip" in p.read_text()]
    assert not marked, marked


def test_the_pure_layers_are_typed_strictly():
    text = (ROOT / "pyproject.toml").read_text()
    for module in ("analyzers.*", "brrrtui.recording.*", "brrrtui.contract.*"):
        assert f'"{module}"' in text
    assert "disallow_untyped_defs = true" in text and "disallow_any_generics = true" in text
