"""Which files are "the user's code" (shown with a gutter) and which are libraries (folded into the caller)."""

from __future__ import annotations

import importlib.util
import os
import sys
import sysconfig
from functools import lru_cache

# Path fragments that mark library code wherever it is installed (also in traces recorded on other machines).
_LIBRARY_MARKERS = ("site-packages", "dist-packages", "/lib/python3")
# Code that torch.compile generates: Inductor's output code and Triton's kernels live in their caches (by
# default under the temp folder, `torchinductor_<user>`, and `~/.triton`), never in the user's tree.
_GENERATED_MARKERS = ("/torchinductor_", "/.triton/", "/triton/cache/")
# ... or wherever the script's environment puts those caches
_CACHE_DIR_VARIABLES = ("TORCHINDUCTOR_CACHE_DIR", "TRITON_CACHE_DIR")


def _is_generated(path: str) -> bool:
    if any(m in path for m in _GENERATED_MARKERS):
        return True
    for variable in _CACHE_DIR_VARIABLES:
        folder = os.environ.get(variable)
        if folder and os.path.isabs(folder) and path.startswith(folder.rstrip(os.sep) + os.sep):
            return True
    return False


def _library_roots() -> tuple[str, ...]:
    paths = sysconfig.get_paths()
    roots = {paths.get(k) for k in ("stdlib", "platstdlib", "purelib", "platlib")}
    # brrrtui's own checkout or install
    here = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    roots |= {os.path.join(here, "brrrtui"), os.path.join(here, "analyzers")}
    return tuple(sorted(r for r in roots if r))


LIBRARY_ROOTS = _library_roots()

# Kineto writes library frames relative to site-packages (`torch/nn/modules/conv.py`); these are always
# libraries even when the trace is opened on a machine without them installed.
_KNOWN_LIBRARIES = frozenset(
    "torch torchvision torchaudio torchtext transformers triton numpy apex timm accelerate deepspeed "
    "lightning pytorch_lightning xformers flash_attn einops datasets tokenizers scipy sklearn".split()
)


@lru_cache(maxsize=1024)
def _is_installed_package(top: str) -> bool:
    if top in _KNOWN_LIBRARIES:
        return True
    try:
        spec = importlib.util.find_spec(top)
    except (ImportError, ValueError):
        return False
    origin = (spec.origin or "") if spec else ""
    return bool(origin) and any(origin.startswith(r + os.sep) for r in LIBRARY_ROOTS)


def is_user_file(path: str) -> bool:
    """True for the script's own files; False for torch, site-packages, the standard library, brrrtui itself,
    code torch.compile generated, and pseudo-files such as `<frozen runpy>` or `<string>`."""
    if not path or path.startswith("<"):
        return False
    if any(m in path for m in _LIBRARY_MARKERS) or _is_generated(path):
        return False
    if not os.path.isabs(path):
        top, sep, _ = path.partition("/")
        if not sep:
            return path.removesuffix(".py") not in sys.stdlib_module_names
        return not (top.isidentifier() and (top in sys.stdlib_module_names or _is_installed_package(top)))
    return not any(path.startswith(r + os.sep) for r in LIBRARY_ROOTS)


_SITE_MARKERS = ("site-packages", "dist-packages")
_STDLIB_ROOTS = tuple(sorted({p for k in ("stdlib", "platstdlib") if (p := sysconfig.get_paths().get(k))}))
_OWN_ROOTS = tuple(r for r in LIBRARY_ROOTS if r.endswith((os.sep + "brrrtui", os.sep + "analyzers")))


def package_path(path: str) -> str | None:
    """A file of an installed package, from its package down (`transformers/activations.py`); None for a
    file outside site-packages / dist-packages."""
    normal = path.replace("\\", "/")
    for marker in _SITE_MARKERS:
        at = normal.find(marker + "/")
        if at >= 0:
            return normal[at + len(marker) + 1 :]
    return None


def is_model_library_file(path: str) -> bool:
    """True for a library file that holds model code a user reads and configures (transformers, timm,
    torchvision, diffusers …): the "innermost library line" of an op. False for the user's own files, torch
    itself (its modules and functional wrappers are the same for every model), the standard library,
    brrrtui, generated code and pseudo-files."""
    if not path or path.startswith("<") or is_user_file(path):
        return False
    if _is_generated(path):
        return False
    rel = package_path(path)
    if rel is None:
        if os.path.isabs(path) and any(path.startswith(r + os.sep) for r in _STDLIB_ROOTS + _OWN_ROOTS):
            return False
        rel = path.replace("\\", "/")
    top = rel.split("/", 1)[0]
    return top not in ("torch", "functorch", "typing_extensions") and top.removesuffix(".py") not in (
        sys.stdlib_module_names
    )
