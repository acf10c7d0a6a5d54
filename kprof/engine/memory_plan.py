"""GPU memory for a case's leg hosts, planned before any host but the baseline's allocates: several
revision hosts share one GPU, each holding its own buffer sets, outputs and compiled kernels, and a
case that outgrows the GPU must be refused with its numbers before round 0, not die mid-gate with
nothing timed. The baseline's host is gated first; what its allocator then holds (its buffer sets,
gate outputs and scratch, the float64 reference's temporaries given back) stands for every host.
Where the others would not fit, every host keeps fewer buffer sets (the baseline's drops the rest):
fewer placements, a wider placement term, but a case that runs."""

from __future__ import annotations

from dataclasses import dataclass

GIB = 1 << 30
CONTEXT_BYTES = 1 << 30  # a host's CUDA context and compiled kernels, beyond its allocator (an estimate)
MARGIN = 1.1  # the others may allocate a little more than the baseline's host (their own launch scratch)
OOM_SIGNS = ("OutOfMemoryError", "out of memory")


@dataclass(frozen=True)
class MemoryPlan:
    hosts: int  # leg hosts of the case, the baseline's included
    held: int  # bytes the baseline's host holds after its gate
    free: int  # bytes free on the GPU then, every process counted
    sets: int  # buffer sets each host holds

    @property
    def per_host(self) -> int:
        return self.held + CONTEXT_BYTES

    @property
    def others_need(self) -> int:
        return int((self.hosts - 1) * self.per_host * MARGIN)

    def fits(self) -> bool:
        return self.others_need <= self.free

    def line(self) -> str:
        """The plan in one line, said before the other hosts allocate."""
        return (
            f"GPU memory: {self.hosts} leg hosts of about {self.per_host / GIB:.1f} GiB each ({self.sets} buffer "
            f"sets, outputs and gate copies measured on the baseline's host, 1 GiB of context added); the other "
            f"{self.hosts - 1} need about {self.others_need / GIB:.1f} GiB, {self.free / GIB:.1f} GiB free"
        )

    @property
    def per_set(self) -> int:
        """A buffer set's share of what the host holds (its outputs and scratch counted with it)."""
        return max(self.held // max(self.sets, 1), 1)

    def sets_that_fit(self) -> int:
        """The most buffer sets per host (at most this plan's) with which the others fit: the free
        memory, what the baseline's host gives back by dropping sets counted in (0: not even one)."""
        for sets in range(self.sets, 0, -1):
            freed = (self.sets - sets) * self.per_set
            if (self.hosts - 1) * (sets * self.per_set + CONTEXT_BYTES) * MARGIN <= self.free + freed:
                return sets
        return 0

    def refusal(self) -> str:
        """Why the case cannot run on this GPU, even with one buffer set a host."""
        return (
            f"{self.line()}: they do not fit, even with one buffer set a host; "
            "time fewer legs (--paths, another --design)"
        )

    def fitted(self, sets: int, held: int, free: int) -> str:
        """The line said when the sets were cut to fit: what was planned, and what runs."""
        return (
            f"{self.line()}: they do not fit with {self.sets} buffer sets a host, so each host keeps {sets} "
            f"(about {self.per_set / GIB:.1f} GiB a set; the baseline's host now holds {held / GIB:.1f} GiB, "
            f"{free / GIB:.1f} GiB free); fewer placements widen the placement term"
        )

    def explain(self, reason: str) -> str:
        """A host's out-of-memory error with the plan it ran under; other reasons as they are."""
        return f"{reason} ({self.line()})" if any(sign in reason for sign in OOM_SIGNS) else reason
