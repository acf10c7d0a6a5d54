"""How an effect reads, in every command and format: one function, so that the same comparison
never prints two texts (run, report, attribute and compare each had their own)."""

from __future__ import annotations

import math
from typing import Any

import pandas as pd

from kprof.analysis.compare import NO_VERDICT, UNEVEN
from kprof.analysis.run_effects import NO_BASELINE


def effect_text(row: pd.Series | dict[str, Any]) -> str:
    """``+2.31% [+1.90, +2.70]``: estimate and 95% interval, positive = faster; the estimate alone
    where no verdict may be formed, and what stands in for a number where there is none."""
    verdict = row["verdict"]
    if verdict == "REFERENCE":
        return "reference"
    if verdict == "MEASURED":
        return "planted delay, timed alone"
    if verdict == NO_BASELINE:
        return "– (the baseline has none)"
    effect = row.get("effect_pct")
    if effect is None or pd.isna(effect):
        return "–"
    if verdict in (NO_VERDICT, UNEVEN):
        return f"{effect:+.2f}%"
    lo, hi = row.get("ci_low_pct", math.nan), row.get("ci_high_pct", math.nan)
    if not (math.isfinite(lo) and math.isfinite(hi)):
        rounds = row.get("rounds")
        why = f"no 95% interval at {rounds} rounds" if rounds is not None else "too few repetitions for a 95% interval"
        return f"{effect:+.2f}% [{why}]"
    return f"{effect:+.2f}% [{lo:+.2f}, {hi:+.2f}]" + ratio_text(effect)


RATIO_FROM_PCT = 50.0  # from this size on, an effect also reads as a ratio: +257% is "3.57× faster"


def ratio_text(effect_pct: float) -> str:
    """`` (3.57× faster)`` beside an effect of ±50% or more, where a percentage reads poorly (a leg
    twice as slow is −50%, a leg 100 times faster +9,900%); empty below."""
    if not math.isfinite(effect_pct) or abs(effect_pct) < RATIO_FROM_PCT:
        return ""
    speedup = 1 + effect_pct / 100  # t_reference / t_leg
    if speedup <= 0:
        return ""
    return f" ({speedup:.3g}× faster)" if speedup >= 1 else f" ({1 / speedup:.3g}× slower)"
