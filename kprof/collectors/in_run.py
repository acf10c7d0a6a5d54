"""Collectors inside a workload run: what a case gathers besides its timed samples. Each is one
entry of ``IN_RUN``; the options check, the worker and `--help` read the table and nothing else
names them (whole programs have their own registry, kprof.collectors). An entry imports nothing
heavy: its pass is imported when it runs, so checking ``--collector`` stays instant."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from kprof.engine.context import CaseContext

AfterRounds = Callable[["CaseContext", dict[int, list[Any]]], None]


@dataclass(frozen=True)
class InRunCollector:
    name: str
    doc: str
    #: run by each of a case's processes after its timed rounds, with round → its items in timing order
    after_rounds: AfterRounds | None = None
    on_cpu: bool = False  # whether the pass runs on a CPU run too (a profile of device kernels does not)
    revisions: bool = True  # whether revision runs (legs in per-revision hosts) can gather it

    def finish(self, ctx: CaseContext, rounds: dict[int, list[Any]]) -> None:
        if self.after_rounds is not None and (self.on_cpu or ctx.device != "cpu"):
            self.after_rounds(ctx, rounds)


def _torch_profile(ctx: CaseContext, rounds: dict[int, list[Any]]) -> None:
    from kprof.engine.profile import profile_case

    profile_case(ctx, rounds)


IN_RUN: dict[str, InRunCollector] = {
    c.name: c
    for c in (
        InRunCollector("events", "CUDA events around each leg's replays (the default): samples only"),
        InRunCollector(
            "torch",
            "the timed rounds once more under the PyTorch profiler: per-kernel times per leg",
            _torch_profile,
            revisions=False,
        ),
    )
}
