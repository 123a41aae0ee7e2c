"""Writes READY, then sleeps (SIGHUP and SIGTERM keep their default action: they end it).
Usage: ready_then_sleep.py READY"""

import os
import sys
import time

with open(sys.argv[1], "w") as f:
    f.write(str(os.getpid()))
time.sleep(60)
