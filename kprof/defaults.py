"""The defaults of a run's protocol and of its verdicts, each written once: the options of
`kprof run`, `calibrate`, `attribute` and `compare` declare them (kprof.run_options, kprof.cli),
the requests they fill start from them, and a run folder whose meta.json lacks a field reads them
(kprof.run_model)."""

import math

from kprof.errors import KprofInputError

ROUNDS = 16  # timed rounds, plus a burn-in round per process
BUFFER_SETS = 4  # input/output buffer sets, rotated across rounds
BUFFERS = "shared"  # every leg of a round on the same buffer set (per-leg: the PR method)
TIMER_MODE = "auto"  # events, or kernel time below the size where the event overhead exceeds 1%
CAPTURES = "per-round"  # graphs captured afresh every round
SEED = 0
AA_COPIES = 1
THRESHOLD_PCT = 0.5  # the practical threshold of SAME, in percent
BETWEEN_RUNS_PCT = 0.0  # a known SD of a leg's effect between fresh runs, in every interval (none)


def check_threshold(pct: float) -> None:
    """A practical threshold is a percent ≥ 0 (--threshold -5 once started a run)."""
    if not (math.isfinite(pct) and pct >= 0):
        raise KprofInputError(
            "--threshold", f"is {pct:g}: a threshold is a percent ≥ 0 ({THRESHOLD_PCT:g} is the default)"
        )


def is_between_runs(pct: float) -> bool:
    """The spread between fresh runs is an SD in percent: ≥ 0 and below 100."""
    return math.isfinite(pct) and 0 <= pct < 100


def check_between_runs(pct: float) -> None:
    """``--between-runs`` in its range (:func:`is_between_runs`), or a one-line error naming it."""
    if not is_between_runs(pct):
        raise KprofInputError("--between-runs", f"is {pct:g}: the SD of an effect between fresh runs, a percent ≥ 0")
