"""Counts the signals it is sent: each of SIGNALS appends its name to OUT; after the first it works on for
LINGER seconds (long enough for a duplicate to arrive), then exits 0. Writes READY once its handlers are in.
Usage: signal_counter.py OUT READY LINGER SIGNAL..."""

import os
import signal
import sys
import time

out, ready, linger = sys.argv[1], sys.argv[2], float(sys.argv[3])
first: list[float] = []


def count(signum, frame):
    with open(out, "a") as f:
        f.write(signal.Signals(signum).name + "\n")
    first.append(time.monotonic())


for name in sys.argv[4:]:
    signal.signal(getattr(signal, name), count)
with open(ready, "w") as f:
    f.write(str(os.getpid()))
while not first or time.monotonic() - first[0] < linger:
    time.sleep(0.02)
