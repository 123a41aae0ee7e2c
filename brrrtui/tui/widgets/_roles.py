"""Roles -> Rich styles through component classes, so every colour comes from the theme (app.tcss)."""

from __future__ import annotations

from collections.abc import Iterable

from rich.style import Style
from rich.text import Text

from brrrtui.contract.safe import safe_text

# Colours of regimes, gap causes and CPU lanes: theme variables from the active theme (which may override
# them), declared by the app (BrrrApp.get_theme_variable_defaults) for app.tcss
THEME_VARIABLES = {
    "regime-compute": "success",
    "regime-memory": "primary-lighten-1",
    "regime-overhead": "warning",
    "inferred-compute": "success-darken-2",
    "inferred-memory": "primary-darken-1",
    "inferred-overhead": "warning-darken-2",
    "streamed": "foreground-darken-2",
    "gap-host": "error-muted",
    "gap-sync": "warning-muted",
    "gap-h2d": "primary-muted",
    "gap-data": "success-muted",
    "gap-wait": "accent-darken-2",
    "gap-other": "surface-lighten-2",
    "gap-communication": "accent-darken-3",
    "lane-cpu": "foreground-darken-3",
    "lane-cpu-sync": "error",
}

# Every role a renderer in brrrtui.present may emit. app.tcss styles `.role--<name>`.
ROLES = (
    "compute",
    "memory",
    "overhead",
    "communication",
    "other",
    "cpu",
    "cpu-sync",
    "compute-inferred",
    "memory-inferred",
    "overhead-inferred",
    "communication-inferred",
    "streamed",
    "gap-host",
    "gap-sync",
    "gap-h2d",
    "gap-data",
    "gap-wait",
    "gap-other",
    "gap-communication",
    "gap-label",
    "idle",
    "selected",
    "selected-gap",
    "cursor",
    "cursor-col",
    "axis",
    "lane-label",
    "lane-label-current",
    "title",
    "name",
    "label",
    "muted",
    "value",
    "spark",
    "path",
    "advice",
    "running",
    "ok",
    "failed",
    "paused",
    "code",
    "syn-comment",
    "syn-string",
    "syn-number",
    "syn-keyword",
    "syn-builtin",
    "syn-function",
    "syn-operator",
    "gutter",
    "gutter-time",
    "gutter-rule",
    "share",
    "fusion",
    "lineno",
    "current-line",
    "stdout",
    "stderr",
    "brrrtui",
)

ROLE_CLASSES: set[str] = {f"role--{r}" for r in ROLES}  # Textual's COMPONENT_CLASSES type; never mutated


class RoleStyles:
    """Mixin for widgets: `role_style("compute")` is the style of `.role--compute` in the current theme.

    Textual collects COMPONENT_CLASSES only along a widget's first DOMNode base, so each widget using this
    mixin declares `COMPONENT_CLASSES = ROLE_CLASSES` itself.
    """

    def role_style(self, role: str) -> Style:
        if not role:
            return Style()
        return self.get_component_rich_style(f"role--{role}", partial=True, default=Style())  # type: ignore[attr-defined]

    def spans_text(self, spans: Iterable[tuple[str, str]], end: str = "") -> Text:
        """One line of (text, role) spans; names and paths in them (the script's, the viewed file's) made
        safe to print (brrrtui.contract.safe)."""
        text = Text(end=end, no_wrap=True, overflow="ellipsis")
        for chunk, role in spans:
            text.append(safe_text(chunk), self.role_style(role))
        return text
