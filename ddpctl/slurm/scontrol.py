"""The one parser of scontrol's KEY=value output: `show config`, and the one-line records of `show partition -o`,
`show node -o` and `show job -o`.

Written for the spellings of Slurm 22.05 and 24.11 alike and tolerant of what differs between versions: keys are
looked up case-insensitively, `show config`'s sections ("Cgroup Support Configuration:", "MPI Plugins
Configuration:", ...) and status lines are skipped, a key's first value wins, and a one-line record's values may
hold spaces (a node's `OS=Linux 6.1 #1 SMP ...`) or `=` (`TRES=cpu=4,mem=8G`): a new key starts only at a word
followed by `=` after whitespace.
"""

from __future__ import annotations

import re
from typing import overload

_CONFIG_LINE = re.compile(r"^\s*([A-Za-z][A-Za-z0-9_]*)\s*=\s?(.*?)\s*$")
_RECORD_KEY = re.compile(r"(?:^|\s)([A-Za-z][A-Za-z0-9_/:]*)=")  # show job: CPUs/Task=, ReqB:S:C:T=
_VERSION = re.compile(r"(\d+)\.(\d+)")


class Fields(dict[str, str]):
    """KEY=value pairs; `find` and `get` ignore the key's case (24.11 renamed some keys' capitals)."""

    def find(self, key: str) -> str | None:
        if key in self:
            return self[key]
        lowered = key.lower()
        return next((value for name, value in self.items() if name.lower() == lowered), None)

    @overload  # type: ignore[override]
    def get(self, key: str, default: None = None) -> str | None: ...
    @overload
    def get(self, key: str, default: str) -> str: ...
    def get(self, key: str, default: str | None = None) -> str | None:
        found = self.find(key)
        return default if found is None else found


def parse_config(text: str) -> Fields:
    """`scontrol show config`: `Key = value` lines; the first occurrence of a key wins."""
    fields = Fields()
    for line in text.splitlines():
        match = _CONFIG_LINE.match(line)
        if match and match.group(1) not in fields:
            fields[match.group(1)] = match.group(2)
    return fields


def parse_line_fields(line: str) -> Fields:
    """One line of `scontrol show partition -o` / `show node -o`."""
    fields = Fields()
    keys = list(_RECORD_KEY.finditer(line))
    for index, match in enumerate(keys):
        end = keys[index + 1].start() if index + 1 < len(keys) else len(line)
        fields.setdefault(match.group(1), line[match.end() : end].strip())
    return fields


def parse_records(text: str) -> list[Fields]:
    return [parse_line_fields(line) for line in text.splitlines() if "=" in line]


def version(text: str | None) -> tuple[int, int] | None:
    """`22.05.8` -> (22, 5); None when there is no version to read."""
    match = _VERSION.search(text or "")
    return (int(match.group(1)), int(match.group(2))) if match else None


def seconds(text: str | None) -> int | None:
    """GraceTime and friends: plain seconds in 22.05 and 24.11 (`10`); None when absent or not a number."""
    text = (text or "").strip()
    return int(text) if text.isascii() and text.isdigit() else None


def gres_gpus(gres: str | None) -> int:
    """GPUs in a node's `Gres=`: `gpu:4`, `gpu:a100:2(S:0-1),gpu:t4:1`, `(null)` -> 4, 3, 0."""
    total = 0
    for item in re.split(r",(?![^()]*\))", gres or ""):
        parts = item.split("(")[0].strip().split(":")
        if parts[0] == "gpu" and len(parts) >= 2 and parts[-1].isdigit():
            total += int(parts[-1])
    return total
