import os
import subprocess
import sys

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SCRIPTS = os.path.join(ROOT, "tests", "scripts")


def run_brrrtui(
    *args: str, cwd: str | None = None, timeout: float = 120, **kw
) -> subprocess.CompletedProcess:
    """Run the CLI as a user would, in a fresh interpreter (`python -m brrrtui`)."""
    env = dict(os.environ, PYTHONPATH=ROOT, BRRRTUI_CALIBRATE="0")
    env.update(kw.pop("env", {}))
    return subprocess.run([sys.executable, "-m", "brrrtui", *args], cwd=cwd or ROOT, env=env, capture_output=True,
                          text=True, timeout=timeout, **kw)  # fmt: skip


@pytest.fixture
def scripts() -> str:
    return SCRIPTS


def line_of(path: str, marker: str) -> int:
    """The line number of the line tagged `# L:<marker>` in a test script (formatters may move lines)."""
    with open(path) as f:
        for number, text in enumerate(f, 1):
            if f"# L:{marker}" in text:
                return number
    raise LookupError(f"no '# L:{marker}' in {path}")


@pytest.fixture(autouse=True)
def _snapshots_without_links(request, monkeypatch):
    """SVG snapshots are drawn with terminal hyperlinks off: an SVG does not show them, and a link's random id
    makes Rich split or merge the runs around it differently from run to run (tests/test_tui_paths.py checks
    the links)."""
    if "snap_compare" in request.fixturenames:
        monkeypatch.setenv("BRRRTUI_LINKS", "0")


# The quick lane, `python -m pytest -m "not slow"`, leaves out the tests marked `slow` here: whole files that
# drive the Textual UI or run real scripts under capture (a Python, a torch import and a recording each), the
# property-based harnesses (fuzz, signal timing), every SVG snapshot, and the tests of other files that took a second or more in a full run (pytest --durations=0;
# `*[ID]` names every test of a file run with that parameter, e.g. a fixture's). Plain `python -m pytest`
# (.ci/run) runs everything.
SLOW_FILES = {
    "test_capture_cpu.py",
    "test_compile_capture.py",
    "test_compiled_lines.py",
    "test_cpu_mode.py",
    "test_crash_safety.py",
    "test_foreign_traces.py",
    "test_fuzz_chrome.py",
    "test_live_lifecycle.py",
    "test_output_policy.py",
    "test_output_policy_fuzz.py",
    "test_ranks_e2e.py",
    "test_ranks_multinode.py",
    "test_ranks_spawn.py",
    "test_stream_e2e.py",
    "test_stream_fold_e2e.py",
    "test_stream_fold_tui.py",
    "test_signals.py",
    "test_signals_timing.py",
    "test_untrusted_fuzz.py",
}  # and every tests/test_tui_*.py
SLOW_TESTS = {
    "test_allocator.py::test_loading_a_trace_tunes_the_allocator_and_importing_the_capture_does_not",
    "test_causal_attention.py::test_is_causal_reads_the_profilers_concrete_inputs",
    "test_cli_errors.py::test_output_never_destroys_the_script_or_a_file_that_is_no_recording",
    "test_cli_errors.py::test_unreadable_inputs",
    "test_demo.py::test_the_demo_ui_starts_without_torch",
    "test_demo.py::test_the_demo_command_without_a_terminal_prints_the_report_without_torch",
    "test_diff.py::test_two_cpu_recordings_compare_cpu_time_per_line",
    "test_export_perfetto.py::test_a_damaged_block_is_a_note_or_a_trace_never_a_traceback",
    "test_export_perfetto.py::test_a_gzipped_export_and_a_damaged_block",
    "test_export_perfetto.py::test_the_exported_trace_reopens_with_the_same_verdicts",
    "test_incremental.py::test_recorded_h200_run_followed_window_by_window_equals_analyze",
    "test_incremental.py::test_the_live_app_updates_on_each_window_through_the_follower_and_the_newest_windows",
    "test_modules.py::test_capture_names_modules_and_library_lines_on_cpu",
    "test_output_safety.py::test_a_short_script_without_an_optimizer_gets_a_report_that_says_why_it_is_empty",
    "test_recording_format.py::test_the_format_1_fixtures_still_load",
    "test_recording_follow.py::test_a_format_1_recording_is_followed_as_it_loads",
    "test_sarif.py::test_the_hf_gpt2_vocabulary_finding_sits_on_its_line_with_saving_and_fix",
    "test_sarif.py::test_valid_against_the_sarif_2_1_0_schema_one_result_per_finding",
    "test_stream_fold.py::*[h200_hf_gpt2_steady]",  # its module fixture records the stream twice
}


def is_slow(item: pytest.Item) -> bool:
    file = os.path.basename(str(item.path))
    name, bracket, param = item.name.partition("[")
    return (
        file in SLOW_FILES
        or file.startswith("test_tui_")
        or f"{file}::{name}" in SLOW_TESTS
        or (bracket != "" and f"{file}::*[{param}" in SLOW_TESTS)
        or "snap_compare" in getattr(item, "fixturenames", ())
    )


@pytest.hookimpl(tryfirst=True)  # before `-m` selects on the marks
def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    for item in items:
        if is_slow(item) and item.get_closest_marker("slow") is None:
            item.add_marker(pytest.mark.slow)
