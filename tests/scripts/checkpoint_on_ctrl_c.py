"""Works until Ctrl-C, then saves a checkpoint of 40 chunks inside its KeyboardInterrupt handler, writing how
many chunks are saved to OUT after each one; a second SIGINT would cut the save short. Writes READY once it
is waiting. Usage: checkpoint_on_ctrl_c.py OUT READY [sleep|busy [CHUNKS CHUNK_S]]: busy spins in Python
instead of sleeping."""

import os
import sys
import time

out, ready = sys.argv[1], sys.argv[2]
busy = len(sys.argv) > 3 and sys.argv[3] == "busy"
CHUNKS, CHUNK_S = (int(sys.argv[4]), float(sys.argv[5])) if len(sys.argv) > 5 else (40, 0.08)

try:
    with open(ready, "w") as f:
        f.write(str(os.getpid()))
    while True:
        if busy:
            sum(range(10_000))
        else:
            time.sleep(0.05)
except KeyboardInterrupt:
    for chunk in range(1, CHUNKS + 1):
        deadline = time.monotonic() + CHUNK_S
        while time.monotonic() < deadline:  # a save in progress: no sleep a signal could cut short quietly
            sum(range(1000))
        with open(out, "w") as f:
            f.write(str(chunk))
print(f"saved {CHUNKS} chunks", flush=True)
