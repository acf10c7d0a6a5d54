"""The verdict rules on synthetic runs with known effects (kprof.analysis.simulation), full size.

About 14,000 synthetic runs through kprof's own ``leg_effects``; prints one JSON document with every
scenario's rates. Run it on two revisions to compare rules (docs/benchmarks.md, "Verdict rules"):

    python benchmarks/verdict_simulation.py [--runs 1000] [--seed 0] > out.json
"""

from __future__ import annotations

import argparse
import json
import time

import numpy as np

from kprof.analysis.simulation import Noise, scenario_coverage, scenario_lone, scenario_mde, scenario_same

QUIET = Noise(sample_sigma=0.003, round_sigma=0.001)
NOISY = Noise(sample_sigma=0.02, round_sigma=0.005)


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--runs", type=int, default=1000, help="runs per scenario (14 scenarios)")
    p.add_argument("--seed", type=int, default=0)
    a = p.parse_args()
    rng = np.random.default_rng(a.seed)
    n = a.runs
    t0 = time.time()
    out = {
        "mde_found_quiet_16": scenario_mde(QUIET, 16, 0.5, n, rng),
        "mde_found_noisy_16": scenario_mde(NOISY, 16, 0.5, n, rng),
        "mde_found_noisy_8": scenario_mde(NOISY, 8, 0.5, n, rng),
        "true_1pct_noisy_16": scenario_same(1.0, NOISY, 16, 0.5, n, rng),
        "true_1pct_noisy_8": scenario_same(1.0, NOISY, 8, 0.5, n, rng),
        "lone_2pct_8_rounds": scenario_lone(2.0, 8, None, QUIET, 8, n, rng),
        "lone_2pct_8_rounds_with_unrelated_30pct_slower": scenario_lone(2.0, 8, -30.0, QUIET, 8, n, rng),
        "lone_1pct_8_rounds": scenario_lone(1.0, 8, None, QUIET, 8, n, rng),
        "lone_1pct_8_rounds_with_unrelated_30pct_slower": scenario_lone(1.0, 8, -30.0, QUIET, 8, n, rng),
        "coverage_quiet_16": scenario_coverage([0.0, 1.0, 5.0], QUIET, 16, 0.5, n, rng),
        "coverage_noisy_16": scenario_coverage([0.0, 1.0, 5.0], NOISY, 16, 0.5, n, rng),
    }
    out["seconds"] = time.time() - t0
    print(json.dumps(out, indent=1))


if __name__ == "__main__":
    main()
