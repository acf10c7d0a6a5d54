"""Numbers in a table column: one count of decimals for the whole column, so the decimal points
line up and no row shows more or fewer digits than another (``13.01`` above ``159.86``, never
``13.011`` above ``159.9``). The count gives the column's smallest value four significant figures
(three for a share in percent), at most three decimals (a µs column then shows whole ns)."""

from __future__ import annotations

import math
from collections.abc import Iterable
from typing import Any

SIGNIFICANT = 4
MAX_DECIMALS = 3
MISSING = "–"


def _finite(value: Any) -> float | None:
    if value is None or isinstance(value, bool):
        return None
    try:
        number = float(value)
    except (TypeError, ValueError):
        return None
    return number if math.isfinite(number) else None


def column_decimals(values: Iterable[Any], significant: int = SIGNIFICANT) -> int:
    """Decimals that give the column's smallest non-zero magnitude ``significant`` figures."""
    sizes = [abs(v) for v in map(_finite, values) if v]
    if not sizes:
        return 0
    return max(0, min(MAX_DECIMALS, significant - 1 - math.floor(math.log10(min(sizes)))))


def with_decimals(value: Any, decimals: int) -> str:
    """One value with thousands separators and ``decimals``; a missing value as "–"."""
    number = _finite(value)
    return MISSING if number is None else f"{number:,.{decimals}f}"


def number_column(values: list[Any], significant: int = SIGNIFICANT) -> list[str]:
    """Each value with the column's decimals (:func:`column_decimals`)."""
    decimals = column_decimals(values, significant)
    return [with_decimals(value, decimals) for value in values]
