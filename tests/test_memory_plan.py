"""GPU memory for a case's leg hosts: the plan said in one line, refused before round 0 with the
numbers and what would fit, an out-of-memory error told with the plan it ran under."""

from __future__ import annotations

from kprof.engine.memory_plan import CONTEXT_BYTES, GIB, MemoryPlan


def test_hosts_that_fit_are_said_in_one_line() -> None:
    plan = MemoryPlan(hosts=9, held=4 * GIB, free=60 * GIB, sets=4)
    assert plan.fits() and plan.per_host == 4 * GIB + CONTEXT_BYTES
    assert plan.line() == (
        "GPU memory: 9 leg hosts of about 5.0 GiB each (4 buffer sets, outputs and gate copies measured on "
        "the baseline's host, 1 GiB of context added); the other 8 need about 44.0 GiB, 60.0 GiB free"
    )


def test_hosts_that_do_not_fit_keep_fewer_buffer_sets() -> None:
    """The issue's case: 9 hosts of ~8 GB on an 80 GB GPU. With 3 sets a host the others need
    8 × 7 GiB × 1.1 = 61.6 GiB of the 70 free plus the 2 the baseline's host gives back: 3 fit."""
    plan = MemoryPlan(hosts=9, held=8 * GIB, free=70 * GIB, sets=4)
    assert not plan.fits() and plan.sets_that_fit() == 3 and plan.per_set == 2 * GIB
    said = plan.fitted(3, 6 * GIB, 72 * GIB)
    assert said.startswith(plan.line() + ": they do not fit with 4 buffer sets a host, so each host keeps 3")
    assert "the baseline's host now holds 6.0 GiB, 72.0 GiB free" in said
    too_big = MemoryPlan(hosts=9, held=40 * GIB, free=70 * GIB, sets=1)
    assert too_big.sets_that_fit() == 0
    assert too_big.refusal().endswith("even with one buffer set a host; time fewer legs (--paths, another --design)")


def test_an_out_of_memory_error_carries_the_plan() -> None:
    plan = MemoryPlan(hosts=3, held=2 * GIB, free=10 * GIB, sets=4)
    oom = "launch: OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB"
    assert plan.explain(oom) == f"{oom} ({plan.line()})"
    assert plan.explain("outputs changed: max error 3e-1") == "outputs changed: max error 3e-1"
