"""A case's rounds split over several worker processes (``--processes``), one after another.

What one process holds for its whole life — where its buffers and the flush buffer lie in
physical memory, its allocator's state — shifts a leg's time against the baseline's by a few tenths
of a percent (two fresh H200 runs of the paged_decode pr preset: every ``grouped_heads`` leg of
b64-s2048 0.5% apart, while each run's four buffer sets agreed to 0.1%). One process cannot see
that. Splitting the rounds over P processes, each with its own share of the buffer sets, puts the
process into the spread between sets that the analysis already estimates and folds into the
interval (``kprof.analysis.stats.placement_spread``).

Part p owns the sets k with k mod P = p and a contiguous block of rounds: its first round is a
burn-in (a fresh process warms its clocks and caches like the first), then its share of the timed
rounds, rotating over its own sets. With one process this is the single-process protocol exactly:
round 0 the burn-in, round r on set r mod K.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Part:
    index: int
    sets: tuple[int, ...]  # the buffer sets this process allocates
    rounds: range  # round indices on disk; the first is this process's burn-in

    def set_of(self, round_index: int) -> int:
        """The buffer set every leg of a round uses (sets rotate within the part)."""
        return self.sets[(round_index - self.rounds.start) % len(self.sets)]

    def burn_in(self, round_index: int) -> bool:
        return round_index == self.rounds.start


def case_parts(timed_rounds: int, buffer_sets: int, processes: int) -> list[Part]:
    """The parts of one case: timed rounds shared as evenly as they go, sets dealt round-robin."""
    parts, start = [], 0
    for p in range(processes):
        timed = timed_rounds // processes + (1 if p < timed_rounds % processes else 0)
        sets = tuple(k for k in range(buffer_sets) if k % processes == p)
        parts.append(Part(p, sets, range(start, start + timed + 1)))
        start += timed + 1
    return parts
