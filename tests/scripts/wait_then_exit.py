"""Writes READY, waits until GO exists, then exits with CODE (a run whose disk fills meanwhile).
Usage: wait_then_exit.py READY GO CODE"""

import os
import sys
import time

ready, go, code = sys.argv[1], sys.argv[2], int(sys.argv[3])
with open(ready, "w") as f:
    f.write(str(os.getpid()))
deadline = time.monotonic() + 60
while not os.path.exists(go) and time.monotonic() < deadline:
    time.sleep(0.02)
sys.exit(code)
