"""brrrtui.runtime.allocator: the processes that analyse tune the allocator; the user's script and the recorder do not."""

import os
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

PROBE = """
import importlib, pkgutil, sys
import numpy as np
import brrrtui.capture, brrrtui.record
from brrrtui.runtime import allocator
for pkg in (brrrtui.capture, brrrtui.record):  # every module the script's process and the recorder load
    for m in pkgutil.iter_modules(pkg.__path__):
        importlib.import_module(pkg.__name__ + "." + m.name)
hugepage = np._core.multiarray._set_madvise_hugepage
print(allocator._done, hugepage(hugepage(True)))  # (tuned?, numpy's huge-page advice on?)
from brrrtui.recording.load import load_trace
load_trace(sys.argv[1])
print(allocator._done, hugepage(hugepage(False)))
"""


def test_loading_a_trace_tunes_the_allocator_and_importing_the_capture_does_not():
    fixture = os.path.join(ROOT, "tests", "fixtures", "resnet50_h200_step.json.gz")
    out = subprocess.run(
        [sys.executable, "-c", PROBE, fixture], cwd=ROOT, capture_output=True, text=True, timeout=120
    )
    assert out.returncode == 0, out.stderr[-2000:]
    assert out.stdout.split() == ["False", "True", "True", "False"]


VIEW_PROBE = """
import sys, threading
import brrrtui.cli as cli
from brrrtui.runtime import allocator
from brrrtui.tui.app import BrrrApp

seen = []

def run(app):  # the UI, not started: what the allocator was when it would have started its threads
    seen.append((allocator._done, threading.active_count()))

BrrrApp.run = run
cli._tui_available = lambda: True  # a terminal: the UI reads the file, not the CLI (no load_trace here)
cli.main(["view", sys.argv[1]])
print(seen)
"""


def test_view_tunes_the_allocator_before_its_ui_starts_a_thread():
    fixture = os.path.join(ROOT, "tests", "fixtures", "resnet50_h200_step.json.gz")
    out = subprocess.run(
        [sys.executable, "-c", VIEW_PROBE, fixture], cwd=ROOT, capture_output=True, text=True, timeout=120
    )
    assert out.returncode == 0, out.stderr[-2000:]
    assert out.stdout.split("\n")[0] == "[(True, 1)]"  # tuned, and only the main thread exists yet
