from __future__ import annotations

from kprof.timer.self_checks import judge_flush, judge_launch_gap


def test_flush_judgement_uses_the_measured_h200_case() -> None:
    # measured on an H200: 10.35 µs warm (with launch) vs 12.80 and 12.77 µs flushed.
    assert judge_flush(10_350, 12_800, 12_770)["passed"]
    assert not judge_flush(10_350, 11_000, 12_800)["passed"]  # a bigger flush still changes the time
    assert not judge_flush(12_900, 12_800, 12_770)["passed"]  # "cold" is no slower than warm


def test_launch_gap_judgement() -> None:
    assert judge_launch_gap(14_900, 12_260)["gap_ns"] == 2_640  # the §3.3 measurement
    assert "precedes" in judge_launch_gap(14_900, 12_260)["note"]
    assert "no launch gap" in judge_launch_gap(12_300, 12_260)["note"]


def test_event_overhead_sets_the_kernel_time_size() -> None:
    from kprof.timer.self_checks import judge_event_overhead

    out = judge_event_overhead(16_120, 12_340)  # a 32 MiB row sum on the H200 (docs/benchmarks.md)
    assert out["overhead_ns"] == 3_780 and out["kernel_time_below_ns"] == 378_000
    assert "378 µs" in out["note"]
