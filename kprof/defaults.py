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


def check_threshold(pct: float) -> None:
    """A practical threshold is a percent ≥ 0 (--threshold -5 once started a run)."""
    if not (math.isfinite(pct) and pct >= 0):
        raise KprofInputError(
            "--threshold", f"is {pct:g}: a threshold is a percent ≥ 0 ({THRESHOLD_PCT:g} is the default)"
        )
