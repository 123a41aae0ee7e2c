"""`brrrtui view`: the file is read once (by the UI on a terminal; off a terminal the CLI prints the report
instead), the header says how far reading and analysing are from the first frame, and a file the UI cannot read
still ends in one line and exit 2."""

import asyncio
import os
import threading

import pytest
from tui_fakes import FIXTURE, analysed, fake_analyze, run_async, wait_until

from brrrtui import cli
from brrrtui.contract.units import fmt_mem
from brrrtui.recording import load
from brrrtui.session import events_in
from brrrtui.tui import app as tui_app


@pytest.fixture
def loads(monkeypatch):
    """Every call of load_trace, the CLI's and the UI's (brrrtui.session looks it up at each call)."""
    calls = []
    real = load.load_trace

    def counting(path):
        calls.append(path)
        return real(path)

    monkeypatch.setattr(load, "load_trace", counting)
    return calls


class Headless:
    """Stands in for App.run on a terminal: the app runs headless until its first analysis or its exit."""

    def __init__(self, app):
        self.app = app

    @property
    def load_error(self):
        return self.app.load_error

    def run(self):
        async def go():
            async with self.app.run_test(size=(100, 30)) as pilot:
                app = self.app
                await wait_until(pilot, lambda: app.analyses >= 1 or app.load_error is not None)

        asyncio.run(go())


@pytest.fixture
def on_a_terminal(monkeypatch):
    monkeypatch.setattr(cli, "_tui_available", lambda: True)
    made = []
    real = tui_app.make_app

    def make(*args, **kwargs):
        made.append(Headless(real(*args, **kwargs)))
        return made[-1]

    monkeypatch.setattr(tui_app, "make_app", make)
    return made


def test_view_on_a_terminal_reads_the_file_once(loads, on_a_terminal):
    assert cli.main(["view", FIXTURE]) == 0
    assert loads == [FIXTURE]
    assert on_a_terminal[0].app.snapshot is not None


def test_view_without_a_terminal_prints_the_report_and_opens_no_ui(loads, monkeypatch, capsys):
    monkeypatch.setattr(tui_app, "make_app", lambda *a, **kw: pytest.fail("the UI opened off a terminal"))
    assert cli.main(["view", FIXTURE]) == 0
    assert loads == [FIXTURE]
    assert capsys.readouterr().out.startswith("brrrtui report: ")


@run_async
async def test_an_app_given_the_trace_does_not_read_the_file(loads):
    app = tui_app.make_app(FIXTURE, None, None, analyze=fake_analyze, trace=load.load_trace(FIXTURE))
    async with app.run_test(size=(100, 30)) as pilot:
        await analysed(pilot)
        assert app.snapshot is not None
    assert loads == [FIXTURE]  # the call above only


def test_a_file_the_ui_cannot_read_is_one_line_and_exit_2(tmp_path, on_a_terminal, capsys):
    bad = tmp_path / "garbage.brrr"
    bad.write_bytes(os.urandom(2048))
    assert cli.main(["view", str(bad)]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert err == [
        f"brrrtui: error: {bad} is neither a brrrtui recording nor a torch.profiler .json/.json.gz trace"
    ]


@run_async
async def test_the_header_shows_reading_then_analysing_from_the_first_frame(monkeypatch):
    half_read, go_on, analysing, finish = (threading.Event() for _ in range(4))
    real_load = load.load_trace
    size = os.path.getsize(FIXTURE)

    def slow_load(path):
        with open(path, "rb", buffering=0) as f:  # as the Chrome reader does: front to back
            f.read(size // 2)
            half_read.set()
            go_on.wait(20)
        return real_load(path)

    def slow_analyze(trace, *args, **kwargs):
        analysing.set()
        finish.wait(20)
        return fake_analyze(trace, *args, **kwargs)

    monkeypatch.setattr(load, "load_trace", slow_load)
    clock = iter(x * 0.5 for x in range(10**6))
    app = tui_app.make_app(FIXTURE, None, None, analyze=slow_analyze, clock=lambda: next(clock))

    def header():
        return str(app.main.query_one("#status").render())

    async with app.run_test(size=(120, 30)) as pilot:
        assert "reading" in header()  # the first frame, before the worker has read a byte
        await wait_until(pilot, lambda: half_read.is_set() and "% of" in header())
        assert f"reading 50% of {fmt_mem(size)}… " in header()
        go_on.set()
        await wait_until(pilot, lambda: analysing.is_set() and "analysing" in header())
        assert f"analysing {events_in(real_load(FIXTURE)):,} events… " in header()
        finish.set()
        await analysed(pilot)
        assert "reading" not in header() and "analysing" not in header()


def test_q_while_the_file_is_read_does_not_wait_for_the_reading(monkeypatch):
    """The reading goes on in a thread the interpreter does not wait for: `q` ends the app, and the process
    can exit, before a big file has been read."""
    release, finished = threading.Event(), threading.Event()
    real_load = load.load_trace

    def slow_load(path):
        release.wait(30)
        finished.set()
        return real_load(path)

    monkeypatch.setattr(load, "load_trace", slow_load)
    app = tui_app.make_app(FIXTURE, None, None, analyze=fake_analyze)

    async def go():
        async with app.run_test(size=(100, 30)) as pilot:
            await wait_until(pilot, lambda: "reading" in str(app.main.query_one("#status").render()))
            await pilot.press("q")

    asyncio.run(go())  # returns once the app's worker threads are done
    assert not finished.is_set()  # the reading had not ended
    release.set()
