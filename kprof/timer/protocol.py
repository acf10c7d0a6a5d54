"""What every timer offers (the engine times through this alone) and what it times: items, each a
(leg index, buffer set)."""

from __future__ import annotations

from collections.abc import Callable, Hashable, Sequence
from typing import Any, Protocol

Item = Hashable  # (leg index, buffer set)
#: --captures: every round times fresh graphs (default), each graph is captured once per run, or no
#: graph at all (eager calls: a launch that synchronises with the host cannot be captured)
CAPTURE_MODES = ("per-round", "once", "none")


class Timer(Protocol):
    #: written into every sample row's ``timer`` column
    label: str
    #: time replays by their activity records instead of events (set per case; GPU only)
    kernel_time: bool

    def prepare(self, item: Item, fn: Callable[[], None]) -> None:
        """Make ``fn`` ready to time (capture a graph on a GPU); ``fn`` has already run eagerly."""

    def recapture(self, items: Sequence[Item]) -> None:
        """Prepare ``items`` afresh, in this order, from the callables they were prepared with
        (``--captures per-round``: each round times new graphs, so a graph's own offset is noise
        between rounds instead of a fixed bias of its leg)."""

    def replay(self, item: Item) -> None:
        """Run the prepared item once, untimed (correctness checks between rounds)."""

    def time_round(self, items: Sequence[Item], samples: int) -> dict[Item, list[float]]:
        """``samples`` timings (ns) of each item, in the given order."""

    def round_conditions(self) -> dict[str, Any]:
        """Clock, temperature and throttle state read after a round (empty where unknown)."""

    def describe(self) -> dict[str, Any]:
        """What the run's metadata records about this timer (flush size, device); measures nothing."""

    def measure_device(self) -> dict[str, Any]:
        """Once per run: copy bandwidth and the start-of-run self-checks (seconds of GPU work)."""
