"""Checkpoints written relative to the working directory: every job of the spec shares them (issue 42).

A script that saves `snapshot.pt` (the PyTorch DDP tutorial) or `ckpt.pt` where it runs writes into the
directory `ddpctl submit` ran in, outside the run dir: the next, unrelated job of the spec "resumes" from the
first one's file. `submit` and `doctor` say so once, as a warning (a static look can be wrong, so it never
refuses), when the script's code names a checkpoint file without a directory and nothing points it at
`$DDPCTL_CKPT_DIR`, or when a checkpoint-like file is already there before the first attempt.
"""

from __future__ import annotations

import ast
import io
import os
import re
import tokenize
from pathlib import Path

from ddpctl.plan.stopscan import read_source
from ddpctl.spec import JobSpec
from ddpctl.spec.resume import PRESETS, pattern_regex

MAX_ENTRIES = 10_000  # bounded look at a directory
SUFFIXES = r"(?:pt|pth|ckpt|tar|bin|safetensors|pkl)"
# A checkpoint's file name as a script writes it: `snapshot.pt`, `ckpt.pt`, `checkpoint_3.pth`, `last.ckpt`.
FILE_NAME = re.compile(rf"[\w.=-]*(?:checkpoint|snapshot|ckpt)[\w.=-]*\.{SUFFIXES}|[\w.=-]+\.ckpt", re.IGNORECASE)
DIR_NAME = re.compile(r"checkpoint-[0-9]+")  # the HF Trainer's
# The script takes its checkpoint location from ddpctl: its own checkpoints then live in the run dir.
POINTED = re.compile(r"DDPCTL_CKPT_DIR|ddpctl\s*\.\s*runtime|from\s+ddpctl\s+import\s+runtime")


def relative_literals(source: str) -> list[str]:
    """The string literals of the code that are a checkpoint file name without a directory (`"snapshot.pt"`)."""
    found: list[str] = []
    try:
        for token in tokenize.generate_tokens(io.StringIO(source).readline):
            if token.type != tokenize.STRING:
                continue
            try:
                value = ast.literal_eval(token.string)
            except (ValueError, SyntaxError, MemoryError, RecursionError):
                continue
            if isinstance(value, str) and FILE_NAME.fullmatch(value.removeprefix("./")) and value not in found:
                found.append(value)
    except (tokenize.TokenError, SyntaxError, ValueError):
        return found
    return found


def pointed_at_ckpt_dir(spec: JobSpec, source: str) -> bool:
    """Whether the script's checkpoints are sent to `$DDPCTL_CKPT_DIR` (its args, env or code say so)."""
    return any(POINTED.search(text) for text in (*spec.args, *map(str, dict(spec.env).values()), source))


def stray_files(spec: JobSpec, directories: list[Path]) -> list[str]:
    """Checkpoint-like entries already in `directories` (the working directory, the script's), bounded."""
    pattern = spec.checkpoint.pattern or (PRESETS[spec.resume.preset].pattern if spec.resume.preset else None)
    own = pattern_regex(pattern) if pattern else None
    found: list[str] = []
    for directory in dict.fromkeys(d.resolve() for d in directories):
        try:
            with os.scandir(directory) as entries:
                for count, entry in enumerate(entries):
                    if count >= MAX_ENTRIES:
                        break
                    is_dir = entry.is_dir(follow_symlinks=False)
                    names = DIR_NAME if is_dir else FILE_NAME
                    if names.fullmatch(entry.name) or (own is not None and own.fullmatch(entry.name)):
                        found.append(entry.path + ("/" if is_dir else ""))
        except OSError:
            continue
    return sorted(found)[:3]


def check_relative(spec: JobSpec, workdir: Path) -> str | None:
    """One line when this spec's script keeps checkpoints where every job of the spec finds them; else None."""
    source = read_source(spec)
    if source is None or pointed_at_ckpt_dir(spec, source):
        return None
    there = stray_files(spec, [workdir, Path(spec.script).parent])
    if there:
        return (
            f"{', '.join(there)} exists before this job's first attempt, outside its run dir: the script may "
            "resume from another job's checkpoint; point it at $DDPCTL_CKPT_DIR in args"
        )
    literals = relative_literals(source)
    if literals:
        return (
            f"{spec.script} names the checkpoint {literals[0]!r} without a directory and nothing points it at "
            "$DDPCTL_CKPT_DIR: saved in the working directory, outside the run dir, another job of this spec will "
            "resume from it"
        )
    return None
