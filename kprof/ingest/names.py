"""Kernel names: demangling and the short form used in tables.

Short names drop the C++ return type, template arguments and parameter list
(``void at::native::foo<float, 4>(float*, int)`` → ``at::native::foo``) and leave names that are
not C++ (Triton's ``_fwd_kernel_stage1``) untouched. Only kernels get short names this way; copies
and memsets keep their names (``Memcpy DtoD (Device -> Device)``).

A table's rows are distinct kernels, and many share a short name (53 ``cutlass::Kernel`` GEMMs in
one real trace): ``table_labels`` gives those rows their template arguments, compacted, so that no
two rows of a table read alike.
"""

from __future__ import annotations

import re
import shutil
import subprocess
from collections import Counter, defaultdict
from collections.abc import Iterable, Sequence
from functools import lru_cache
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import numpy as np
    import pandas as pd

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


LABEL_CHARS = 100  # a label is cut (with "…") beyond this, keeping 40 after its short name; tables fold names
_ANONYMOUS = "(anonymous namespace)::"
_NAMESPACES = re.compile(r"\b(?:[A-Za-z_]\w*::)+(?=[A-Za-z_~])")
_SPACED_CLOSE = re.compile(r">\s+(?=>)")
_ENCLOSING_CALL = re.compile(r"\((?:[^()]|\([^()]*\))*\)(?=::)")  # a function's parameters before ::lambda
_CHAIN_NOISE = re.compile(r"::operator\(\)\(\) const|::\{lambda\(\)#\d+\}")


def _bracket_group(text: str, start: int, open_: str, close: str) -> str:
    """The balanced ``open_…close`` group at ``start`` ('' when none starts there); ``->`` is not a
    closing bracket."""
    if start >= len(text) or text[start] != open_:
        return ""
    depth = 0
    for i in range(start, len(text)):
        c = text[i]
        if c == open_:
            depth += 1
        elif c == close and not (close == ">" and text[i - 1] == "-"):
            depth -= 1
            if depth == 0:
                return text[start : i + 1]
    return text[start:]


def _compact(text: str) -> str:
    """C++ as a reader scans it: no namespaces, no enclosing functions' parameters or lambda chains
    (``at::native::sin_kernel_cuda(at::TensorIteratorBase&)::{lambda()#2}::…::{lambda(float)#1}``
    → ``sin_kernel_cuda::{lambda(float)#1}``), ``>>`` closed up."""
    text = _NAMESPACES.sub("", text.replace(_ANONYMOUS, ""))
    text = _CHAIN_NOISE.sub("", text)
    text = _ENCLOSING_CALL.sub("", text)
    return _SPACED_CLOSE.sub(">", text)


def _first_difference(a: str, b: str) -> int:
    """The length of the common prefix (halving: slices compare in C, a character loop would not)."""
    low, high = 0, min(len(a), len(b))
    while low < high:
        mid = (low + high + 1) // 2
        if a[:mid] == b[:mid]:
            low = mid
        else:
            high = mid - 1
    return low


def _differs_at(texts: list[str]) -> list[int]:
    """For each text, where it first differs from the most alike of the others: in sorted order the
    most alike is a neighbour, so n log n rather than every pair."""
    order = sorted(range(len(texts)), key=texts.__getitem__)
    at = [0] * len(texts)
    for a, b in zip(order, order[1:]):
        shared = _first_difference(texts[a], texts[b])
        at[a], at[b] = max(at[a], shared), max(at[b], shared)
    return at


def _window(text: str, at: int, room: int) -> str:
    """``text`` cut to ``room`` characters around ``at``, where it differs from the others (``…``
    marks what is left out), so that truncation does not hide what tells it apart."""
    if len(text) <= room:
        return text
    start = 0 if at < room - 10 else text.rfind(", ", 0, max(at - 10, 1)) + 2
    start = 0 if start < 2 else start
    body = text[start : start + room - (1 if start else 0) - 1]
    return ("…" if start else "") + body + ("…" if start + len(body) < len(text) else "")


def table_labels(names: Sequence[str], shorts: Sequence[str]) -> list[str]:
    """What each row of a table is called: its short name, unless other rows' kernels share it;
    then the short name with its template arguments (compacted, and cut around what tells them
    apart), then with its parameters too, and ``#k`` (in order of full name) for any still alike."""
    holders: defaultdict[str, set[str]] = defaultdict(set)
    for name, short in zip(names, shorts):
        holders[short].add(name)
    label: dict[tuple[str, str], str] = {}
    for short, group in holders.items():
        if len(group) == 1:
            label[short, next(iter(group))] = short
            continue
        ordered = sorted(group)
        parts = []
        for name in ordered:
            at = name.find(short)
            after = at + len(short) if at >= 0 else len(name)
            template = _bracket_group(name, after, "<", ">")
            params = _bracket_group(name, after + len(template), "(", ")")
            parts.append((_compact(template), _compact(template + params)))
        room = max(LABEL_CHARS - len(short), 40)
        for level in (0, 1):
            texts = [p[level] for p in parts]
            candidates = [short + _window(t, at, room) for t, at in zip(texts, _differs_at(texts))]
            if len(set(candidates)) == len(candidates):
                break
        seen = Counter(candidates)
        counter: Counter[str] = Counter()
        for name, text in zip(ordered, candidates):
            if seen[text] > 1:
                counter[text] += 1
                text = f"{text} #{counter[text]}"
            label[short, name] = text
    return [label[short, name] for name, short in zip(names, shorts)]


def name_labels(names: Iterable[str]) -> dict[str, str]:
    """Each distinct full kernel name → the label a table shows it by among the others given."""
    distinct = list(dict.fromkeys(names))
    return dict(zip(distinct, table_labels(distinct, [short_name(n) for n in distinct])))


def labelled(kernels: pd.DataFrame) -> pd.DataFrame:
    """``kernels`` (rows with ``name`` and ``short_name``) with the ``label`` each row is shown by."""
    if not len(kernels):
        return kernels.assign(label=[])
    return kernels.assign(label=table_labels(kernels["name"].tolist(), kernels["short_name"].tolist()))


def name_matches(names: pd.Series, pattern: re.Pattern[str]) -> np.ndarray:
    """Regex search over a (categorical) name column, testing each distinct name once."""
    import pandas as pd  # here, not at import: the Kineto decoder imports this module without pandas

    distinct = pd.unique(names)
    hits = {n for n in distinct if pattern.search(str(n)) is not None}
    return names.isin(hits).to_numpy(bool)
