"""A script that floods its output: the live UI drains the feed in chunks with keys handled in between, draws
only the newest lines of each batch (says how many it did not), keeps brrrtui's own lines and the exit line,
and its memory and work do not grow with the flood."""

import os
import threading

from tui_fakes import analysed, fake_analyze, run_async, wait_until, write_recording

from brrrtui import session as live
from brrrtui.record.feed import Exited, Feed, LogLine, TelemetrySample
from brrrtui.record.output import read_lines
from brrrtui.record.recorder import OUTPUT_TAIL, Recorder, RunSpec
from brrrtui.tui.app import make_app
from brrrtui.tui.widgets.log_pane import BATCH, MAX_CHARS, LogPane

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
        await wait_until(pilot, lambda: log_rows(pane)[-1:] == ["brrrtui: script finished, exit 0"])  # drawn
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


def test_blocks_of_the_scripts_lines_count_every_line_and_draw_the_newest(monkeypatch):
    """The recorder hands the script's output over a block at a time (LogLine.lines): an old block costs a
    count; the newest BATCH rows are drawn in order across blocks, and brrrtui's own lines between them kept."""
    pane = LogPane()
    written = []
    monkeypatch.setattr(pane, "write", lambda text: written.append(text.plain))
    blocks = [LogLine("stdout", "", [f"s{b}-{k}" for k in range(1000)]) for b in range(30)]
    events = [*blocks[:10], LogLine("brrrtui", "own 1"), *blocks[10:], LogLine("stderr", "", ["e0", "e1"])]
    pane.take(events[:15])  # two drains, one flush
    pane.take(events[15:])
    pane.take([LogLine("brrrtui", "own 2")])
    pane.flush()
    lines = written[0].split("\n")
    printed = 30 * 1000 + 2
    assert (pane.lines_written, pane.lines_skipped) == (printed + 2, printed - (BATCH - 1))
    assert lines[0] == "brrrtui: own 1"
    assert lines[1].startswith(f"brrrtui: … {printed - (BATCH - 1):,} lines not shown")
    assert lines[2:] == [f"s29-{k}" for k in range(1000 - (BATCH - 3), 1000)] + ["e0", "e1", "brrrtui: own 2"]


def test_the_lines_a_block_only_counted_are_counted_and_never_drawn(monkeypatch):
    pane = LogPane()
    written = []
    monkeypatch.setattr(pane, "write", lambda text: written.append(text.plain))
    pane.take([LogLine("stdout", "", ["a", "b"], 10_000)])
    pane.flush()
    assert (pane.lines_written, pane.lines_skipped) == (10_002, 10_000)
    assert written[0].split("\n")[1:] == ["a", "b"] and "10,000 lines not shown" in written[0]


def test_a_long_line_is_drawn_cut_and_says_how_long_it_was(monkeypatch):
    pane = LogPane()
    written = []
    monkeypatch.setattr(pane, "write", lambda text: written.append(text.plain))
    pane.take([LogLine("stdout", "", ["x" * 250_000, "short"])])
    pane.flush()
    lines = written[0].split("\n")
    assert lines == ["x" * MAX_CHARS + "… (250,000 characters)", "short"]


CHUNKS = [b"first\nsec", b"ond line \xc3", b"\xa9t\xc3\xa9\n" + b"many\n" * 50_000, b"no newline at the end"]
PRINTED = ["first", "second line été", *["many"] * 50_000, "no newline at the end"]


def _pipe_with(chunks: list[bytes]):
    r, w = os.pipe()
    writer = threading.Thread(target=lambda: [os.write(w, c) for c in chunks] + [os.close(w)])
    writer.start()
    return os.fdopen(r, "rb"), writer


def test_the_scripts_output_is_read_in_blocks_of_whole_lines():
    """Lines split across writes (a UTF-8 character too) arrive whole; the last line without a newline comes
    at the end."""
    blocks = []
    stream, writer = _pipe_with(CHUNKS)
    with stream:
        read_lines(stream, lambda lines, dropped: blocks.append((lines, dropped)), keep=len(PRINTED))
    writer.join()
    assert [line for lines, _ in blocks for line in lines] == PRINTED and all(d == 0 for _, d in blocks)
    assert len(blocks) < 50  # blocks, not one per line


def test_the_recorder_hands_on_each_blocks_last_lines_and_counts_the_rest(tmp_path):
    feed = Feed()
    rec = Recorder(RunSpec(["x.py"], str(tmp_path / "r.brrr"), capture_output=True), feed=feed)
    stream, writer = _pipe_with(CHUNKS)
    with stream:
        rec._read_output(stream, "stdout")
    writer.join()
    events = feed.drain(1_000_000)
    at = 0
    for e in events:  # each block: its last lines (at most OUTPUT_TAIL), after `dropped` counted ones
        assert isinstance(e, LogLine) and e.stream == "stdout" and 0 < len(e.lines) <= OUTPUT_TAIL
        at += e.dropped
        assert e.lines == PRINTED[at : at + len(e.lines)]
        at += len(e.lines)
    assert at == len(PRINTED) and sum(e.dropped for e in events) >= len(PRINTED) - len(events) * OUTPUT_TAIL
    assert list(rec.output_tail) == [("stdout", line) for line in PRINTED[-OUTPUT_TAIL:]]
