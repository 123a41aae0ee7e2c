"""brrrtui's hook in the processes a distributed launcher (torchrun, or a script that starts its own ranks with
torch.multiprocessing.spawn) starts; this folder is first on their PYTHONPATH. A worker rank gets the capture
agent (brrrtui.capture.worker); every process then runs the `sitecustomize` it would have run without brrrtui,
if there is one. Nothing here may fail the process."""

import os
import sys


def _brrrtui() -> None:
    here = os.path.dirname(os.path.abspath(__file__))
    sys.path[:] = [p for p in sys.path if os.path.abspath(p or ".") != here]  # invisible to the script
    spawned = os.environ.get("BRRRTUI_SPAWN") == "1"  # ranks found when they join a process group
    if not os.environ.get("BRRRTUI_DIST_DIR") or ("RANK" not in os.environ and not spawned):
        return
    root = os.path.dirname(os.path.dirname(os.path.dirname(here)))
    sys.path.insert(0, root)
    try:
        from brrrtui.capture import worker
    finally:
        sys.path.remove(root)
    worker.start()


def _chain() -> None:
    """Run the next sitecustomize on sys.path (the user's or the environment's), as Python would have."""
    import importlib.machinery
    import importlib.util

    spec = importlib.machinery.PathFinder.find_spec("sitecustomize", sys.path)
    if spec is None or spec.loader is None:
        return
    module = importlib.util.module_from_spec(spec)
    sys.modules["sitecustomize"] = module
    spec.loader.exec_module(module)


try:
    _brrrtui()
except Exception as e:  # noqa: BLE001 - the script must run even if brrrtui cannot trace it
    print(f"brrrtui: this rank is not traced: {e.__class__.__name__}: {e}", file=sys.stderr)
_chain()
