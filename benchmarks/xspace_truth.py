"""kprof's reading of JAX/XLA XSpace profiles against XProf's own trace viewer, per device and
kernel: calls and total device time.

    python benchmarks/xspace_truth.py PROFILE.xplane.pb [...]

The truth is XProf's trace-viewer conversion of the same file (``xspace_to_tool_data``, its C++
path to the timeline a user opens in XProf), not kprof's reader (XProf's ``ProfileData``): per
device process, the complete events on its ``Stream #…`` threads, summed by name. Prints one line
per file with the largest difference in calls and in total µs over every (device, kernel); exits 1
when any differs beyond 0.01 µs (the viewer's JSON rounds times to ns).
"""

from __future__ import annotations

import json
import re
import sys
from collections import defaultdict
from pathlib import Path

from kprof.ingest.load import load_traces

DEVICE = re.compile(r"/device:GPU:(\d+)$")


def viewer_totals(path: Path) -> dict[tuple[int, str], tuple[int, float]]:
    """(device, event name) → (calls, total µs) as XProf's trace viewer shows the file."""
    from xprof.convert import raw_to_tool_data

    data, _ = raw_to_tool_data.xspace_to_tool_data([str(path)], "trace_viewer@", {})
    events = json.loads(data)["traceEvents"]
    device = {e["pid"]: int(m.group(1)) for e in events if e.get("name") == "process_name"
              if (m := DEVICE.search(e["args"]["name"]))}  # fmt: skip
    streams = {(e["pid"], e["tid"]) for e in events if e.get("name") == "thread_name"
               and e["args"]["name"].startswith("Stream #")}  # fmt: skip
    totals: dict[tuple[int, str], list[float]] = defaultdict(lambda: [0, 0.0])
    for e in events:
        if e.get("ph") == "X" and e["pid"] in device and (e["pid"], e["tid"]) in streams:
            entry = totals[device[e["pid"]], e["name"]]
            entry[0] += 1
            entry[1] += float(e.get("dur", 0.0))
    return {k: (int(v[0]), v[1]) for k, v in totals.items()}


def kprof_totals(path: Path) -> dict[tuple[int, str], tuple[int, float]]:
    totals: dict[tuple[int, str], list[float]] = defaultdict(lambda: [0, 0.0])
    for trace in load_traces(path):
        ev = trace.events
        for (device, name), group in ev.groupby(["device", "name"], observed=True):
            totals[int(device), str(name)][0] += len(group)
            totals[int(device), str(name)][1] += float(group["dur_ns"].sum()) / 1e3
    return {k: (int(v[0]), v[1]) for k, v in totals.items()}


def main() -> None:
    worst_all = 0.0
    for arg in sys.argv[1:]:
        path = Path(arg)
        truth, ours = viewer_totals(path), kprof_totals(path)
        keys = set(truth) | set(ours)
        calls = max(abs(truth.get(k, (0, 0.0))[0] - ours.get(k, (0, 0.0))[0]) for k in keys)
        us = max(abs(truth.get(k, (0, 0.0))[1] - ours.get(k, (0, 0.0))[1]) for k in keys)
        n = sum(c for c, _ in truth.values())
        total = sum(t for _, t in truth.values())
        print(f"{path.name}: {len(keys)} (device, kernel) pairs, {n:,} activities, {total:,.2f} µs; "
              f"largest difference {calls} calls, {us:.4f} µs")  # fmt: skip
        worst_all = max(worst_all, us if calls == 0 else float("inf"))
    sys.exit(0 if worst_all <= 0.01 else 1)


if __name__ == "__main__":
    main()
