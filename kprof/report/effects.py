"""How an effect reads, in every command and format: one function, so that the same comparison
never prints two texts (run, report, attribute and compare each had their own)."""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import pandas as pd

from kprof.analysis.compare import NO_VERDICT, UNEVEN
from kprof.analysis.run_effects import NO_BASELINE
from kprof.analysis.stats import VERDICTS
from kprof.run_model import Role


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


def rerun_text(row: pd.Series | dict[str, Any]) -> str:
    """``[+1.70, +2.90]``: where a fresh run's estimate lands (95%, the rerun interval), or "–"
    where the row has no interval."""
    lo, hi = row.get("rerun_low_pct", math.nan), row.get("rerun_high_pct", math.nan)
    if row.get("verdict") not in VERDICTS and row.get("verdict") != "BIASED":
        return "–"
    if lo is None or hi is None or not (math.isfinite(lo) and math.isfinite(hi)):
        return "–"
    return f"[{lo:+.2f}, {hi:+.2f}]"


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


@dataclass(frozen=True)
class View:
    """What a table of effects shows (``--hide-same``, ``--sort``); JSON and CSV keep every row in
    the run's order."""

    hide_same: bool = False
    sort: str = "run"  # the run's own order; "effect": largest gain first; "time": slowest first


EVERY_ROW = View()


def shown_rows(rows: pd.DataFrame, view: View) -> pd.DataFrame:
    """The rows a table shows; the reference row always stays on top."""
    shown = rows[~rows["verdict"].eq("SAME")] if view.hide_same else rows
    if view.sort == "run" or not len(shown):
        return shown
    column = {"effect": "effect_pct", "time": _time_column(shown)}[view.sort]
    on_top = shown["verdict"].eq("REFERENCE")
    ordered = shown[~on_top].sort_values(column, ascending=False, na_position="last", kind="stable")
    return pd.concat([shown[on_top], ordered])


def hidden_notes(rows: pd.DataFrame, view: View) -> list[str]:
    """The line under a table that ``--hide-same`` thinned, so no reader takes it for the whole
    (none where nothing was hidden)."""
    hidden = int(rows["verdict"].eq("SAME").sum()) if view.hide_same else 0
    return [f"{hidden} SAME row(s) hidden (--hide-same)"] if hidden else []


def _time_column(rows: pd.DataFrame) -> str:
    return "time_us" if "time_us" in rows else "b"  # a run's legs; compare's B side


def best_leg_line(rows: pd.DataFrame, reference: str) -> str | None:
    """The case in one line, as hyperfine and pyperf end theirs: the leg with the largest gain over
    the reference, its interval and verdict (``all: +226.69% [+225.54, +227.75] (3.27× faster) than
    baseline, FASTER``); A/A copies are not candidates. None when no leg is compared."""
    copies = rows["roles"].map(lambda roles: Role.AA.value in list(roles)) if "roles" in rows else False
    compared = rows[rows["verdict"].isin([*VERDICTS, "BIASED"]) & ~copies]
    compared = compared[compared["effect_pct"].notna()]
    if not len(compared):
        return None
    faster = compared[compared["verdict"].eq("FASTER")]
    best = (faster if len(faster) else compared).loc[lambda f: f["effect_pct"].idxmax()]
    head = "fastest" if len(faster) else f"no leg is resolved faster than {reference}; largest estimate"
    return f"{head}: {best['leg']}, {effect_text(best)} against {reference}, {best['verdict']}"
