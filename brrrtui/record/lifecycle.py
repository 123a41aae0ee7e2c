"""How a recorded run meets signals and ends (UI-free; the recorder uses it, the CLI installs its handlers).

Signals reach the script as they would without brrrtui. A terminal's Ctrl-C (or hang-up) goes to the whole
foreground process group, the script and brrrtui alike; `kill PID` reaches brrrtui alone. The child's Python
writes the number of every signal it catches to a pipe (capture/bootstrap.py: its signal wakeup fd), which a
`SignalRelay` reads: when brrrtui receives SIGINT, SIGTERM or SIGHUP it passes the signal on only if the
script did not get its own copy, so one Ctrl-C is one SIGINT to the script either way.

How the run ends and what the recording then says: brrrtui.record.ending.
"""

from __future__ import annotations

import signal
import subprocess
import threading
import time
from collections import deque
from collections.abc import Callable

FORWARDED = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)  # passed on to the script unless it got its own
COPY_WAIT_S = 0.3  # how long the script's copy of a signal may take to show in its receipts
COPY_SINCE_S = 1.0  # a receipt this long before brrrtui's own signal is the same signal
FALLBACK_SIGINT_S = 2.0  # no receipts (a launcher, not brrrtui's child): pass SIGINT on after this long
UNCAUGHT = "the script ended with an uncaught "  # bootstrap.py's Note prefix (the same text: layers apart)
START_WAIT_S = 60.0  # a signal received before the script started waits this long for it
STOPPING = "stopping the script; Ctrl-C again to stop brrrtui now (the recording is kept)"


class RunControl:
    """The signals brrrtui receives, and what the script gets of them: once, as without brrrtui — passed on
    only if it did not get its own copy (`SignalRelay`); a second SIGINT kills it. `child`: the script's
    process now (None before it starts: a signal received meanwhile is passed on once it has, within
    START_WAIT_S)."""

    def __init__(self, child: Callable[[], subprocess.Popen[bytes] | None], say: Callable[[str], None]):
        self.child, self.say = child, say
        self.relay = SignalRelay()
        self.interrupts = 0
        self.received: list[str] = []  # signals brrrtui received
        self.passed_on: list[str] = []  # of those, the ones it sent the script

    def on_signal(self, sig: int) -> None:
        """brrrtui received SIGINT, SIGTERM or SIGHUP (in a signal handler: returns at once)."""
        t = time.monotonic()
        self.received.append(signal_name(sig))
        if sig == signal.SIGINT:
            self.interrupts += 1
            if self.interrupts >= 2:
                self.kill()
                return
        threading.Thread(target=self._pass_on, args=(sig, t), name="brrrtui-signal", daemon=True).start()

    def interrupt(self, now: bool = False) -> None:
        """Ctrl-C: the first stops the script, the second kills it. `now`: the live UI's Ctrl-C key, which
        its raw terminal sent nobody as a signal: the script gets SIGINT at once."""
        if not now:
            self.on_signal(signal.SIGINT)
            return
        self.interrupts += 1
        if self.interrupts >= 2:
            self.kill()
        elif self.running():
            self.say(STOPPING)
            self.send(signal.SIGINT)

    def _pass_on(self, sig: int, t: float) -> None:
        deadline = time.monotonic() + START_WAIT_S
        while (child := self.child()) is None:  # received while the script starts: its own once it runs
            if time.monotonic() > deadline:
                return
            time.sleep(0.02)
        if sig == signal.SIGINT and self.running():
            self.say(STOPPING)
        if not self.running() or self.relay.got_own_copy(sig, t, child.pid):
            return
        if sig == signal.SIGINT and self.interrupts >= 2:
            return
        self.send(sig)

    def send(self, sig: int) -> None:
        child = self.child()
        if child is not None and child.returncode is None:
            try:
                child.send_signal(sig)
                self.passed_on.append(signal_name(sig))
            except OSError:
                pass

    def kill(self) -> None:
        child = self.child()
        if child is not None and child.returncode is None:
            try:
                child.kill()
            except OSError:
                pass

    def running(self) -> bool:
        child = self.child()
        return child is not None and child.poll() is None

    def terminated(self) -> bool:
        """Whether brrrtui received SIGTERM or SIGHUP: the script is left to end as that makes it."""
        return any(name != "SIGINT" for name in self.received)


class SignalRelay:
    """The signals the script caught (its receipts), and whether it got its own copy of one brrrtui got."""

    def __init__(self) -> None:
        self.receipts: deque[tuple[int, float]] = deque(maxlen=256)  # (signal, monotonic time read)
        self.cv = threading.Condition()
        self.active = False  # receipts are being read (the child is bootstrap.py)

    def read(self, fd: int) -> None:
        """On a thread of its own: the signals the script caught, one byte each, until it exits."""
        self.active = True
        with open(fd, "rb", buffering=0) as f:
            while data := f.read(256):
                now = time.monotonic()
                with self.cv:
                    self.receipts.extend((b, now) for b in data if b in FORWARDED)
                    self.cv.notify_all()

    def got_own_copy(self, sig: int, t: float, pid: int) -> bool:
        """Whether process `pid` received `sig` itself at about time `t` (when brrrtui received its own): a
        receipt (consumed, so a second signal needs a second receipt), or the signal pending in the kernel (a
        process blocked in a driver call takes it later). Without receipts: SIGINT after FALLBACK_SIGINT_S
        (the caller checks the script still runs), other signals at once."""
        if not self.active:
            if sig == signal.SIGINT:
                time.sleep(FALLBACK_SIGINT_S)
            return False
        deadline = t + COPY_WAIT_S
        with self.cv:
            while True:
                for i, (got, at) in enumerate(self.receipts):
                    if got == sig and at >= t - COPY_SINCE_S:
                        del self.receipts[i]
                        return True
                if signal_pending(pid, sig):
                    return True
                left = deadline - time.monotonic()
                if left <= 0:
                    return False
                self.cv.wait(left)


def signal_pending(pid: int, sig: int) -> bool:
    """Whether `sig` is queued for process `pid` and not yet delivered (Linux's /proc status masks)."""
    try:
        with open(f"/proc/{pid}/status") as f:
            for line in f:
                if line.startswith(("SigPnd:", "ShdPnd:")) and int(line.split()[1], 16) >> (sig - 1) & 1:
                    return True
    except (OSError, ValueError, IndexError):
        pass
    return False


def signal_name(number: int) -> str:
    try:
        return signal.Signals(number).name
    except ValueError:
        return f"signal {number}"


def pass_signals_on(on_signal: Callable[[int], None], on_end: Callable[[], None] | None = None) -> dict:
    """Handlers for FORWARDED that call `on_signal` (then, for SIGTERM and SIGHUP, `on_end`); the handlers
    they replace."""

    def handler(sig: int, _frame: object) -> None:
        on_signal(sig)
        if on_end is not None and sig != signal.SIGINT:
            on_end()

    return {sig: signal.signal(sig, handler) for sig in FORWARDED}


def restore_handlers(old: dict) -> None:
    for sig, handler in old.items():
        signal.signal(sig, handler)
