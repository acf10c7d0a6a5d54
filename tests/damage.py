"""Damage to a folder of kprof's files, for the fuzz tests of run folders and saved trace folders."""

from __future__ import annotations

from pathlib import Path

SHAPES = [b"", b"{}", b"[]", b"42", b'"x"', b'{"legs": "oops"}', b"\xff\xfe", b"PAR1", b"null"]


def damage_one_file(folder: Path, which: int, how: int, where: float, data: bytes) -> str:
    """Damage one file of ``folder`` (``which`` picks it): truncated at ``where``, ``data`` written
    over it there, replaced by JSON of another shape, or deleted; says what was done."""
    files = sorted(p for p in folder.rglob("*") if p.is_file())
    target = files[which % len(files)]
    raw = target.read_bytes()
    kind = ("truncate", "overwrite", "reshape", "delete")[how]
    if kind == "truncate":
        target.write_bytes(raw[: int(len(raw) * where)])
    elif kind == "overwrite":
        pos = int(len(raw) * where)
        target.write_bytes(raw[:pos] + data + raw[pos + len(data) :])
    elif kind == "reshape":
        target.write_bytes(SHAPES[int(where * len(SHAPES)) % len(SHAPES)])
    else:
        target.unlink()
    return f"{kind} {target.relative_to(folder)}"
