"""The compiled Kineto scanner keeps exactly what the msgspec path keeps: on the project's traces, on
the real traces of others, and on generated documents with every odd type, spacing and escape,
read a piece at a time and scanned ahead in worker threads; where it cannot, msgspec decides."""

from __future__ import annotations

import gzip
import json
import shutil
import sysconfig
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from conftest import EAGER, REAL, TRACES
from kprof.errors import KprofInputError
from kprof.ingest.formats import kineto_events, kineto_scan, kineto_stream
from kprof.ingest.formats.kineto_events import EXACT, FAST, EventBuffer, InexactTimes

needs_scanner = pytest.mark.skipif(not kineto_scan.AVAILABLE, reason="the C scanner is not built here")


def test_the_scanner_is_built_where_there_is_a_c_compiler() -> None:
    """Where kprof was installed with a C compiler at hand, a missing extension is a broken build,
    not a fallback (without one the install still succeeds and msgspec reads every trace)."""
    compiler = sysconfig.get_config_var("CC") or "cc"
    if shutil.which(compiler.split()[0]) is None:
        pytest.skip(f"no C compiler ({compiler}) here")
    assert kineto_scan.AVAILABLE


def _collect(path: Path, mode: str, monkeypatch: pytest.MonkeyPatch) -> EventBuffer:
    """``mode``: "msgspec" (no scanner), "piecewise" (scanner, a piece at a time) or "ahead"."""
    monkeypatch.setenv("KPROF_NO_SCANNER", "1" if mode == "msgspec" else "0")
    monkeypatch.setattr(kineto_stream, "SCAN_WORKERS", 2 if mode == "ahead" else 1)
    try:
        return kineto_stream.collect(path, False, FAST, None)
    except InexactTimes:
        return kineto_stream.collect(path, False, EXACT, None)


def _kept(c: EventBuffer) -> dict[str, Any]:
    """Everything a buffer hands to the tables, in comparable form."""
    ranges = np.concatenate(c.range_times, axis=1) if c.range_times else np.zeros((2, 0), np.int64)
    top = c.top
    return {
        "names": [c.names[i] for i in c.gpu_name.take().tolist()],
        "kinds": c.gpu_kind.take().tolist(),
        **{f"gpu.{k}": v.take().tolist() for k, v in c.gpu_ints.items()},
        **{f"launch.{k}": v.take().tolist() for k, v in c.launch.items()},
        "ranges": c.ranges,
        "range_times": ranges.tolist(),
        "skipped": c.skipped,
        "launch_calls": c.launch_calls,
        "other_categories": c.other_categories,
        "string_ids": c.string_ids,
        "base": top.baseTimeNanoseconds if top else None,
        "distributed": bytes(top.distributedInfo) if top else None,
    }


def _outcome(path: Path, mode: str, monkeypatch: pytest.MonkeyPatch) -> tuple[str, Any]:
    try:
        return "kept", _kept(_collect(path, mode, monkeypatch))
    except KprofInputError as err:
        return "error", str(err)
    except kineto_events.TimeOutOfRange:
        return "error", "out of range"


@needs_scanner
@pytest.mark.parametrize("piece", [1 << 12, 1 << 16])
@pytest.mark.parametrize("path", sorted(TRACES.glob("*.json.gz")), ids=lambda p: p.name)
def test_scanner_keeps_what_msgspec_keeps_on_recorded_traces(
    path: Path, piece: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(kineto_stream, "PIECE_BYTES", piece)
    reference = _collect(path, "msgspec", monkeypatch)
    assert reference.pieces_scanned == 0 and reference.gpu_rows > 0
    kept = _kept(reference)
    for mode in ("piecewise", "ahead"):
        scanned = _collect(path, mode, monkeypatch)
        assert scanned.pieces_scanned >= 3 and scanned.pieces_decoded == 0  # the scanner did the work
        assert _kept(scanned) == kept, mode


@pytest.mark.slow  # several seconds on the 2-core machine: CI's slow step runs it
@needs_scanner
@pytest.mark.skipif(not REAL.is_dir(), reason="real traces of others are not in this checkout")
def test_scanner_keeps_what_msgspec_keeps_on_real_traces(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(kineto_stream, "PIECE_BYTES", 1 << 16)
    paths = [p for p in sorted(REAL.glob("*.json*")) if not p.name.startswith("rocprofv3")]
    assert len(paths) > 10
    for path in paths:
        reference = _outcome(path, "msgspec", monkeypatch)
        assert _outcome(path, "ahead", monkeypatch) == reference, path.name


def test_pieces_the_scanner_cannot_read_go_to_msgspec(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A piece with a time finer than 1 ns (or an exponent) is read by msgspec, exactly as before;
    scanned ahead, the file is read again a piece at a time."""
    events = [
        {"ph": "X", "cat": "kernel", "name": f"k{i}", "pid": 0, "tid": 7, "ts": 1000 + i, "dur": 2, "args": {}}
        for i in range(400)
    ]
    text = json.dumps({"traceEvents": events}, indent=1)
    text = text.replace('"ts": 1300', '"ts": 1300.0004').replace('"ts": 1350', '"ts": 1.35e3')
    path = tmp_path / "odd.json"
    path.write_text(text)
    monkeypatch.setattr(kineto_stream, "PIECE_BYTES", 2048)
    reference = _collect(path, "msgspec", monkeypatch)
    piecewise = _collect(path, "piecewise", monkeypatch)
    assert piecewise.pieces_decoded >= 1 and piecewise.pieces_scanned > 5
    kept = _kept(reference)
    assert _kept(piecewise) == kept
    assert _kept(_collect(path, "ahead", monkeypatch)) == kept


# Generated documents: every field kprof reads, in each type it may come in; ``odd`` adds values
# msgspec refuses (there the scanner must hand over, and the error must read as before).
_names = st.one_of(
    st.sampled_from(["ProfilerStep#3", "cudaLaunchKernel", "hipModuleLaunchKernel", "gemm", "", "step"]),
    st.text(max_size=12),
)
_decimals = st.builds(lambda a, b: f"{a}.{b}", st.integers(0, 10**13), st.sampled_from(["0", "5", "25", "125", "1250"]))
_times = st.one_of(st.integers(-(10**6), 10**15).map(str), _decimals, _decimals, st.just("null"))
_ids = st.one_of(st.integers(-5, 2**40).map(str), st.sampled_from(['"Spans"', '"stream 7"', '"7"', "null"]))
_ints = st.one_of(st.integers(-(2**63) + 1, 2**63 - 1).map(str), st.just("null"))
_axes = st.one_of(
    st.lists(st.integers(0, 2**31).map(str), max_size=4).map(lambda xs: "[" + ",".join(xs) + "]"),
    st.just("null"),
)
_ARG_VALUES = {
    "device": _ints,
    "stream": st.one_of(_ints, st.sampled_from(['"0x10"', '"s"'])),
    "correlation": _ints,
    "registers per thread": _ints,
    "shared memory": _ints,
    "grid": _axes,
    "block": _axes,
    "External id": _ints,
    "note": st.sampled_from(['"}, {"', '[{"cat": "kernel"}, {}]', '{"a": [1, {"b": null}]}', '"\\u00e9\\n"']),
}
_CATEGORIES = ["kernel", "Kernel", "gpu_memcpy", "Memset", "cuda_runtime", "Driver", "user_annotation"]
_CATEGORIES += ["gpu_user_annotation", "cpu_op", "ac2g", ""]
_ODD = {
    "ph": st.just("null"),
    "ts": st.sampled_from(['"12"', "1e3", "0.0001", "true", "9223372036854775807"]),
    "dur": st.sampled_from(['"12"', "2E1", "1.00001"]),
    "pid": st.just("1.5"),
    "tid": st.just("{}"),
    "device": st.sampled_from(["2.0", '"3"', str(2**64)]),
    "correlation": st.sampled_from(['"3"', str(-(2**63))]),
    "grid": st.just("[1, null, 1]"),
}


def _odd(strategy: st.SearchStrategy[str], key: str, odd: bool) -> st.SearchStrategy[str]:
    return st.one_of(strategy, _ODD[key]) if odd and key in _ODD else strategy


@st.composite
def _args(draw: st.DrawFn, odd: bool) -> str:
    kind = draw(st.sampled_from(["object", "object", "object", "null", "absent"] + (["list"] if odd else [])))
    if kind != "object":
        return {"null": "null", "absent": "", "list": "[1]"}[kind]
    keys = draw(st.lists(st.sampled_from(sorted(_ARG_VALUES)), unique=True, max_size=6))
    return "{" + ", ".join(f"{json.dumps(k)}: {draw(_odd(_ARG_VALUES[k], k, odd))}" for k in keys) + "}"


@st.composite
def _event(draw: st.DrawFn, odd: bool) -> str:
    fields = {
        "ph": st.sampled_from(['"X"', '"X"', '"X"', '"X"', '"i"', '"M"']),
        "cat": st.sampled_from([json.dumps(c) for c in _CATEGORIES] + ['"ker\\u006eel"']),
        "name": _names.map(json.dumps),
        "pid": _ids,
        "tid": _ids,
        "ts": _times,
        "dur": _times,
    }
    missing = draw(st.lists(st.sampled_from(sorted(fields)), unique=True, max_size=2))
    chosen = [k for k in fields if k not in missing]
    members = [f'"{k}":{draw(st.sampled_from(["", " "]))}{draw(_odd(fields[k], k, odd))}' for k in chosen]
    args = draw(_args(odd))
    if args:
        members.append(f'"args": {args}')
    members = draw(st.permutations(members))
    return "{" + draw(st.sampled_from([",", ", ", ",\n    "])).join(members) + "}"


def _read_alike(path: Path, piece: int, monkeypatch: pytest.MonkeyPatch, scanned: int = 0) -> tuple[str, Any]:
    """The same outcome (tables or error) with msgspec alone, scanned a piece at a time and scanned
    ahead; with ``scanned``, at least that many pieces read by the scanner and none by msgspec."""
    monkeypatch.setattr(kineto_stream, "PIECE_BYTES", piece)
    reference = _outcome(path, "msgspec", monkeypatch)
    assert _outcome(path, "piecewise", monkeypatch) == reference
    assert _outcome(path, "ahead", monkeypatch) == reference
    if scanned:
        collected = _collect(path, "piecewise", monkeypatch)
        assert collected.pieces_scanned >= scanned and collected.pieces_decoded == 0  # the scanner read them
    return reference


def _agree(events: list[str], sep: str, folder: Path, monkeypatch: pytest.MonkeyPatch) -> tuple[str, Any]:
    path = folder / "trace.json"
    path.write_text('{"schemaVersion": 1, "traceEvents": [' + sep.join(events) + '], "baseTimeNanoseconds": 5}')
    return _read_alike(path, 192, monkeypatch)


_SEPARATORS = st.sampled_from([",", ",\n  ", " , "])
_GENERATED = settings(max_examples=100, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])


@needs_scanner
@_GENERATED
@given(events=st.lists(_event(odd=False), min_size=3, max_size=40), sep=_SEPARATORS)
def test_scanner_keeps_what_msgspec_keeps_on_generated_documents(
    events: list[str], sep: str, tmp_path_factory: pytest.TempPathFactory, monkeypatch: pytest.MonkeyPatch
) -> None:
    outcome, _ = _agree(events, sep, tmp_path_factory.mktemp("gen"), monkeypatch)
    assert outcome == "kept"


@needs_scanner
@_GENERATED
@given(events=st.lists(_event(odd=True), min_size=1, max_size=40), sep=_SEPARATORS)
def test_scanner_hands_odd_documents_to_msgspec(
    events: list[str], sep: str, tmp_path_factory: pytest.TempPathFactory, monkeypatch: pytest.MonkeyPatch
) -> None:
    _agree(events, sep, tmp_path_factory.mktemp("gen"), monkeypatch)


@needs_scanner
@pytest.mark.parametrize(
    ("inner", "valid"),
    [("é", True), ("\x7f", True), ("\\n", True), ('\\"', True), (" ", True), ("\x01", False), ("\x1f", False)],
    ids=["utf8", "del", "escape", "escaped-quote", "space", "control-01", "control-1f"],
)
def test_string_ends_are_found_at_every_byte_of_a_word(
    inner: str, valid: bool, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Raw bytes the generated documents never hold (JSON dumps escapes them): UTF-8, DEL and
    control characters (not JSON), at each of the 16 offsets around an 8-byte word of the string
    scan, where the first byte that ends or escapes a string is found inside the word."""
    events = [
        '{"ph":"X","cat":"kernel","name":"' + "k" * k + inner + f'zz","pid":0,"tid":7,"ts":{k},"dur":1}}'
        for k in range(16)
    ]
    path = tmp_path / "raw.json"
    path.write_bytes(('{"traceEvents": [' + ",\n".join(events) + "]}").encode())
    reference = _read_alike(path, 256, monkeypatch, scanned=3 if valid else 0)
    assert reference[0] == ("kept" if valid else "error")


@needs_scanner
@pytest.mark.parametrize(
    ("event", "scanned"),
    [
        # args met before ph or cat: skipped over, then read from their span
        (
            '{"args":{"device":1,"stream":7,"correlation":5,"grid":[2,1,1]},"ph":"X","cat":"kernel","ts":1,"dur":2}',
            True,
        ),
        # args read where they stand, then replaced by a later args
        ('{"ph":"X","cat":"kernel","ts":1,"dur":2,"args":{"device":1,"correlation":5},"args":{"stream":"s"}}', True),
        ('{"ph":"X","cat":"kernel","ts":1,"dur":2,"args":{"device":1},"args":null}', True),
        # read as a kernel's, then the event turns into a launch (read again as a launch's), or the
        # other way round, or into no kept kind
        ('{"ph":"X","cat":"kernel","ts":1,"dur":2,"args":{"device":1,"correlation":5},"cat":"cuda_runtime"}', True),
        ('{"ph":"X","cat":"cuda_runtime","ts":1,"args":{"device":2,"correlation":5},"cat":"kernel","dur":2}', True),
        ('{"ph":"X","cat":"kernel","ts":1,"dur":2,"args":{"device":1,"correlation":5},"ph":"i"}', True),
        ('{"ph":"i","cat":"kernel","ts":1,"dur":2,"args":{"device":1,"correlation":5},"ph":"X"}', True),
        # a launch's args hold a device msgspec never reads; read as a kernel's first, they go to msgspec
        ('{"ph":"X","cat":"kernel","ts":1,"dur":2,"args":{"device":"x","correlation":5},"cat":"cuda_runtime"}', False),
        ('{"ph":"X","cat":"cuda_runtime","ts":1,"args":{"device":"x","correlation":5},"cat":"kernel","dur":2}', False),
    ],
)
def test_args_read_in_place_agree_with_msgspec(
    event: str, scanned: bool, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The scanner reads a kept event's args where they stand when ph and cat came first: repeated
    keys, and a kind that changes after the args, must give what msgspec gives (last key wins)."""
    plain = '{"ph":"X","cat":"cuda_runtime","name":"cudaLaunchKernel","ts":0,"args":{"correlation":5}}'
    path = tmp_path / "repeated.json"
    path.write_text('{"traceEvents": [' + ",\n".join([plain, event.replace('"ts"', '"name":"k","ts"')] * 40) + "]}")
    _read_alike(path, 512, monkeypatch, scanned=10 if scanned else 0)


_DROPPED = b'{"ph":"X","cat":"cpu_op","name":"NAME","pid":1,"tid":1,"ts":1,"dur":1,"args":{"x":"ARG"}}'


def _among_kernels(event: bytes, path: Path) -> Path:
    """``event`` between twenty kernels on each side, written to ``path``."""
    plain = b'{"ph":"X","cat":"kernel","name":"k","pid":0,"tid":7,"ts":5,"dur":1,"args":{"correlation":3}}'
    path.write_bytes(b'{"traceEvents": [' + b",\n".join([plain] * 20 + [event] + [plain] * 20) + b"]}")
    return path


@needs_scanner
@pytest.mark.parametrize(
    ("name", "arg", "scanned"),
    [
        (b"a\xc3\xa9\xe2\x82\xac\xf0\x9f\x98\x80b", b"x", True),  # 2, 3 and 4-byte UTF-8
        (b"ab", b"\\ud83d\\ude00\\u00e9", True),  # an escaped surrogate pair
        (b"a\xffb", b"x", False),  # not UTF-8: msgspec refuses a name it decodes
        (b"a\xc0\xafb", b"x", False),  # overlong
        (b"a\xed\xa0\x80b", b"x", False),  # a surrogate written in UTF-8
        (b"a\xf4\x90\x80\x80b", b"x", False),  # beyond U+10FFFF
        (b"a\xe2\x82", b"x", False),  # cut short by the closing quote
        (b"ab", b"\\ud800", False),  # an escaped high surrogate alone, even in skipped args
        (b"ab", b"\\udc00x", False),  # a low one alone
        (b"ab", b"\\ud83dx", False),  # a high one followed by a character
        (b"ab", b"\xff", False),  # not UTF-8 in args msgspec skips: accepted there, msgspec decides
    ],
)
def test_strings_msgspec_refuses_are_refused_by_the_scanner(
    name: bytes, arg: bytes, scanned: bool, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """msgspec checks UTF-8 in the strings it decodes and surrogate escapes even in values it skips:
    a dropped event's string the scanner took where msgspec refuses it would turn an error into
    tables (the scanner used to accept every byte from 0x80 and every ``\\u`` escape)."""
    path = _among_kernels(_DROPPED.replace(b"NAME", name).replace(b"ARG", arg), tmp_path / "strings.json")
    _read_alike(path, 512, monkeypatch, scanned=5 if scanned else 0)


@needs_scanner
@pytest.mark.parametrize(
    ("field", "value", "scanned"),
    [
        ("ts", b"1e400", False),  # beyond float64: msgspec refuses it even in an event it drops
        ("dur", b"-1e400", False),
        ("ts", b"1.7976931348623157e309", False),
        ("dur", b"4.9e-330", False),  # an exponent: msgspec decides (it reads 0.0)
        ("ts", b"1" * 310 + b".5", False),  # more than 300 digits before the point
        ("ts", b"123456789012345678901234567890", True),  # an int beyond int64: msgspec takes it
        ("dur", b"12.500", True),
    ],
)
def test_times_msgspec_refuses_are_refused_by_the_scanner(
    field: str, value: bytes, scanned: bool, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A dropped event's ts and dur are decoded by msgspec too, where a float beyond float64's
    range is an error: the scanner used to take such an event and turn a refused trace into tables."""
    event = _DROPPED.replace(f'"{field}":1'.encode(), f'"{field}":'.encode() + value, 1)
    _read_alike(_among_kernels(event, tmp_path / "times.json"), 512, monkeypatch, scanned=5 if scanned else 0)


_SLICE = gzip.decompress(EAGER.read_bytes())
_SLICE = _SLICE[: _SLICE.index(b"},\n  {", 60_000) + 1] + b"\n]}"
_TOKENS = [b"\\ud800", b"\\udc00", b"\\ud83d\\ude00", b"\xc3\xa9", b"\xed\xa0\x80", b"\xc0\xaf", b"\\u00e9"]
_BYTES = st.one_of(st.sampled_from(_TOKENS), st.binary(min_size=1, max_size=3))


@needs_scanner
@settings(max_examples=40, deadline=None, derandomize=True, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    edits=st.lists(st.tuples(st.integers(200, len(_SLICE) - 1), _BYTES, st.booleans()), min_size=1, max_size=3),
)
def test_damaged_trace_reads_alike_with_and_without_the_scanner(
    edits: list[tuple[int, bytes, bool]], tmp_path_factory: pytest.TempPathFactory, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A recorded trace with bytes overwritten or inserted anywhere in its events: the same tables,
    or the same error, with the scanner (a piece at a time, and ahead) as with msgspec alone."""
    data = bytearray(_SLICE)
    for pos, new, insert in edits:
        data[pos : pos if insert else pos + len(new)] = new
    path = tmp_path_factory.mktemp("damaged") / "trace.json"
    path.write_bytes(bytes(data))
    _read_alike(path, 8192, monkeypatch)


@needs_scanner
def test_kernels_that_are_not_complete_events_are_counted_as_skipped_on_both_paths(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A kernel written as ph B/E or i is not read (kprof reads complete events) but is said: it
    was dropped without a word, leaving kernels = 0."""
    from kineto_events import kernel, launch, step, write_trace

    events = [step(0, 0, 50), launch(1, 1), kernel("k", 5, 10, 1)]
    events += [{**kernel("k", 20 + i, 1, 2 + i), "ph": ph} for i, ph in enumerate("BEi")]
    path = write_trace(tmp_path / "phases.json", events * 200)  # several pieces for the scanner
    monkeypatch.setattr(kineto_stream, "PIECE_BYTES", 4096)
    for mode in ("msgspec", "piecewise", "ahead"):
        kept = _kept(_collect(path, mode, monkeypatch))
        assert kept["skipped"] == 600 and len(kept["names"]) == 200, mode
