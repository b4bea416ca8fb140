"""Field converters for job specs: each takes (value, At) and returns the clean value or raises SpecError.

Type rules:
- integer fields take YAML integers only: a boolean is not an integer and a quoted "4" is a string, not 4.
  They are read as a person writes them, in decimal digits: YAML 1.1 would read `010` as 8 and `1:00` as 60,
  ddpctl reads `010` as 10 and refuses `1:00`, `0x10`, `0o7`, `0b1`, `1_000`. Every integer field has an upper
  bound (INT_MAX unless the field says less): no input makes ddpctl's own work unbounded.
  Number fields (health.straggler_factor) take YAML integers or finite floats, never booleans or strings.
- string fields take any scalar *as written*: `mem: 4000` is "4000", `time: 1:30:00` stays "1:30:00" (YAML 1.1
  would read it as 5400) and `partition: on` is "on". From a Python mapping, numbers use str() and booleans
  "true"/"false". `null` is only accepted where the field may be unset.
- boolean fields take YAML booleans only (true/false, yes/no, on/off).
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable, Mapping, Sequence
from datetime import date
from pathlib import Path
from typing import Any

from ddpctl.spec.yamldoc import At

Conv = Callable[[Any, At], Any]

NAME_RE = r"[A-Za-z0-9._-]+"
NAME_MAX = 128
CLUSTER_RE = r"[A-Za-z0-9][A-Za-z0-9._-]{0,63}"  # a cluster profile's name (clusters.yaml, spec `cluster:`)
SLURM_NAMES_RE = r"[A-Za-z0-9._-]+(,[A-Za-z0-9._-]+)*"  # partition/account/qos: one name or a comma list
MEM_RE = r"[0-9]+[KMGT]?"
ENV_NAME_RE = r"[A-Za-z_][A-Za-z0-9_]*"
SBATCH_OPTION_RE = r"[a-z][a-z0-9-]*"
IFNAME_RE = r"[=^]?[A-Za-z0-9_.:@-]+(,[A-Za-z0-9_.:@-]+)*"  # NCCL_SOCKET_IFNAME syntax: ^exclude, =exact
# USR1 is the classic, USR2 what submitit moved to (NCCL builds grabbed USR1); URG and ALRM are spare signals
# a trainer does not get by accident. TERM/INT/HUP are refused: Slurm and terminals send those to mean "stop".
CONTAINER_RUNTIMES = ("pyxis", "apptainer", "singularity", "podman", "charliecloud")
SIGNALS = ("USR1", "USR2", "URG", "ALRM")
# Experiment trackers a run gets one stable identity for (ddpctl.run.tracking), whatever its attempts.
TRACKERS = ("wandb", "mlflow", "tensorboard")
# What a script may ask to receive (requeue.script_signal): what Lightning/submitit-style handlers expect.
SCRIPT_SIGNALS = ("USR1", "USR2", "TERM", "INT", "HUP", "URG", "ALRM")
TIME_FORMATS = "a Slurm time (M, M:S, H:M:S, D-H, D-H:M, D-H:M:S) or UNLIMITED"
_DIGITS = re.compile(r"[0-9]+")
_DECIMAL = re.compile(r"[-+]?[0-9]+")
_SCALARS = (str, int, float, date)  # bool is an int


def time_to_seconds(text: str) -> int | None:
    """Seconds in a Slurm time (`M`, `M:S`, `H:M:S`, `D-H`, `D-H:M`, `D-H:M:S`); None for UNLIMITED/INFINITE.

    Raises ValueError on anything else. Like Slurm, field ranges are not checked (`90` minutes, `0:90`).
    """
    if text.upper() in ("UNLIMITED", "INFINITE"):
        return None
    days_text, dash, clock = text.rpartition("-")
    parts = clock.split(":")
    if not all(_DIGITS.fullmatch(p) for p in [*parts, *([days_text] if dash else [])]) or len(parts) > 3:
        raise ValueError(f"not a Slurm time: {text!r}, expected {TIME_FORMATS}")
    numbers = [int(p) for p in parts]
    if dash:  # D-H, D-H:M, D-H:M:S
        numbers += [0] * (3 - len(numbers))
        hours, minutes, seconds = numbers
        return ((int(days_text) * 24 + hours) * 60 + minutes) * 60 + seconds
    units = {1: (60,), 2: (60, 1), 3: (3600, 60, 1)}[len(numbers)]  # M, M:S, H:M:S
    return sum(n * u for n, u in zip(numbers, units, strict=True))


def as_text(value: Any, at: At, expected: str) -> str:
    """A scalar as the user wrote it (see the module docstring); no NUL bytes."""
    if isinstance(value, bool) and at.raw() is None:
        value = "true" if value else "false"
    if value is None or not isinstance(value, _SCALARS):
        raise at.fail(value, expected, typed=True)
    text = value if isinstance(value, str) else (at.raw() or str(value))
    if "\0" in text:
        raise at.fail(text, f"{expected} without NUL bytes")
    if not _is_utf8(text):
        # A lone surrogate (from "\udc80" in YAML or undecodable bytes in a --set) cannot reach a process's
        # argv or environment: refuse it here rather than let every rank die at launch.
        raise at.fail(text, f"{expected} in valid Unicode (no lone surrogates such as \\udc80)")
    return text


def _is_utf8(text: str) -> bool:
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


INT_MAX = 2**31 - 1  # Slurm and torchrun keep counts in 32-bit integers


def integer(low: int, high: int = INT_MAX, *, nullable: bool = False) -> Conv:
    expected = f"an integer in {low}..{high}"
    expected += " or null" if nullable else ""

    def conv(value: Any, at: At) -> int | None:
        if value is None and nullable:
            return None
        if isinstance(value, bool) or not isinstance(value, int):
            raise at.fail(value, expected, typed=True)
        raw = at.raw()
        number = int(value)
        if raw is not None:  # written in the YAML: read the digits as a person means them
            if not _DECIMAL.fullmatch(raw):
                raise at.fail(raw, f"{expected}, written in decimal digits")
            number = int(raw, 10)
        if number < low or number > high:
            raise at.fail(number, expected)
        return number

    return conv


def number(low: float, high: float | None = None, *, above: bool = False, nullable: bool = False) -> Conv:
    expected = f"a number {'>' if above else '>='} {low}" if high is None else f"a number in {low:g}..{high:g}"
    expected += " or null" if nullable else ""

    def conv(value: Any, at: At) -> float | None:
        if value is None and nullable:
            return None
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            raise at.fail(value, expected, typed=True)
        if not math.isfinite(value) or value < low or (above and value == low) or (high is not None and value > high):
            raise at.fail(value, expected)
        return float(value)

    return conv


def boolean(value: Any, at: At) -> bool:
    if not isinstance(value, bool):
        raise at.fail(value, "true or false", typed=True)
    return value


setattr(boolean, "choices", ("true", "false"))  # noqa: B010 - read by shell completion (overrides.key_choices)


def switch_or_auto(value: Any, at: At) -> bool | None:
    """true, false, or auto (also null): None means auto, the field's own rule decides."""
    if value is None or value == "auto":
        return None
    if not isinstance(value, bool):
        raise at.fail(value, "true, false or auto", typed=True)
    return value


setattr(switch_or_auto, "choices", ("auto", "true", "false"))  # noqa: B010 - read by shell completion


def text(
    pattern: str | None = None, *, nullable: bool = False, what: str = "a non-empty string", path: bool = False
) -> Conv:
    """A string field; with `path`, a leading `~user` must name a user (it is expanded at submit)."""
    expected = f"a string matching {pattern}" if pattern else what
    expected += " or null" if nullable else ""

    def conv(value: Any, at: At) -> str | None:
        if value is None and nullable:
            return None
        result = as_text(value, at, expected)
        if not result or (pattern and not re.fullmatch(pattern, result)):
            raise at.fail(result, expected)
        if path and result.startswith("~"):
            try:
                Path(result).expanduser()
            except RuntimeError:  # "Could not determine home directory": no such user, or no HOME
                raise at.fail(result, f"{expected} whose ~ names a user with a home directory") from None
        return result

    return conv


def choice(options: Sequence[str], *, nullable: bool = False, strip: str = "") -> Conv:
    """One of `options` (case-insensitive when they are upper case); `strip` is an optional prefix."""
    expected = "one of " + ", ".join(options) + (" or null" if nullable else "")
    fold = all(o.isupper() for o in options)

    def conv(value: Any, at: At) -> str | None:
        if value is None and nullable:
            return None
        result = as_text(value, at, expected)
        key = result.upper() if fold else result
        key = key.removeprefix(strip) if strip else key
        if key not in options:
            raise at.fail(result, expected)
        return key

    setattr(conv, "choices", tuple(options))  # noqa: B010 - read by shell completion (overrides.key_choices)
    return conv


def job_name(value: Any, at: At) -> str:
    expected = f"a name matching {NAME_RE} (at most {NAME_MAX} characters, not only dots)"
    result = as_text(value, at, expected)
    # The name becomes a directory under run_dir: "." or ".." would climb out of it.
    if not re.fullmatch(NAME_RE, result) or len(result) > NAME_MAX or not result.strip("."):
        raise at.fail(result, expected)
    return result


def slurm_time(value: Any, at: At) -> str | None:
    if value is None:
        return None
    result = as_text(value, at, TIME_FORMATS)
    try:
        seconds = time_to_seconds(result)
    except ValueError:
        raise at.fail(result, TIME_FORMATS) from None
    if seconds == 0:  # Slurm reads a zero limit as "no limit": say so explicitly instead
        raise at.fail(result, f"{TIME_FORMATS}; a zero limit means no limit to Slurm, write UNLIMITED")
    return result


def text_list(*, lines: bool = False) -> Conv:
    """A list of scalars as strings; with `lines`, a single block string is split into lines too."""
    expected = "a list of strings" + (" or a block of lines" if lines else "")

    def conv(value: Any, at: At) -> tuple[str, ...]:
        if value is None:
            return ()
        if lines and isinstance(value, str):
            value = value.splitlines()
        if not isinstance(value, (list, tuple)):  # a tuple from Python callers (dataclasses.asdict)
            raise at.fail(value, expected, typed=True)
        return tuple(as_text(item, at.child(str(i)), "a string") for i, item in enumerate(value))

    return conv


def mapping_of(at: At, value: Any, expected: str) -> Mapping[Any, Any]:
    if value is None:
        return {}
    if not isinstance(value, Mapping):
        raise at.fail(value, expected, typed=True)
    return value


def env_vars(value: Any, at: At) -> tuple[tuple[str, str], ...]:
    out = []
    for key, item in mapping_of(at, value, f"a mapping of {ENV_NAME_RE} names to values").items():
        name = str(key)
        if not re.fullmatch(ENV_NAME_RE, name):
            raise at.child(name).fail(name, f"an environment variable name matching {ENV_NAME_RE}")
        out.append((name, as_text(item, at.child(name), "a scalar value (quote it; '' for empty)")))
    return tuple(out)


def env_names(value: Any, at: At) -> tuple[str, ...]:
    names: tuple[str, ...] = text_list()(value, at)
    for i, name in enumerate(names):
        if not re.fullmatch(ENV_NAME_RE, name):
            raise at.child(str(i)).fail(name, f"an environment variable name matching {ENV_NAME_RE}")
    return names


def trackers(value: Any, at: At) -> tuple[str, ...]:
    """`tracking`: the experiment trackers of ddpctl.run.tracking, a list (or one name), each at most once."""
    expected = "a list of " + ", ".join(TRACKERS)
    items: tuple[str, ...] = text_list()([value] if isinstance(value, str) else value, at)
    for index, item in enumerate(items):
        if item not in TRACKERS:
            raise at.child(str(index)).fail(item, "one of " + ", ".join(TRACKERS))
        if item in items[:index]:
            raise at.child(str(index)).fail(item, f"{expected}, each named once")
    return items


setattr(trackers, "choices", TRACKERS)  # noqa: B010 - read by shell completion (overrides.key_choices)
