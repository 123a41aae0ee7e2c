"""Every key, per pane, as data: the panes' BINDINGS are built from it and the help screen lists it, so a key
is declared once. A key with no action is handled by the pane's Textual widget itself (an OptionList's arrows
and Enter) and is only listed in the help."""

from __future__ import annotations

from dataclasses import dataclass

from textual.binding import Binding, BindingType


@dataclass(frozen=True)
class Key:
    keys: str  # Textual key names, comma-separated
    action: str  # "": the widget handles it; listed in the help only
    description: str
    show: bool = False  # in the footer
    display: str | None = None  # how the footer writes the key
    priority: bool = False  # before the focused widget and Textual's own binding of the key


KEYMAP: dict[str, tuple[Key, ...]] = {
    "app": (
        Key("q", "request_quit", "Quit", show=True),
        Key("ctrl+q", "request_quit", "Quit (asks while the script runs, like q)", priority=True),
        Key(
            "ctrl+c",
            "interrupt",
            "Live: stop the script; twice: kill it and quit",
            priority=True,
        ),
        Key("question_mark", "help", "Help", show=True, display="?"),
        Key("p", "toggle_pause", "Pause", show=True),
        Key("P", "cycle_phase", "Phase shown: steady ⇄ warm-up ⇄ set-up (each its own windows)"),
        Key("r", "pick_rank", "Rank shown (a distributed run): the whole view switches to the rank picked"),
    ),
    "main": (
        Key("M", "modules", "Module tree: time and regime per nn.Module", show=True, display="M"),
        Key("slash", "search", "Search", show=True, display="/"),
        Key("n", "next(1)", "Next result / finding", show=True),
        Key("N", "next(-1)", "Previous result / finding"),
        Key("g", "goto", "Kernel ⇄ line", show=True),
        Key("escape", "back", "Back; at the top: clear the search"),
    ),
    "timeline": (
        Key("left,h", "move(-1)", "Cursor left (pans at the edge)"),
        Key("right,l", "move(1)", "Cursor right (pans at the edge)"),
        Key("shift+left,H", "pan(-0.5)", "Pan left half a view"),
        Key("shift+right,L", "pan(0.5)", "Pan right half a view"),
        Key("up,k", "lane(-1)", "Previous lane"),
        Key("down,j", "lane(1)", "Next lane"),
        Key("plus,equals_sign", "zoom(2)", "Zoom in", show=True, display="+"),
        Key("minus,underscore", "zoom(0.5)", "Zoom out", show=True, display="-"),
        Key("0", "fit", "Fit the window"),
        Key("left_square_bracket", "item(-1)", "Previous kernel or gap", display="["),
        Key("right_square_bracket", "item(1)", "Next kernel or gap", display="]"),
        Key("comma,less_than_sign", "window(-1)", "Previous page (window or stream)", display=","),
        Key("full_stop,greater_than_sign", "window(1)", "Next page (window or stream)", display="."),
        Key("home", "edge(0)", "Start of the window"),
        Key("end", "edge(1)", "End of the window"),
        Key("enter", "drill", "Details"),
    ),
    "source": (
        Key("up,k", "cursor(-1)", "Previous line"),
        Key("down,j", "cursor(1)", "Next line"),
        Key("pageup", "page(-1)", "Page up"),
        Key("pagedown", "page(1)", "Page down"),
        Key("home", "edge(0)", "First line"),
        Key("end", "edge(1)", "Last line"),
        Key("left_square_bracket", "hot(-1)", "Previous line with GPU time", display="["),
        Key("right_square_bracket", "hot(1)", "Next line with GPU time", display="]"),
        Key("left,h", "hscroll(-8)", "Scroll left"),
        Key("right,l", "hscroll(8)", "Scroll right"),
        Key("enter", "drill", "Details"),
    ),
    "details": (
        Key("escape", "back", "Back (details)"),
        Key("enter", "", "Drill into the highlighted item"),
        Key("up,down", "", "Read the text (it scrolls), then move through the list below it"),
        Key("pageup,pagedown", "", "A page up / down"),
        Key("home,end", "", "Top / bottom"),
    ),
    "hot lines": (
        Key("up,down", "", "Move (the source follows)"),
        Key("enter", "", "Details of the line"),
    ),
    "quit dialog": (
        Key("y,enter", "answer(True)", "Quit and stop the script", show=True),
        Key("n,escape,q", "answer(False)", "Keep running", show=True),
    ),
    "search": (
        Key("escape", "cancel", "Close search", show=True),
        Key("down", "focus_results", "To the results"),
    ),
    "help": (Key("escape,question_mark,q", "dismiss_help", "Close help", show=True),),
    "rank picker": (
        Key("escape,q,r", "cancel", "Keep the rank on screen", show=True),
        Key("enter", "", "Show it"),
    ),
    "modules": (
        Key("escape,M", "close", "Back to the main screen", show=True),
        Key("s", "source", "Source of its library line", show=True),
        Key("enter,space", "", "Fold / unfold the module"),
        Key("up,down", "", "Move (the details follow)"),
    ),
}

# The help's sections, in order: (heading, pane).
HELP_SECTIONS = (
    ("everywhere", "app"),
    ("everywhere", "main"),
    ("timeline", "timeline"),
    ("source", "source"),
    ("details", "details"),
    ("hot lines", "hot lines"),
    ("quit dialog", "quit dialog"),
    ("module tree", "modules"),
    ("rank picker", "rank picker"),
)


def bindings(pane: str) -> list[BindingType]:
    """The Textual bindings of a pane (its keys that have an action)."""
    return [
        Binding(k.keys, k.action, k.description, show=k.show, key_display=k.display, priority=k.priority)
        for k in KEYMAP[pane]
        if k.action
    ]


def help_sections() -> list[tuple[str, list[Key]]]:
    return [(heading, list(KEYMAP[pane])) for heading, pane in HELP_SECTIONS]
