"""JAX/XLA profiles: the XSpace protobuf (``*.xplane.pb``, gzipped too) that ``jax.profiler`` and
XProf write. Read through a maintained reader of the published XSpace protos — XProf's
``ProfileData`` (``pip install 'kprof[jax]'``), else JAX's own ``jax.profiler.ProfileData`` where
JAX is installed — never decoded here by hand.

Each device plane (``/device:GPU:N``) is a rank, N its number (given several files, one per host,
host k's devices follow host k−1's: rank k·devices + N). The plane's stream lines
(``Stream #ID(…)``) hold its device activities: a copy where the event carries ``memcpy_details``
(or the line is a Memcpy stream), else a kernel; the lines XProf derives for its own views (XLA
Ops, XLA Modules, Steps) are summaries of those and are left out. A host event with the same
``correlation_id`` (``hipModuleLaunchKernel``, ``cuLaunchKernel`` …) is the launch: its start and
its thread. Steps marked with ``jax.profiler.StepTraceAnnotation`` (host events carrying a
``step_num``) are ranges named ``NAME#N`` (``--steps '^NAME#(\\d+)$'`` counts them as steps; the
trace's warning gives the exact pattern); other host annotations and XLA modules are not read.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import numpy as np

from kprof.errors import KprofInputError
from kprof.ingest.normalize import full_and_short, trace_meta
from kprof.ingest.ranks import split_by_rank
from kprof.ingest.registry import LoadOptions, Probe, TraceFormat
from kprof.ingest.source import stream_chunks
from kprof.trace import Trace, events_table, range_table

CLOCK = "XSpace ns (the profile's clock, shared by its host and device planes)"
DEVICE_PLANE = re.compile(r"^/device:(?:GPU|ROCM|CUDA):(\d+)$")
STREAM_LINE = re.compile(r"^Stream #(\d+)")
HOST_PLANE = "/host:CPU"
NO_RANGES = "XSpace: host annotations are not read as ranges (no steps or annotations in the tables)"
STEP_STAT = "step_num"  # what jax.profiler.StepTraceAnnotation puts on its host event


def profile_data(path: Path) -> Any:
    """The file through XProf's reader (or JAX's); a one-line error naming what to install."""
    reader = _reader()
    if reader is None:
        raise KprofInputError(
            path,
            "is a JAX/XLA profile (XSpace protobuf); reading it needs XProf's reader: pip install 'kprof[jax]'",
        )
    data = b"".join(stream_chunks(path, 1 << 24))
    try:
        return reader.from_serialized_xspace(data)  # both readers take the serialized XSpace
    except Exception as e:  # the readers raise their own types for a damaged protobuf
        raise KprofInputError(
            path, f"is not an XSpace profile its reader can parse ({type(e).__name__}: {e})"
        ) from None


def _reader() -> Any:
    try:
        from xprof.profile_data import ProfileData

        return ProfileData
    except ImportError:
        pass
    try:
        from jax.profiler import ProfileData  # type: ignore[no-redef]

        return ProfileData
    except ImportError:
        return None


def _stats(item: Any) -> dict[str, str]:
    return {str(k): str(v) for k, v in item.stats}


def _int(value: str | None) -> int | None:
    try:
        return int(value) if value is not None else None
    except ValueError:
        return None


def _host_events(host_planes: list[Any]) -> tuple[dict[int, tuple[int, int]], dict[str, list[Any]]]:
    """correlation id → (launch start ns, thread id) of every host event that carries one; and the
    step ranges (``NAME#N``) of the events that carry a step number."""
    found: dict[int, tuple[int, int]] = {}
    steps: dict[str, list[Any]] = {k: [] for k in ("name", "start_ns", "end_ns", "pid", "tid")}
    for plane in host_planes:
        for line in plane.lines:
            tid = _int(line.name.rsplit("/", 1)[-1]) or 0
            for event in line.events:
                stats = _stats(event)
                corr, step = _int(stats.get("correlation_id")), _int(stats.get(STEP_STAT))
                if corr is not None:
                    found.setdefault(corr, (round(event.start_ns), tid))
                if step is not None:
                    start = round(event.start_ns)
                    for key, value in zip(
                        steps, (f"{event.name}#{step}", start, start + round(event.duration_ns), 0, tid)
                    ):
                        steps[key].append(value)
    return found, steps


def _step_note(names: list[str]) -> str:
    """The warning a trace with JAX steps carries: how to count them as steps."""
    if not names:
        return NO_RANGES
    kinds = sorted({n.rsplit("#", 1)[0] for n in names})
    pattern = f"^{re.escape(kinds[0])}#(\\d+)$"
    return (
        f"XSpace: {len(names)} JAX steps read as ranges {', '.join(k + '#N' for k in kinds)}: "
        f"--steps '{pattern}' counts them as steps; other host annotations are not read"
    )


def load_xspace(path: Path, options: LoadOptions) -> list[Trace]:
    space = profile_data(path)
    planes = list(space.planes)
    devices = [(int(m.group(1)), p) for p in planes if (m := DEVICE_PLANE.match(p.name))]
    launches, steps = _host_events([p for p in planes if p.name == HOST_PLANE])
    cols: dict[str, list[Any]] = {
        k: [] for k in ("rank", "device", "stream", "start_ns", "end_ns", "dur_ns", "name", "kind", "correlation")
    }
    cols |= {"launch_ns": [], "launch_tid": []}
    base = (options.rank or 0) * max(len(devices), 1)  # a rank given: this host's block of ranks
    for number, plane in devices:
        for line in plane.lines:
            stream = STREAM_LINE.match(line.name)
            if stream is None:  # a line XProf derives (XLA Ops, XLA Modules, Steps): no activity of its own
                continue
            copies = "memcpy" in line.name.lower()
            for event in line.events:
                stats = _stats(event)
                start, dur = round(event.start_ns), round(event.duration_ns)
                corr = _int(stats.get("correlation_id"))
                launch = launches.get(corr) if corr is not None else None
                cols["rank"].append(base + number)
                cols["device"].append(number)
                cols["stream"].append(int(stream.group(1)))
                cols["start_ns"].append(start)
                cols["end_ns"].append(start + dur)
                cols["dur_ns"].append(dur)
                cols["name"].append(event.name)
                cols["kind"].append("memcpy" if copies or "memcpy_details" in stats else "kernel")
                cols["correlation"].append(corr)
                cols["launch_ns"].append(launch[0] if launch else None)
                cols["launch_tid"].append(launch[1] if launch else None)
    if options.memory is not None:
        options.memory.expect(len(cols["name"]))
    if not cols["name"]:
        raise KprofInputError(path, "is a JAX/XLA profile with no device activity on any GPU plane")
    kernel = [k == "kernel" for k in cols["kind"]]
    table: dict[str, Any] = dict(cols)
    table["name"], table["short_name"] = full_and_short(cols["name"], kernel)
    meta = trace_meta(path, "xspace", base, CLOCK, local_devices=len(devices))  # ranks are this host's devices
    ranks, n = sorted(set(cols["rank"])), len(steps["name"])
    ranges = {k: v * len(ranks) for k, v in steps.items()}  # every device ran the steps its host marked
    ranges |= {"domain": ["cpu"] * n * len(ranks), "device": [-1] * n * len(ranks)}
    trace = Trace(events_table(table), range_table(ranges), meta, warnings=[_step_note(steps["name"])])
    return split_by_rank(trace, np.repeat(np.array(ranks, dtype=np.int64), n), "XSpace device planes (/device:GPU:N)")


PLANE_NAMES = (b"/host:", b"/device:", b"Task Environment")


def _varint_end(data: bytes, at: int) -> int:
    """Where the protobuf varint starting at ``at`` ends (past the data: not one)."""
    while at < len(data) and data[at] & 0x80:
        at += 1
    return at + 1


def _is_xspace(p: Probe) -> bool:
    """By content, as every format is: the file opens with an XSpace's first plane (field 1, a
    message) whose name (field 2, after an optional id, field 1) is a profiler plane's."""
    data = p.head
    if data[:1] != b"\x0a":
        return False
    at = _varint_end(data, 1)  # the plane's length
    if data[at : at + 1] == b"\x08":  # XPlane.id
        at = _varint_end(data, at + 1)
    if data[at : at + 1] != b"\x12":  # XPlane.name
        return False
    name = data[_varint_end(data, at + 1) :]
    return name.startswith(PLANE_NAMES)


FORMAT = TraceFormat("xspace", "JAX/XLA XSpace (.xplane.pb)", _is_xspace, lambda p, o: load_xspace(p.path, o))
