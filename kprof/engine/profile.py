"""The torch collector inside a run: every timed round once more under the PyTorch profiler, each
(leg, round) in its own ``record_function`` range, so each kernel's device time comes out per leg
(stage 1 and stage 2 of a split-K decode separately). Each of a case's processes profiles its own
rounds, into a trace of its own."""

from __future__ import annotations

from functools import partial

from kprof.collectors.torch_profile import kernel_times, profile_rounds
from kprof.engine.case import Item
from kprof.engine.context import CaseContext


def profile_case(ctx: CaseContext, rounds: dict[int, list[Item]]) -> None:
    """``rounds`` (round → its items in timing order) replayed under the profiler."""
    timer = ctx.timer
    assert timer is not None
    ctx.at("profile")
    plan = [[(ctx.legs[li].name, r, partial(timer.replay, (li, k))) for li, k in items] for r, items in rounds.items()]
    part = f"-p{ctx.part_index}" if ctx.part_index else ""
    path = ctx.folder.root / "traces" / f"c{ctx.case_index:03d}{part}.pt.trace.json.gz"
    profile_rounds(path, plan, timer.flush.zero_)
    ctx.folder.write_part("kernels", ctx.case_index, None, kernel_times(path, ctx.case.name), part=ctx.part_index)
