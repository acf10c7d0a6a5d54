"""Kernel times from activity records: which replay each record belongs to, and when they are used."""

from __future__ import annotations

import pytest

from kprof.timer.cuda import CUDA_LABEL
from kprof.timer.host import HOST_LABEL
from kprof.timer.kernel_time import (
    KERNEL_TIME_LABEL,
    MissingActivity,
    busy_ns,
    merged_timer_labels,
    replay_busy,
    run_timer_label,
    wants_kernel_time,
)

INFO = {"self_checks": {"event_overhead": {"overhead_ns": 3_500.0, "kernel_time_below_ns": 350_000.0}}}


def test_kernel_time_groups_a_replays_kernels_by_their_launch_and_skips_the_flushes() -> None:
    # flush (corr 1), a two-kernel replay (corr 2) with a 1 µs gap, flush (3), a replay (4) whose two
    # kernels overlap by 1 µs; records arrive in any order
    records = [
        (4, 40_000, 45_000),
        (2, 12_000, 15_000),
        (1, 0, 10_000),
        (4, 44_000, 46_000),
        (2, 16_000, 19_500),
        (3, 20_000, 30_000),
    ]
    assert replay_busy(records, 2) == [6_500.0, 6_000.0]  # busy time: the gap is out, the overlap once


def test_busy_time_is_the_union_of_intervals() -> None:
    assert busy_ns([(0, 10), (5, 8), (12, 20), (15, 25)]) == 23
    assert busy_ns([]) == 0


def test_kernel_time_refuses_records_that_do_not_match_what_was_enqueued() -> None:
    with pytest.raises(MissingActivity, match="3 launches in the activity records, 4 enqueued"):
        replay_busy([(1, 0, 1), (2, 2, 3), (3, 4, 5)], 2)


@pytest.mark.parametrize(
    ("mode", "t_ns", "info", "device", "expected"),
    [
        ("auto", 16_000.0, INFO, "cuda", True),  # a 16 µs kernel: events add 22%
        ("auto", 500_000.0, INFO, "cuda", False),  # 0.7%: events stay
        ("auto", 16_000.0, {}, "cuda", False),  # no measurement of the overhead: events
        ("events", 16_000.0, INFO, "cuda", False),
        ("kernel-time", 5e6, {}, "cuda", True),
        ("kernel-time", 16_000.0, INFO, "cpu", False),  # the host clock has no activity records
    ],
)
def test_which_cases_are_timed_by_kernel_times(mode, t_ns, info, device, expected) -> None:
    assert wants_kernel_time(mode, t_ns, info, device) is expected


def test_the_run_header_names_the_size_rule() -> None:
    assert (
        run_timer_label("auto", CUDA_LABEL, INFO) == f"{KERNEL_TIME_LABEL} for cases under 350 µs, {CUDA_LABEL} above"
    )
    assert run_timer_label("events", CUDA_LABEL, INFO) == CUDA_LABEL
    assert run_timer_label("kernel-time", CUDA_LABEL, {}) == KERNEL_TIME_LABEL
    assert run_timer_label("auto", HOST_LABEL, INFO) == HOST_LABEL
    assert "not measured" in run_timer_label("auto", CUDA_LABEL, {})


def test_fresh_runs_that_differ_only_in_their_threshold_name_the_timer_once() -> None:
    at = [{"self_checks": {"event_overhead": {"kernel_time_below_ns": ns}}} for ns in (226_000, 243_000, 224_400)]
    labels = [run_timer_label("auto", CUDA_LABEL, info) for info in at] + [HOST_LABEL, CUDA_LABEL]
    assert merged_timer_labels(labels) == [
        f"{KERNEL_TIME_LABEL} for cases under 224–243 µs, {CUDA_LABEL} above",
        HOST_LABEL,
        CUDA_LABEL,
    ]
    assert merged_timer_labels(labels[:1] * 3) == labels[:1]
