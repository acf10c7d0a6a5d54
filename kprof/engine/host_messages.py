"""The messages between a revision run's parent (kprof.engine.hosted) and its leg hosts
(kprof.engine.leg_host), typed: one JSON line each way per command, a command tagged by its
``op`` field, each reply a type of its own. A host answers a command with the reply its class
names; anything else on the line is a broken host."""

from __future__ import annotations

from typing import Any

import msgspec


class Ready(msgspec.Struct, frozen=True):
    """A host's first line: its revision's workload imported and the case found, or why not
    (``revision_wide``: no case of this revision can run: its code does not import)."""

    ready: bool
    reason: str = ""
    revision_wide: bool = False


class Gated(msgspec.Struct, frozen=True):
    failed: dict[str, str]  # leg → why it is not timed
    launches: dict[str, list[dict[str, Any]]]  # leg → its launches on the first buffer set
    sets: int  # buffer sets the host set up
    held_bytes: int = 0  # GPU memory the host's allocator holds after the gate (0 on a CPU)
    free_bytes: int = 0  # the GPU's free memory then, every process counted


class Described(msgspec.Struct, frozen=True):
    label: str
    info: dict[str, Any]


class Estimated(msgspec.Struct, frozen=True):
    t_ns: dict[str, float]  # leg → its length from the warm-up


class Timed(msgspec.Struct, frozen=True):
    times: list[list[float]]  # per item asked, its samples (ns)
    label: str


class Checked(msgspec.Struct, frozen=True):
    rows: list[dict[str, Any]]  # rows of the checks table


class Conditions(msgspec.Struct, frozen=True):
    conditions: dict[str, Any]


class _Command(msgspec.Struct, frozen=True, tag_field="op"):
    """A command to a leg host; REPLIES names the type of its answer."""


class GateLegs(_Command, frozen=True, tag="gate"):
    """Every leg on every buffer set, outputs poisoned first and saved for the parent to compare."""

    reference: bool = False  # also save the float64 reference (the baseline revision's host)
    sets: int = 0  # set up only the first this many buffer sets (0: every set): what GPU memory allows


class Trim(_Command, frozen=True, tag="trim"):
    """Keep only the first ``sets`` buffer sets (and their calls and outputs); give the rest back."""

    sets: int


class Describe(_Command, frozen=True, tag="describe"):
    measure: bool = False  # also measure the device (copy bandwidth, self-checks)


class Capture(_Command, frozen=True, tag="capture"):
    keep: list[str] = []  # the legs still timed: the others' graphs are dropped


class Time(_Command, frozen=True, tag="time"):
    items: list[tuple[str, int]] = []  # (leg, buffer set), in order
    samples: int = 1
    kernel_time: bool = False
    recapture: bool = False


class RaceCheck(_Command, frozen=True, tag="race"):
    items: list[tuple[str, int]] = []
    round: int = 0


class ReadConditions(_Command, frozen=True, tag="conditions"):
    pass


class Exit(_Command, frozen=True, tag="exit"):
    pass


Command = GateLegs | Trim | Describe | Capture | Time | RaceCheck | ReadConditions | Exit
REPLIES: dict[type, type] = {
    GateLegs: Gated,
    Trim: Gated,
    Describe: Described,
    Capture: Estimated,
    Time: Timed,
    RaceCheck: Checked,
    ReadConditions: Conditions,
}
_commands = msgspec.json.Decoder(Command)


def _plain(value: Any) -> Any:
    """A numpy scalar a measurement left: its Python value."""
    item = getattr(value, "item", None)
    if callable(item):
        return item()
    raise NotImplementedError(f"cannot send a {type(value).__name__}")


_encoder = msgspec.json.Encoder(enc_hook=_plain)


def encode(message: msgspec.Struct) -> str:
    """One line."""
    return _encoder.encode(message).decode() + "\n"


def decode_command(line: str) -> Command:
    return _commands.decode(line)


def decode_reply(line: str, kind: type[Any]) -> Any:
    return msgspec.json.decode(line, type=kind)
