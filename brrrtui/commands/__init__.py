"""The commands that read or write files (`view`, `report`, `export`, `diff`, `demo`, `merge`), each in a module
of its own with its arguments, and what they share (`args`: the parser, UsageError, whether the UI can run, how
files are named on screen). brrrtui/cli.py runs scripts (`brrrtui SCRIPT`, `record`) and dispatches the rest
here. A command may use every layer."""

from __future__ import annotations

COMMANDS = ("view", "report", "export", "diff", "demo", "merge")


def run_command(name: str, argv: list[str]) -> int:
    """Run command `name` (one of COMMANDS) on its arguments; its module is imported only when it runs."""
    if name == "view":
        from brrrtui.commands.view import cmd_view

        return cmd_view(argv)
    if name == "report":
        from brrrtui.commands.report import cmd_report

        return cmd_report(argv)
    if name == "demo":
        from brrrtui.commands.demo import cmd_demo

        return cmd_demo(argv)
    if name == "merge":
        from brrrtui.commands.merge import cmd_merge

        return cmd_merge(argv)
    if name == "diff":
        from brrrtui.commands.diff import cmd_diff

        return cmd_diff(argv)
    from brrrtui.commands.export import cmd_export

    return cmd_export(argv)
