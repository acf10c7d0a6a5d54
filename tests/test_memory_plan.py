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


def test_hosts_that_do_not_fit_are_refused_with_what_would() -> None:
    """The issue's case: 9 hosts of ~8 GB on an 80 GB GPU. Three buffer sets fit (8 × 7 GiB × 1.1
    ≤ 70); the line says so."""
    plan = MemoryPlan(hosts=9, held=8 * GIB, free=70 * GIB, sets=4)
    assert not plan.fits()
    refusal = plan.refusal()
    assert refusal.startswith(plan.line() + ": they do not fit; use --buffer-sets 3 (about 2.0 GiB a set)")
    assert refusal.endswith("or fewer legs (--paths, another --design)")
    assert (
        MemoryPlan(hosts=9, held=40 * GIB, free=70 * GIB, sets=1)
        .refusal()
        .endswith("they do not fit; use fewer legs (--paths, another --design)")
    )  # no count of sets would: only fewer legs


def test_an_out_of_memory_error_carries_the_plan() -> None:
    plan = MemoryPlan(hosts=3, held=2 * GIB, free=10 * GIB, sets=4)
    oom = "launch: OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB"
    assert plan.explain(oom) == f"{oom} ({plan.line()})"
    assert plan.explain("outputs changed: max error 3e-1") == "outputs changed: max error 3e-1"
