"""`brrrtui diff --view`: the comparison of a fusion fix's two recordings (tests/test_diff.py) in the UI."""

from __future__ import annotations

import os

import pytest
from test_diff import AFTER_SRC, BEFORE_SRC, T0, build_run, write_recording
from tui_fakes import run_async

from brrrtui.commands.diff import compute_diff
from brrrtui.present.diff_report import header_text, table_rows
from brrrtui.tui.diff_app import DiffApp


@pytest.fixture
def fix(tmp_path, monkeypatch):
    """The two recordings in the cwd, their scripts named by relative paths (stable pictures)."""
    monkeypatch.chdir(tmp_path)
    for folder, src, fused, name, step_ms in (
        ("v1", BEFORE_SRC, False, "before", 10.0),
        ("v2", AFTER_SRC, True, "after", 8.0),
    ):
        os.mkdir(folder)
        with open(f"{folder}/train.py", "w") as f:
            f.write(src)
        write_recording(
            build_run(f"{folder}/train.py", fused, step_ms), f"{name}.brrr", f"{folder}/train.py", T0
        )
    d = compute_diff("before.brrr", "after.brrr")
    return DiffApp(header_text(d, "before.brrr", "after.brrr"), table_rows(d), d.unit)


@run_async
async def test_rows_and_their_colours(fix):
    app = fix
    async with app.run_test(size=(120, 36)) as pilot:
        await pilot.pause()
        lines = app.query_one("#lines")
        assert lines.row_count == 4 and app.focused is lines
        gone = [lines.get_row_at(i) for i in range(3)]
        assert all(str(row[4]).endswith("(gone)") for row in gone)
        success, error = app.current_theme.success, app.current_theme.error
        assert all(row[0].style == success for row in gone)  # faster, beyond the noise
        new = lines.get_row_at(3)
        assert str(new[4]) == "v2/train.py:6 (new)" and new[0].style == error  # a new 1 ms line: slower
        run = app.query_one("#run")
        assert [str(run.get_row_at(i)[0]) for i in range(run.row_count)] == [
            "step time",
            "GPU compute",
            "GPU memory",
            "GPU overhead",
            "GPU idle",
        ]
        assert run.get_row_at(1)[0].style == ""  # the GEMM's compute time did not change
        await pilot.press("q")


def test_diff_view_120x36(snap_compare, fix):
    assert snap_compare(fix, terminal_size=(120, 36))
