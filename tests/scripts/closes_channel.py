"""Closes every descriptor but 0-2 (os.closerange, as a daemonising script does), then opens files in FOLDER
until it holds 1,100 or the system refuses more (the lowest free numbers, the capture channel's among them),
works on 1.5 s and exits 0, the files still open (Python closes them at its exit, after brrrtui's last
message). Writes READY first. Usage: closes_channel.py READY FOLDER"""

import os
import sys
import time

ready, folder = sys.argv[1], sys.argv[2]
with open(ready, "w") as f:
    f.write(str(os.getpid()))
os.closerange(3, 1 << 16)
held = []
for i in range(1100):
    try:
        held.append(open(os.path.join(folder, f"f{i}"), "wb"))
    except OSError:
        break
time.sleep(1.5)
