"""A revision's bundled family comes from that revision's tree, under the package name the tree
uses: ``kprof_kernels``, or ``kernels`` in kprof's own history before the rename."""

from __future__ import annotations

from pathlib import Path

from kprof.engine.leg_host import bundled_package


def _family(tree: Path, package: str, family: str = "paged_decode") -> None:
    (tree / package / family).mkdir(parents=True)
    (tree / package / family / "workload.py").write_text("WORKLOAD = None\n")


def test_a_tree_after_the_rename(tmp_path: Path) -> None:
    _family(tmp_path, "kprof_kernels")
    assert bundled_package(tmp_path, "paged_decode") == "kprof_kernels"


def test_a_tree_from_before_the_rename(tmp_path: Path) -> None:
    _family(tmp_path, "kernels")
    assert bundled_package(tmp_path, "paged_decode") == "kernels"


def test_a_family_only_the_new_name_has(tmp_path: Path) -> None:
    _family(tmp_path, "kernels", "copy")
    _family(tmp_path, "kprof_kernels", "paged_decode")
    assert bundled_package(tmp_path, "paged_decode") == "kprof_kernels"
    assert bundled_package(tmp_path, "copy") == "kernels"
