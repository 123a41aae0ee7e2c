"""A user's own sitecustomize (tests/test_ranks_e2e.py): brrrtui's rank hook must run it in every process."""

import os

# one write a line: the launcher, the ranks and their workers share this stderr, and a line printed in two
# writes can be cut by another process's
os.write(2, f"user sitecustomize: pid {os.getpid()} rank {os.environ.get('RANK')}\n".encode())
