"""Compact finished run folders written before kprof compacted them itself:

    python -m kprof.store.compact FOLDER…     # every run folder under each FOLDER

Each table's parts become one zstd file (kprof.store.run_folder.RunFolder.compact); nothing is
read differently afterwards. A folder a kprof process is running is left alone.
"""

from __future__ import annotations

import sys
from pathlib import Path

from kprof.errors import KprofInputError
from kprof.store.run_folder import META, RunFolder


def compact_all(roots: list[Path]) -> list[Path]:
    """Compact every run folder under ``roots``; the folders compacted."""
    done = []
    for root in roots:
        for meta in sorted(Path(root).rglob(META)):
            folder = RunFolder(meta.parent)
            try:
                with folder.lock():
                    folder.compact()
            except KprofInputError as e:
                print(f"kprof: {e}", file=sys.stderr)
                continue
            done.append(meta.parent)
    return done


if __name__ == "__main__":
    for path in compact_all([Path(a) for a in sys.argv[1:]]):
        print(path)
