"""The docs stay what they say they are: the README's test command is the one CI runs, the README stays short,
docs/performance.md's table is the one its command generates from the kept results, and every local link in
the README and docs/ names a file that exists."""

from __future__ import annotations

import glob
import os
import re
import shlex
import shutil
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def _read(*parts: str) -> str:
    with open(os.path.join(ROOT, *parts)) as f:
        return f.read()


def test_the_readme_test_command_is_the_one_ci_runs():
    ci = _read(".ci", "run").splitlines()
    command = ci[ci.index("# --- the README's test command, verbatim ---") + 1]
    assert f"```\n{command}\n```" in _read("README.md")


def test_the_readme_is_short():
    assert len(_read("README.md").splitlines()) <= 300


def test_the_performance_table_is_generated_from_the_kept_results(tmp_path):
    page = _read("docs", "performance.md")
    block = re.search(r"```\n(python -m benchmarks\.perf_table .*?)\n```", page, re.S)
    assert block, "docs/performance.md names the command that makes its table"
    args = shlex.split(block.group(1).replace("\\\n", " "))
    args = [x for a in args for x in (sorted(glob.glob(a, root_dir=ROOT)) if "*" in a else [a])]  # as a shell would
    assert args[:3] == ["python", "-m", "benchmarks.perf_table"] and args[-2] == "--write"
    copy = tmp_path / "performance.md"
    shutil.copy(os.path.join(ROOT, "docs", "performance.md"), copy)
    subprocess.run([sys.executable, *args[1:-1], str(copy)], cwd=ROOT, check=True, capture_output=True)
    assert copy.read_text() == page


def test_local_links_name_files_that_exist():
    pages = ["README.md", "benchmarks/README.md", "validation/README.md"]
    pages += [f"docs/{n}" for n in sorted(os.listdir(os.path.join(ROOT, "docs"))) if n.endswith(".md")]
    missing = []
    for page in pages:
        for target in re.findall(r"\]\(([^)#]+)(?:#[^)]*)?\)", _read(page)):
            if "://" in target:
                continue
            path = os.path.normpath(os.path.join(ROOT, os.path.dirname(page), target))
            if not os.path.exists(path):
                missing.append(f"{page}: {target}")
    assert not missing
