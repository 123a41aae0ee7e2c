"""Errors about the user's input. Each message is one line the CLI prints as is."""


class InputError(Exception):
    """A file or argument brrrtui cannot use; str(e) is the one-line explanation."""
