"""Refusing a trace that memory cannot hold, before memory runs out.

A reader that runs out of memory is killed by the kernel's OOM killer (no message at all) or, under
an address-space limit, fails late. Each reader instead says how many device activities it expects
— counted up front where a database can count them, projected from the share of the file read so
far where it is a stream — and the guard compares what they will cost at the reading's peak with
the memory free when reading began: the machine's available memory, the cgroup's limit, and
``ulimit -v``, whichever is least.
"""

from __future__ import annotations

import ctypes
import os
import platform
import resource
import sys
from dataclasses import dataclass, field
from pathlib import Path

from kprof.errors import KprofInputError

#: Peak bytes per kept device activity while a trace is read, rounded up from the highest any format
#: measured with benchmarks/ingest_memory.py (RPD, 1M tiny kernels: 140 B, most of it the reader's
#: fixed cost; 67–88 B for each kernel more, ≤ 93 B at 4M in every format; docs/benchmarks.md).
PEAK_BYTES_PER_ACTIVITY = 150
#: Set to 0 to read a trace whatever the estimate says.
CHECK_VARIABLE = "KPROF_MEMORY_CHECK"
#: A stream's projection waits for this share of the file: its first pieces may be all metadata.
_PROJECT_AFTER = 0.05


#: glibc's ``M_MMAP_THRESHOLD`` option, and the size above which a block gets its own mapping.
_M_MMAP_THRESHOLD = -3
_MAPPED_ABOVE = 64 << 10


def return_freed_columns() -> None:
    """Give every block over 64 KiB its own mapping, returned to the system the moment it is freed.

    A trace is read in pieces whose columns are freed as the table is built. glibc raises its mmap
    threshold each time a mapped block is freed (up to 32 MiB), after which those pieces come from the
    heap and their freed space stays in the process: about 45 B per tiny kernel on a 1M-kernel trace.
    Setting the threshold fixes it (and turns that adjustment off); other C libraries are left alone.
    """
    if platform.libc_ver()[0] != "glibc":
        return
    try:
        ctypes.CDLL(None).mallopt(_M_MMAP_THRESHOLD, _MAPPED_ABOVE)
    except (OSError, AttributeError):
        return


def release_freed_memory() -> None:
    """Hand freed memory back to the system once a reader is done: the heap's free pages (glibc's
    ``malloc_trim``; elsewhere nothing) and what Arrow's default pool keeps for reuse (a CSV read
    left ~55 B a row there). Either would otherwise count towards every later peak."""
    if "pyarrow" in sys.modules:  # never imported for it: a reader that used Arrow has
        sys.modules["pyarrow"].default_memory_pool().release_unused()
    if platform.libc_ver()[0] != "glibc":
        return
    try:
        ctypes.CDLL(None).malloc_trim(0)
    except (OSError, AttributeError):
        return


def _meminfo_available() -> int | None:
    try:
        with open("/proc/meminfo") as f:
            for line in f:
                if line.startswith("MemAvailable:"):
                    return int(line.split()[1]) * 1024
    except (OSError, ValueError, IndexError):
        pass
    return None


def _read_int(path: str) -> int | None:
    try:
        text = Path(path).read_text().strip()
    except OSError:
        return None
    return int(text) if text.isdigit() else None  # "max": no limit


def _cgroup_room(root: str = "/sys/fs/cgroup", membership: str = "/proc/self/cgroup") -> int | None:
    """What the process's cgroup (v2, else v1) still allows."""
    try:
        lines = Path(membership).read_text().splitlines()
    except OSError:
        return None
    for line in lines:
        _, controllers, group = line.split(":", 2)
        if controllers == "":
            base = f"{root}{group}"
            limit, used = _read_int(f"{base}/memory.max"), _read_int(f"{base}/memory.current")
        elif "memory" in controllers.split(","):
            base = f"{root}/memory{group}"
            limit, used = _read_int(f"{base}/memory.limit_in_bytes"), _read_int(f"{base}/memory.usage_in_bytes")
        else:
            continue
        if limit is not None and used is not None and limit < 1 << 60:
            return max(limit - used, 0)
    return None


def _address_space_room() -> int | None:
    soft, _ = resource.getrlimit(resource.RLIMIT_AS)
    if soft == resource.RLIM_INFINITY:
        return None
    try:
        with open("/proc/self/status") as f:
            size = next(int(line.split()[1]) * 1024 for line in f if line.startswith("VmSize:"))
    except (OSError, StopIteration, ValueError):
        return None
    return max(soft - size, 0)


def free_bytes() -> int | None:
    """The least of available memory, cgroup room and address-space room; None where none is known."""
    known = [room for room in (_meminfo_available(), _cgroup_room(), _address_space_room()) if room is not None]
    return min(known) if known else None


@dataclass
class MemoryGuard:
    """One trace's check: the memory free when its reading began, and what the reader expects."""

    path: Path
    free: int | None = field(default_factory=free_bytes)
    _done: int = 0
    _total: int = 0

    @classmethod
    def for_file(cls, path: Path) -> MemoryGuard:
        return cls(path, None if os.environ.get(CHECK_VARIABLE) == "0" else free_bytes())

    def expect(self, activities: float) -> None:
        """Refuse, in one line, a trace of ``activities`` device activities that cannot fit."""
        need = activities * PEAK_BYTES_PER_ACTIVITY
        if self.free is None or need <= self.free:
            return
        raise KprofInputError(
            self.path,
            f"holds about {activities:,.0f} device activities: reading them needs about {need / 1e9:.1f} GB at "
            f"its peak ({PEAK_BYTES_PER_ACTIVITY} B each) and {self.free / 1e9:.1f} GB are free (available memory, "
            f"cgroup limit and ulimit -v, the least); read it on a machine with more memory or profile fewer "
            f"steps ({CHECK_VARIABLE}=0 reads it anyway)",
        )

    def position(self, done: int, total: int) -> None:
        """Where a stream's reading stands (bytes of the file read, the file's size)."""
        self._done, self._total = done, total

    def expect_share(self, activities_so_far: int) -> None:
        """``activities_so_far`` kept from the share of the file read: the whole projected from it."""
        if self._total and self._done >= _PROJECT_AFTER * self._total:
            self.expect(activities_so_far * self._total / self._done)
