"""What a command's TARGET names, decided from the path alone (no pandas, no torch): answered before
anything heavy is imported, so a mistyped target is one line at once."""

from __future__ import annotations

from pathlib import Path

from kprof.errors import KprofInputError
from kprof.store.layout import is_run_folder


def stored_run(target: str) -> Path | None:
    """What `kprof attribute TARGET` names: a run folder (its path), or a workload to run first
    (None); a folder that is no run, or a path that does not exist, is a one-line error."""
    root = Path(target)
    if is_run_folder(root):
        return root
    if root.is_dir() or (root.suffix != ".py" and "/" in target):
        raise KprofInputError(
            target, "is not a kprof run folder (no meta.json) nor a workload" if root.exists() else "no such run folder"
        )
    return None
