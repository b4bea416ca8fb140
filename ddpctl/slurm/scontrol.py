"""Pure parsers of `scontrol show config`, `scontrol show partition -o` and `scontrol show node -o`.

Written for the spellings of Slurm 22.05 and 24.11 alike and tolerant of what differs between versions: keys are
looked up case-insensitively, `show config`'s sections ("Cgroup Support Configuration:", "MPI Plugins
Configuration:", ...) and status lines are skipped, a key's first value wins, and a one-line record's values may
hold spaces (a node's `OS=Linux 6.1 #1 SMP ...`) or `=` (`TRES=cpu=4,mem=8G`): a new key starts only at a word
followed by `=` after whitespace.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

_CONFIG_LINE = re.compile(r"^\s*([A-Za-z][A-Za-z0-9_]*)\s*=\s?(.*?)\s*$")
_RECORD_KEY = re.compile(r"(?:^|\s)([A-Za-z][A-Za-z0-9_]*)=")
_VERSION = re.compile(r"(\d+)\.(\d+)")


class Fields(dict[str, str]):
    """KEY=value pairs; `get` ignores the key's case (24.11 renamed some keys' capitals)."""

    def find(self, key: str) -> str | None:
        if key in self:
            return self[key]
        lowered = key.lower()
        return next((value for name, value in self.items() if name.lower() == lowered), None)


def parse_config(text: str) -> Fields:
    """`scontrol show config`: `Key = value` lines; the first occurrence of a key wins."""
    fields = Fields()
    for line in text.splitlines():
        match = _CONFIG_LINE.match(line)
        if match and match.group(1) not in fields:
            fields[match.group(1)] = match.group(2)
    return fields


def parse_record(line: str) -> Fields:
    """One line of `scontrol show partition -o` / `show node -o`."""
    fields = Fields()
    keys = list(_RECORD_KEY.finditer(line))
    for index, match in enumerate(keys):
        end = keys[index + 1].start() if index + 1 < len(keys) else len(line)
        fields.setdefault(match.group(1), line[match.end() : end].strip())
    return fields


def parse_records(text: str) -> list[Fields]:
    return [parse_record(line) for line in text.splitlines() if "=" in line]


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


@dataclass(frozen=True)
class PartitionInfo:
    name: str
    default: bool
    preempt_mode: str | None
    grace_s: int | None
    nodes: str  # hostlist expression


def partitions(text: str) -> list[PartitionInfo]:
    found = []
    for fields in parse_records(text):
        name = fields.find("PartitionName")
        if name:
            found.append(
                PartitionInfo(
                    name=name,
                    default=(fields.find("Default") or "").upper() == "YES",
                    preempt_mode=fields.find("PreemptMode"),
                    grace_s=seconds(fields.find("GraceTime")),
                    nodes=fields.find("Nodes") or "",
                )
            )
    return found


@dataclass(frozen=True)
class NodeInfo:
    name: str
    partitions: tuple[str, ...]
    gres: str  # as scontrol prints it, "(null)" for none
    gpus: int


def nodes(text: str) -> list[NodeInfo]:
    found = []
    for fields in parse_records(text):
        name = fields.find("NodeName")
        if name:
            gres = fields.find("Gres") or "(null)"
            parts = tuple(p for p in (fields.find("Partitions") or "").split(",") if p)
            found.append(NodeInfo(name=name, partitions=parts, gres=gres, gpus=gres_gpus(gres)))
    return found
