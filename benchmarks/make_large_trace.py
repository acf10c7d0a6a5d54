"""Build a large Kineto trace by tiling a real one in time, for ingest benchmarks.

Copy i of every event is shifted by i × (the source's span + 1 ms); correlation ids, External ids,
flow ids and ProfilerStep numbers are offset so that copies never collide. The result has the
structure of the source trace (same kernels, launches, annotations), only longer. Timestamps
stay exact decimals.

    python benchmarks/make_large_trace.py traces/llama_eager_decode.pt.trace.json.gz OUT.json --mb 120

For many-rank collections, ``--rank R --world-size N`` writes ``distributedInfo`` and ``--jitter F``
stretches each kernel by a random factor 1 + F·z (z standard normal, seeded by the rank), so ranks
differ in their timings as the ranks of a real job do.
"""

from __future__ import annotations

import argparse
import gzip
import json
import random
import re
from decimal import Decimal
from pathlib import Path

import msgspec

STEP = re.compile(r"^ProfilerStep#(\d+)$")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("source", type=Path)
    ap.add_argument("out", type=Path)
    ap.add_argument("--mb", type=float, required=True, help="target size of the output, in MB (10^6 bytes)")
    ap.add_argument("--rank", type=int, default=None, help="write distributedInfo with this rank")
    ap.add_argument("--world-size", type=int, default=None)
    ap.add_argument("--jitter", type=float, default=0.0, help="relative spread of kernel durations (e.g. 0.02)")
    args = ap.parse_args()
    rng = random.Random(args.rank or 0)

    opener = gzip.open if args.source.read_bytes()[:2] == b"\x1f\x8b" else open
    with opener(args.source, "rb") as f:
        doc = msgspec.json.Decoder(dict[str, object], float_hook=Decimal).decode(f.read())
    events: list[dict] = doc.pop("traceEvents")  # type: ignore[assignment]
    timed = [e for e in events if "ts" in e and isinstance(e["ts"], (int, Decimal))]
    t0 = min(Decimal(e["ts"]) for e in timed)
    t1 = max(Decimal(e["ts"]) + Decimal(e.get("dur", 0)) for e in timed)
    shift = t1 - t0 + 1000
    max_id = max(
        [int(e.get("args", {}).get(k, 0)) for e in events for k in ("correlation", "External id")]
        + [int(e.get("id", 0)) for e in events if isinstance(e.get("id"), int)]
    )
    steps = [int(m.group(1)) for e in events if (m := STEP.match(str(e.get("name", ""))))]
    step_span = (max(steps) - min(steps) + 1) if steps else 0

    enc = msgspec.json.Encoder(decimal_format="number")
    head = enc.encode({k: v for k, v in doc.items() if k not in ("traceName", "distributedInfo")})
    if args.rank is not None:  # spelled as Kineto does ("rank": 3): HTA finds ranks by that text
        info = {"backend": "nccl", "rank": args.rank, "world_size": args.world_size or args.rank + 1}
        head = head[:-1] + b', "distributedInfo": ' + json.dumps(info).encode() + b"}"
    target = int(args.mb * 1e6)
    written = copies = 0
    with args.out.open("wb") as out:
        out.write(head[:-1] + b', "traceEvents": [\n')
        first = True
        while written < target:
            off_t, off_id, off_step = shift * copies, (max_id + 1) * copies, step_span * copies
            for e in events:
                e2 = dict(e)
                if "ts" in e2 and isinstance(e2["ts"], (int, Decimal)):
                    e2["ts"] = Decimal(e2["ts"]) + off_t
                if args.jitter and e2.get("cat") == "kernel" and "dur" in e2:
                    stretch = max(0.5, 1 + args.jitter * rng.gauss(0, 1))
                    e2["dur"] = (Decimal(e2["dur"]) * Decimal(f"{stretch:.4f}")).quantize(Decimal("0.001"))
                a = e2.get("args")
                if isinstance(a, dict) and ("correlation" in a or "External id" in a):
                    a = dict(a)
                    for k in ("correlation", "External id"):
                        if isinstance(a.get(k), int):
                            a[k] += off_id
                    e2["args"] = a
                if isinstance(e2.get("id"), int):
                    e2["id"] += off_id
                m = STEP.match(str(e2.get("name", "")))
                if m:
                    e2["name"] = f"ProfilerStep#{int(m.group(1)) + off_step}"
                line = (b"" if first else b",\n") + b"  " + enc.encode(e2)
                first = False
                out.write(line)
                written += len(line)
            copies += 1
        out.write(b'\n], "traceName": "' + args.out.name.encode() + b'"}\n')
    print(f"wrote {args.out} ({args.out.stat().st_size / 1e6:.1f} MB, {copies} copies of {len(events)} events)")


if __name__ == "__main__":
    main()
