"""The names of a run folder's files, for code that must recognise a folder without reading it
(kprof.store.run_folder reads and writes them; importing it costs pandas and pyarrow)."""

from __future__ import annotations

from pathlib import Path

META = "meta.json"


def is_run_folder(path: Path) -> bool:
    """Whether ``path`` holds a meta.json of any kind: one that cannot be read is then a one-line
    error naming it (kprof.store.run_folder.RunFolder.read_run), not "no run folder"."""
    meta = path / META
    return meta.exists() or meta.is_symlink()
