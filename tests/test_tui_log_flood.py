"""A script that floods its output: the live UI drains the feed in chunks with keys handled in between, draws
only the newest lines of each batch (says how many it did not), keeps brrrtui's own lines and the exit line,
and its memory and work do not grow with the flood."""

from tui_fakes import analysed, fake_analyze, run_async, wait_until, write_recording

from brrrtui.record.feed import Exited, Feed, LogLine, TelemetrySample
from brrrtui.tui import live
from brrrtui.tui.app import make_app
from brrrtui.tui.widgets.log_pane import BATCH, LogPane

SIZE = (120, 36)
FLOOD = 50_000


def log_rows(pane: LogPane) -> list[str]:
    return [strip.text.rstrip() for strip in pane.lines]


@run_async
async def test_a_flood_is_drawn_as_its_newest_lines_and_says_how_many_it_left_out(tmp_path):
    path = write_recording(str(tmp_path / "run.brrr"), windows=1)
    feed = Feed()
    app = make_app(path, feed, "flood.py", analyze=fake_analyze, poll_s=0.02)
    async with app.run_test(size=SIZE) as pilot:
        await analysed(pilot)
        pane = app.main.log_pane
        before, written = len(pane.lines), pane.lines_written  # the analysis's opening lines
        drains = []
        real = app.drain_feed

        def counting() -> None:
            drains.append(1)
            real()

        app.drain_feed = counting
        for k in range(FLOOD):
            feed.put(LogLine("stdout", f"line {k}"))
            if k == FLOOD // 2:
                feed.put(LogLine("brrrtui", "a note of brrrtui's own"))
                feed.put(TelemetrySample(1, 50.0, 1e9, 100.0, 1500.0))
        feed.put(Exited(0))
        await wait_until(pilot, lambda: pane.lines_written >= written + FLOOD + 2)
        await pilot.pause()
        rows = log_rows(pane)[before:]
        assert pane.lines_written == written + FLOOD + 2  # every line counted, the exit line too
        assert len(rows) <= BATCH + 3  # but only the newest drawn (one batch, or a few)
        assert len(drains) >= FLOOD // live.DRAIN_CHUNK  # in chunks: a key waits for one chunk at most
        assert "brrrtui: a note of brrrtui's own" in rows  # never left out
        skipped = [r for r in rows if "lines not shown" in r]
        assert skipped and pane.lines_skipped > FLOOD - 2 * BATCH
        assert rows[-2:] == [f"line {FLOOD - 1}", "brrrtui: script finished, exit 0"]
        assert f"{pane.lines_skipped:,} not shown" in str(pane.border_title)
        assert app.main.query_one("#telemetry").cols["util"][-1] == 50.0  # the other events still handled
        assert not feed.drain()  # nothing left behind


def test_take_keeps_the_newest_batch_in_order_and_every_own_line(monkeypatch):
    pane = LogPane()
    written = []
    monkeypatch.setattr(pane, "write", lambda text: written.append(text.plain))
    pane.take([LogLine("stdout", f"a{k}") for k in range(BATCH)])
    pane.take([LogLine("brrrtui", "note")] + [LogLine("stderr", f"b{k}") for k in range(BATCH)])
    pane.flush()
    lines = written[0].split("\n")
    assert lines[0] == "brrrtui: note"  # older than the newest batch, still drawn
    assert lines[1] == f"brrrtui: … {BATCH:,} lines not shown: printed faster than they can be drawn"
    assert lines[2:] == [f"b{k}" for k in range(BATCH)]
    assert (pane.lines_written, pane.lines_skipped) == (2 * BATCH + 1, BATCH)
    pane.flush()  # nothing new: nothing drawn
    assert len(written) == 1
