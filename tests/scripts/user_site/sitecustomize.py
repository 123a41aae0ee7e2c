"""A user's own sitecustomize (tests/test_ranks_e2e.py): brrrtui's rank hook must run it in every process."""

import os
import sys

print(f"user sitecustomize: pid {os.getpid()} rank {os.environ.get('RANK')}", file=sys.stderr)
