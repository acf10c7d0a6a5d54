"""Kernel names: demangling and the short form used in tables.

Short names drop the C++ return type, template arguments and parameter list
(``void at::native::foo<float, 4>(float*, int)`` → ``at::native::foo``) and leave names that are
not C++ (Triton's ``_fwd_kernel_stage1``) untouched. Only kernels get short names this way; copies
and memsets keep their names (``Memcpy DtoD (Device -> Device)``).
"""

from __future__ import annotations

import shutil
import subprocess
from collections.abc import Iterable
from functools import lru_cache

# (command, arguments to try first): binutils' c++filt stops at a recursion limit that the long
# CK and CUTLASS names of real traces hit; ``--no-recurse-limit`` (binutils 2.32+) lifts it.
_DEMANGLERS = (("c++filt", ("--no-recurse-limit",)), ("llvm-cxxfilt", ()))


def _run_demangler(tool: str, flags: tuple[str, ...], names: list[str]) -> list[str] | None:
    """One process for the whole batch; None when the tool fails (e.g. an older c++filt that does
    not know the flag) or answers with a different number of lines."""
    try:
        done = subprocess.run(
            [tool, *flags], input="\n".join(names) + "\n", capture_output=True, text=True, timeout=60, check=True
        )
    except (OSError, subprocess.SubprocessError):
        return None
    lines = done.stdout.splitlines()
    return lines if len(lines) == len(names) else None


def demangle_all(names: Iterable[str]) -> dict[str, str]:
    """Map each Itanium-mangled name (``_Z…``, with or without ``.kd``) to its demangled form.

    Uses binutils' or LLVM's ``c++filt``: they know recent manglings (``DF16b`` for
    ``std::bfloat16_t``) that older libstdc++ demanglers reject. Names it cannot demangle, or all of
    them when no demangler is installed, are returned unchanged.
    """
    mangled = sorted({n for n in names if n.startswith("_Z")})
    if not mangled:
        return {}
    cores = [n[:-3] if n.endswith(".kd") else n for n in mangled]
    for tool, flags in _DEMANGLERS:
        if shutil.which(tool) is None:
            continue
        lines = _run_demangler(tool, flags, cores)
        if lines is None and flags:
            lines = _run_demangler(tool, (), cores)
        if lines is not None:
            return {n: (d if d != c else n) for n, c, d in zip(mangled, cores, lines)}
    return {n: n for n in mangled}


def _strip_brackets(text: str) -> str:
    """Remove every top-level ``<…>`` and ``(…)`` group, keeping ``->`` and ``operator<`` intact."""
    out: list[str] = []
    depth = 0
    for i, c in enumerate(text):
        if c in "<(" and not (c == "<" and text.endswith("operator", 0, i)):
            depth += 1
        elif c in ">)" and depth and not (c == ">" and i and text[i - 1] == "-"):
            depth -= 1
        elif depth == 0:
            out.append(c)
    return "".join(out)


@lru_cache(maxsize=65536)
def short_name(name: str) -> str:
    """The kernel name a table shows: C++ names lose return type, templates and parameters."""
    for suffix in (" [clone .kd]", ".kd"):
        if name.endswith(suffix):
            name = name[: -len(suffix)]
            break
    if "<" not in name and "(" not in name:
        return name.strip()
    # "(anonymous namespace)" belongs to the qualified name: protect its brackets and its space.
    stripped = _strip_brackets(name.replace("(anonymous namespace)", "{anon}")).strip()
    # What remains is "[return type ]qualified::name"; a space separates the return type.
    stripped = stripped.rsplit(" ", 1)[-1]
    return stripped.replace("{anon}", "(anonymous namespace)") or name
