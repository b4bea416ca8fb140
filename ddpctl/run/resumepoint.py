"""Where a script that keeps its own checkpoints resumes from: its checkpoint directory read with the spec's
preset or `checkpoint.pattern` (the choice itself is pure: ddpctl.spec.resume.latest)."""

from __future__ import annotations

import contextlib
import os
import stat
from dataclasses import dataclass
from pathlib import Path

from ddpctl import safeio
from ddpctl.spec import JobSpec
from ddpctl.spec.resume import (
    PRESETS,
    Entry,
    Latest,
    file_complete,
    latest,
    pattern_regex,
    rotated_away,
    scratch_evidence,
)

MAX_ENTRIES = 10_000  # a checkpoint directory is read at every attempt's start: bounded
TAIL_BYTES = (1 << 16) + 22  # a zip's end record with the longest comment


@dataclass(frozen=True)
class Rule:
    pattern: str
    marker: str | None
    by_step: bool
    args: tuple[str, ...]


def rule_of(spec: JobSpec) -> Rule | None:
    """How this spec's checkpoints are named (checkpoint.pattern over the preset's); None: ddpctl cannot tell."""
    preset = PRESETS.get(spec.resume.preset or "")
    pattern = spec.checkpoint.pattern or (preset.pattern if preset else None)
    if pattern is None:
        return None
    args = spec.resume.args if spec.resume.args is not None else (preset.args if preset else ())
    marker = preset.marker if preset and pattern == preset.pattern else None
    return Rule(pattern, marker, bool(preset and preset.by_step), args)


def _file_complete(path: str, size: int) -> bool:
    try:
        fd = safeio.open_read(path)
    except OSError:
        return False
    with os.fdopen(fd, "rb") as handle:
        head = handle.read(4)
        handle.seek(max(0, size - TAIL_BYTES))
        return file_complete(size, head, handle.read(TAIL_BYTES))


def _entry(item: os.DirEntry[str], marker: str | None) -> Entry | None:
    info = item.stat(follow_symlinks=False)
    if stat.S_ISDIR(info.st_mode):
        if marker is None:
            return Entry(item.name, True, info.st_mtime, True)
        try:
            inner = os.lstat(Path(item.path, marker))
        except OSError:
            return Entry(item.name, True, info.st_mtime, False)
        return Entry(item.name, True, inner.st_mtime, stat.S_ISREG(inner.st_mode))
    if stat.S_ISREG(info.st_mode):
        return Entry(item.name, False, info.st_mtime, _file_complete(item.path, info.st_size))
    return None  # a symlink or special file is never a checkpoint to resume from


def scan(directory: Path, rule: Rule) -> list[Entry]:
    """The entries `rule` names (not following links), among at most MAX_ENTRIES; a missing directory has none."""
    regex, found = pattern_regex(rule.pattern), []
    with contextlib.suppress(OSError), os.scandir(directory) as items:
        for count, item in enumerate(items):
            if count >= MAX_ENTRIES:
                break
            if item.name.startswith(".") or regex.fullmatch(item.name) is None:
                continue
            with contextlib.suppress(OSError):
                if (entry := _entry(item, rule.marker)) is not None:
                    found.append(entry)
    return found


def scratch_restart(spec: JobSpec, ckpt_dir: Path, step: int, since: float, until: float | None) -> Latest | None:
    """A checkpoint the attempt begun at `since` wrote of a step no later than `step` (ddpctl.spec.resume)."""
    rule = rule_of(spec)
    if rule is None:
        return None
    return scratch_evidence(scan(ckpt_dir, rule), rule.pattern, step, since, until)


def resume_point(spec: JobSpec, ckpt_dir: Path) -> Latest | None:
    """The newest complete checkpoint of the spec's kind in `ckpt_dir`, if ddpctl knows the kind and one exists."""
    rule = rule_of(spec)
    if rule is None:
        return None
    return latest(scan(ckpt_dir, rule), rule.pattern, by_step=rule.by_step)


def entries(spec: JobSpec, ckpt_dir: Path) -> tuple[Entry, ...]:
    """The checkpoints of the spec's kind in `ckpt_dir` now (none when ddpctl cannot tell the kind)."""
    rule = rule_of(spec)
    return tuple(scan(ckpt_dir, rule)) if rule is not None else ()


def rotation_loss(
    spec: JobSpec, ckpt_dir: Path, before: tuple[Entry, ...], since: float
) -> tuple[Latest, Latest] | None:
    """An earlier attempt's checkpoint, newer than all the attempt wrote, deleted during it (ddpctl.spec.resume)."""
    rule = rule_of(spec)
    if rule is None or not before:
        return None
    return rotated_away(before, scan(ckpt_dir, rule), rule.pattern, since)
