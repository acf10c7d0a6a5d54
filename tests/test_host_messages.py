"""The typed messages between a revision run's parent and its leg hosts: every command survives its
line, each has the reply type its host must answer with, and a wrong answer is refused."""

from __future__ import annotations

import msgspec
import numpy as np
import pytest

from kprof.engine.host_messages import (
    REPLIES,
    Capture,
    Checked,
    Conditions,
    Describe,
    Exit,
    GateLegs,
    RaceCheck,
    ReadConditions,
    Ready,
    Time,
    Timed,
    Trim,
    decode_command,
    decode_reply,
    encode,
)

COMMANDS = [
    GateLegs(reference=True, sets=2),
    Trim(sets=3),
    Describe(measure=True),
    Capture(keep=["base", "fast"]),
    Time(items=[("fast", 2)], samples=12, kernel_time=True, recapture=True),
    RaceCheck(items=[("base", 0), ("fast", 0)], round=5),
    ReadConditions(),
    Exit(),
]


@pytest.mark.parametrize("command", COMMANDS, ids=lambda c: type(c).__name__)
def test_a_command_comes_back_as_it_was_sent(command: msgspec.Struct) -> None:
    line = encode(command)
    assert line.endswith("\n") and line.count("\n") == 1
    assert decode_command(line) == command


def test_every_command_but_exit_names_its_reply() -> None:
    assert set(REPLIES) == {type(c) for c in COMMANDS} - {Exit}


def test_replies_carry_what_measurements_leave() -> None:
    """numpy scalars from a timer or a check are sent as plain numbers and booleans."""
    line = encode(Timed(times=[[np.float64(1.5), 2.0]], label="cuda-events"))
    assert decode_reply(line, Timed).times == [[1.5, 2.0]]
    row = {"passed": np.bool_(True), "vs_baseline": np.float32(0.25)}
    assert decode_reply(encode(Checked(rows=[row])), Checked).rows == [{"passed": True, "vs_baseline": 0.25}]
    clocks = {"sm_clock_mhz": np.int64(1980), "throttle": None}
    assert decode_reply(encode(Conditions(conditions=clocks)), Conditions).conditions == clocks


def test_a_wrong_answer_is_refused() -> None:
    with pytest.raises(msgspec.ValidationError):
        decode_reply(encode(Ready(ready=True)), Timed)
    with pytest.raises(msgspec.DecodeError):
        decode_command('{"op": "launch_missiles"}')
