"""brrrtui.runtime.parallel: passes on threads give the results, the errors and the report of passes run one by one."""

import json
import threading
import time

import pytest

from analyzers.analyze import analyze
from brrrtui.present.report import to_json
from brrrtui.runtime import parallel
from tests.test_h200_recordings import open_fixture


def test_results_come_back_in_the_calls_order_from_at_most_threads_threads(monkeypatch):
    """Five calls on two threads (the caller's and one more), never more than two running at once."""
    monkeypatch.setattr(parallel, "THREADS", 2)
    running, most, lock = [0], [0], threading.Lock()

    def call(k: int):
        def run() -> tuple[int, str]:
            with lock:
                running[0] += 1
                most[0] = max(most[0], running[0])
            time.sleep(0.05)
            with lock:
                running[0] -= 1
            return k, threading.current_thread().name

        return run

    out = parallel.concurrently(*(call(k) for k in range(5)))
    assert [k for k, _ in out] == list(range(5))
    assert most[0] == 2
    assert threading.current_thread().name in {name for _, name in out} and len({n for _, n in out}) == 2


def test_one_thread_runs_the_calls_in_order_on_the_callers_thread(monkeypatch):
    monkeypatch.setattr(parallel, "THREADS", 1)
    seen: list[int] = []
    out = parallel.concurrently(lambda: seen.append(1) or "a", lambda: seen.append(2) or "b")
    assert out == ["a", "b"] and seen == [1, 2]
    names = parallel.concurrently(
        lambda: threading.current_thread().name, lambda: threading.current_thread().name
    )
    assert set(names) == {threading.current_thread().name}


@pytest.mark.parametrize("threads", [1, 2])
def test_the_first_error_in_the_calls_order_is_raised_once_every_started_call_has_ended(monkeypatch, threads):
    monkeypatch.setattr(parallel, "THREADS", threads)
    started, finished = threading.Event(), threading.Event()

    def first() -> None:
        time.sleep(0.02)  # the other thread takes the second call meanwhile
        raise ValueError("first")

    def slow_then_fail() -> None:
        started.set()
        time.sleep(0.05)
        finished.set()
        raise KeyError("second")

    with pytest.raises(ValueError, match="first"):
        parallel.concurrently(first, slow_then_fail)
    # on threads the second call runs beside the first and is not left running behind the raise; one by
    # one it never starts
    assert started.is_set() == finished.is_set() == (threads == 2)


def test_no_call_starts_once_one_has_failed(monkeypatch):
    """As one by one: an error (or Ctrl-C, caught the same way) is not held back behind the calls not yet
    started."""
    monkeypatch.setattr(parallel, "THREADS", 2)
    started: list[int] = []

    def fail() -> None:
        started.append(0)
        raise ValueError("first")

    def slow(k: int) -> None:
        started.append(k)
        time.sleep(0.05)

    with pytest.raises(ValueError, match="first"):
        parallel.concurrently(fail, *(lambda k=k: slow(k) for k in range(1, 9)))
    assert len(started) <= 3, started  # the failed call, and at most one beside it plus the one it ran next


def test_a_recordings_report_is_the_same_with_passes_on_threads_or_one_by_one(monkeypatch, tmp_path_factory):
    trace, _ = open_fixture(tmp_path_factory, "h200_hf_gpt2_modules")
    reports = []
    for threads in (1, 2):
        monkeypatch.setattr(parallel, "THREADS", threads)
        reports.append(json.dumps(to_json(analyze(trace)), sort_keys=True))
    assert reports[0] == reports[1]
    assert '"findings": []' not in reports[0]  # a report with findings, lines and modules to compare
