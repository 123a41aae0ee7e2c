"""The commands beyond running, viewing and reporting (`export`, `diff`, `demo`, `merge`): the argument parsing
and the files of each; brrrtui/cli.py dispatches to them. Like cli.py, they may use every layer."""

from __future__ import annotations

COMMANDS = ("export", "diff", "demo", "merge")


def run_command(name: str, argv: list[str]) -> int:
    """Run command `name` (one of COMMANDS) on its arguments; its module is imported only when it runs."""
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
