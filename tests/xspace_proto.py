"""A small XSpace profile written for tests, by the field numbers of the published xplane.proto
(XSpace.planes 1; XPlane id 1, name 2, lines 3, event_metadata 4, stat_metadata 5; XLine id 1,
name 2, timestamp_ns 3, events 4; XEvent metadata_id 1, offset_ps 2, duration_ps 3, stats 4;
XStat metadata_id 1, int64_value 4; XEventMetadata / XStatMetadata id 1, name 2). Protobuf's
wire format is varints and length-prefixed fields; kprof itself never decodes it (XProf does)."""

from __future__ import annotations

from dataclasses import dataclass, field


def _varint(n: int) -> bytes:
    n &= (1 << 64) - 1  # negative int64s take ten bytes, as protobuf writes them
    out = bytearray()
    while True:
        low, n = n & 0x7F, n >> 7
        out.append(low | (0x80 if n else 0))
        if not n:
            return bytes(out)


def _int(number: int, value: int) -> bytes:
    return _varint(number << 3) + _varint(value)


def _bytes(number: int, value: bytes) -> bytes:
    return _varint(number << 3 | 2) + _varint(len(value)) + value


@dataclass
class Event:
    name: str
    start_ns: int
    dur_ns: int
    stats: dict[str, int] = field(default_factory=dict)  # int64 stats, e.g. correlation_id


@dataclass
class Line:
    name: str
    events: list[Event]


def plane(plane_id: int, name: str, lines: list[Line]) -> bytes:
    """One XPlane: its lines (timestamp 0, offsets in ps), and the metadata every name needs."""
    event_ids: dict[str, int] = {}
    stat_ids: dict[str, int] = {}
    body = _int(1, plane_id) + _bytes(2, name.encode())
    for i, line in enumerate(lines):
        events = b""
        for e in line.events:
            eid = event_ids.setdefault(e.name, len(event_ids) + 1)
            stats = b"".join(
                _bytes(4, _int(1, stat_ids.setdefault(k, len(stat_ids) + 1)) + _int(4, v)) for k, v in e.stats.items()
            )
            events += _bytes(4, _int(1, eid) + _int(2, e.start_ns * 1000) + _int(3, e.dur_ns * 1000) + stats)
        body += _bytes(3, _int(1, i + 1) + _bytes(2, line.name.encode()) + _int(3, 0) + events)
    for text, eid in event_ids.items():  # map<int64, XEventMetadata>: entries of key 1, value 2
        body += _bytes(4, _int(1, eid) + _bytes(2, _int(1, eid) + _bytes(2, text.encode())))
    for text, sid in stat_ids.items():
        body += _bytes(5, _int(1, sid) + _bytes(2, _int(1, sid) + _bytes(2, text.encode())))
    return body


def xspace(planes: list[bytes]) -> bytes:
    return b"".join(_bytes(1, p) for p in planes)
