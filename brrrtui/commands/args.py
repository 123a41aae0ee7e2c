"""What every command shares: a parser whose mistakes end in one line, the error a command raises for a
mistake the user can fix, whether the terminal UI can run here, and how a command names a file it read or
wrote."""

from __future__ import annotations

import argparse
import os
import shlex
import sys
from typing import NoReturn


class UsageError(Exception):
    """A mistake the user can fix: brrrtui prints `brrrtui: error: MESSAGE` and exits 2."""


class Parser(argparse.ArgumentParser):
    def error(self, message: str) -> NoReturn:  # one line, exit 2, like every other user error
        raise UsageError(f"{message} (see {self.prog} --help)")


def on_a_terminal() -> bool:
    """The terminal UI can run: stdin and stdout are terminals and Textual is installed. Elsewhere (a pipe, a
    file, CI) a command that would open the UI prints its text instead."""
    if not (sys.stdout.isatty() and sys.stdin.isatty()):
        return False
    try:
        import textual  # noqa: F401
    except ImportError:
        return False
    return True


def shown_path(path: str) -> str:
    """A file as every command prints it: relative to the current folder when it lies below it (a terminal
    then opens it with a click, and it reads as typed), else absolute."""
    full = os.path.abspath(path)
    here = os.getcwd()
    if full.startswith(here.rstrip(os.sep) + os.sep):
        return os.path.relpath(full, here)
    return full


def command_line(*words: str) -> str:
    """`brrrtui WORDS...` as a user can paste it back into a shell (files as shown_path shows them)."""
    return shlex.join(["brrrtui", *words])
