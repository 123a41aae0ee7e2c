"""Pure renderers for the TUI: numbers and arrays in, text cells and roles out.

Nothing here imports textual. A "role" is a short name (``"compute"``, ``"gap-host"``, ``"lineno"``) that a
widget maps to a component class, so colours stay in the theme and the tests read plain strings.
"""
