"""Starts a process that outlives it and keeps its stdout and stderr open (a server, `cmd &`), prints a line,
writes that process's pid to PIDFILE and the time it exits to EXITED, and exits 0.
Usage: orphan_stdout.py PIDFILE EXITED"""

import subprocess
import sys
import time

orphan = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])  # inherits stdout/stderr
with open(sys.argv[1], "w") as f:
    f.write(str(orphan.pid))
print("the script is done", flush=True)
with open(sys.argv[2], "w") as f:
    f.write(repr(time.time()))
