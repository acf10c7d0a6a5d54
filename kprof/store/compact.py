"""Compact finished run folders written before kprof compacted them itself:

    python -m kprof.store.compact FOLDER…     # every run folder under each FOLDER

Each table's parts become one zstd file (kprof.store.run_folder.RunFolder.compact); nothing is
read differently afterwards. A folder a kprof process is running is left alone and said; the tool
then exits 1, and 2 when no run folder was found at all.
"""

from __future__ import annotations

import sys
from pathlib import Path

from kprof.errors import KprofInputError
from kprof.store.run_folder import META, RunFolder


def compact_all(roots: list[Path]) -> tuple[list[Path], list[Path]]:
    """Compact every run folder under ``roots``: the folders compacted, and those left alone (each
    said on stderr: in use by a kprof process, or unreadable)."""
    done, left = [], []
    for root in roots:
        for meta in sorted(Path(root).rglob(META)):
            folder = RunFolder(meta.parent)
            try:
                with folder.lock():
                    folder.compact()
            except KprofInputError as e:
                print(f"kprof: {e}", file=sys.stderr)
                left.append(meta.parent)
                continue
            done.append(meta.parent)
    return done, left


def main(argv: list[str]) -> int:
    done, left = compact_all([Path(a) for a in argv])
    for path in done:
        print(path)
    if not done and not left:
        print(f"kprof: no run folder under {' '.join(argv) or '(nothing given)'}", file=sys.stderr)
        return 2
    return 1 if left else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
