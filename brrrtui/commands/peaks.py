"""`--peaks SPEC` for the commands that open the UI (`view`, the live `brrrtui SCRIPT`, `demo`)."""

from __future__ import annotations

from typing import Any


def peaks_analyzer(spec: str | None) -> Any:
    """An `analyze` for make_app that judges against the ceilings `spec` names ("flops=800e12,bw=4.2e12");
    None without a spec. A spec brrrtui cannot use raises brrrtui.contract.errors.InputError (one line) here, before
    any script or UI starts."""
    if not spec:
        return None
    from analyzers.analyze import analyze
    from analyzers.cost.peaks import parse_override

    parse_override(spec)

    def analyze_with_peaks(trace: Any, peaks_override: Any = None, **kwargs: Any) -> Any:
        return analyze(trace, peaks_override if peaks_override is not None else spec, **kwargs)

    return analyze_with_peaks
