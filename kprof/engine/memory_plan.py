"""GPU memory for a case's leg hosts, planned before any host but the baseline's allocates: several
revision hosts share one GPU, each holding its own buffer sets, outputs and compiled kernels, and a
case that outgrows the GPU must be refused with its numbers before round 0, not die mid-gate with
nothing timed. The baseline's host is gated first; what its allocator then holds (its buffer sets,
gate outputs and scratch, the float64 reference's temporaries given back) stands for every host."""

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

    def refusal(self) -> str:
        """Why the case cannot run on this GPU, and what would fit."""
        per_set = max(self.held // max(self.sets, 1), 1)
        room = self.free / MARGIN / max(self.hosts - 1, 1) - CONTEXT_BYTES
        sets = int(room // per_set)
        fewer = f"--buffer-sets {sets} (about {per_set / GIB:.1f} GiB a set)" if 1 <= sets < self.sets else None
        ways = " or ".join(w for w in (fewer, "fewer legs (--paths, another --design)") if w)
        return f"{self.line()}: they do not fit; use {ways}"

    def explain(self, reason: str) -> str:
        """A host's out-of-memory error with the plan it ran under; other reasons as they are."""
        return f"{reason} ({self.line()})" if any(sign in reason for sign in OOM_SIGNS) else reason
