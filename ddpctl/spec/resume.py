"""Resuming scripts that keep their own checkpoints (spec `resume:`), as pure functions over literal inputs.

A trainer brought as it is (HF Trainer, Lightning, nanoGPT, the PyTorch DDP tutorial) resumes only when told on
its command line (`--resume_from_checkpoint PATH`, `--ckpt_path PATH`, `--init_from=resume`), and that argument
must be absent on the first start. A preset knows how its trainer names a checkpoint and when one is complete,
so a newest-but-half-written checkpoint is never the one named. The directory listing is I/O and lives in
`ddpctl.run.resumepoint`; the choice and the argument text are decided here.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass

LATEST, CKPT_DIR = "{latest}", "{ckpt_dir}"
PLACEHOLDER_RE = re.compile(r"(?<!\$)\{([^{}]*)\}")  # ${NAME} is a variable
ENV_REF_RE = re.compile(r"\$(?:\{([^}]*)\}|([A-Za-z_][A-Za-z0-9_]*)|(\$))")
STEP = "{step}"


@dataclass(frozen=True)
class Preset:
    """How one trainer names and completes its checkpoints, and what tells it to resume."""

    name: str
    pattern: str  # a checkpoint's name: glob-like, `{step}` = the step in digits, a trailing `/` = a directory
    args: tuple[str, ...]  # added to the script's args when a complete checkpoint exists
    marker: str | None = None  # a directory checkpoint is complete once this file is in it (written last)
    by_step: bool = False  # newest = highest step (else: newest modification time, the step breaking ties)


PRESETS: dict[str, Preset] = {
    # Trainer._save_checkpoint writes trainer_state.json after the weights, optimizer and RNG states.
    "hf-trainer": Preset(
        "hf-trainer", "checkpoint-{step}/", ("--resume_from_checkpoint", LATEST), "trainer_state.json", True
    ),
    # ModelCheckpoint names `epoch=E-step=S.ckpt` and `last.ckpt` (no step: the newest file wins).
    "lightning": Preset("lightning", "*.ckpt", ("--ckpt_path", LATEST)),
    "nanogpt": Preset("nanogpt", "ckpt.pt", ("--init_from=resume",)),
    # The PyTorch DDP tutorial loads snapshot.pt by itself when it exists: no argument needed.
    "torch-snapshot": Preset("torch-snapshot", "snapshot.pt", ()),
}


@dataclass(frozen=True)
class Entry:
    """One entry of the checkpoint directory, as `ddpctl.run.resumepoint` saw it."""

    name: str
    is_dir: bool
    mtime: float
    complete: bool  # a file: a whole torch.save archive; a directory: its preset's marker file is in it


@dataclass(frozen=True)
class Latest:
    name: str
    step: int | None
    mtime: float


def pattern_regex(pattern: str) -> re.Pattern[str]:
    """`checkpoint-{step}/` -> a regex over entry names with the step as group `step` (`*`, `?` as in globs)."""
    out = []
    for part in re.split(r"(\{step\}|\*|\?)", pattern.rstrip("/")):
        out.append({"{step}": r"(?P<step>[0-9]{1,18})", "*": r"[^/]*", "?": r"[^/]"}.get(part, re.escape(part)))
    return re.compile("".join(out))


def step_of(name: str, regex: re.Pattern[str]) -> int | None:
    """The step a matching name carries: `{step}`, else a Lightning-style `step=N` in the name."""
    match = regex.fullmatch(name)
    if match is None:
        return None
    if "step" in regex.groupindex:
        return int(match["step"])
    found = re.search(r"(?:^|[-_])step=([0-9]{1,18})", name)
    return int(found[1]) if found else None


def latest(entries: Iterable[Entry], pattern: str, *, by_step: bool = False) -> Latest | None:
    """The newest complete checkpoint among `entries` that `pattern` names (None: none is complete)."""
    regex, wants_dir = pattern_regex(pattern), pattern.endswith("/")
    best: tuple[tuple[float, float], Latest] | None = None
    for entry in entries:
        if entry.is_dir != wants_dir or not entry.complete or regex.fullmatch(entry.name) is None:
            continue
        step = step_of(entry.name, regex)
        rank = float(-1 if step is None else step)
        key = (rank, entry.mtime) if by_step else (entry.mtime, rank)
        if best is None or key > best[0]:
            best = (key, Latest(entry.name, step, entry.mtime))
    return None if best is None else best[1]


def scratch_evidence(
    entries: Iterable[Entry], pattern: str, step: int, since: float, until: float | None = None
) -> Latest | None:
    """A complete checkpoint written in [since, until) of a step no later than `step`, the newest one when the
    attempt began at `since`: proof that the attempt trained from scratch or an older checkpoint (the lowest)."""
    regex, wants_dir, best = pattern_regex(pattern), pattern.endswith("/"), None
    for entry in entries:
        if entry.is_dir != wants_dir or not entry.complete or entry.mtime < since:
            continue
        if until is not None and entry.mtime >= until:
            continue
        found = step_of(entry.name, regex)
        if found is not None and found <= step and (best is None or found < (best.step or 0)):
            best = Latest(entry.name, found, entry.mtime)
    return best


def placeholders(arg: str) -> list[str]:
    """The `{name}` placeholders of one resume argument."""
    return PLACEHOLDER_RE.findall(arg)


def resume_args(args: Iterable[str], latest_path: str, ckpt_dir: str) -> tuple[str, ...]:
    """The resume arguments with `{latest}` and `{ckpt_dir}` substituted (validated at submit: nothing else)."""
    return tuple(a.replace(LATEST, latest_path).replace(CKPT_DIR, ckpt_dir) for a in args)


def env_refs(arg: str) -> list[str]:
    """The variable names an argument refers to as `$NAME` or `${NAME}` (`$$` is a literal `$`)."""
    return [braced or bare for braced, bare, dollar in ENV_REF_RE.findall(arg) if not dollar]


def expand_env(arg: str, env: Mapping[str, str]) -> str:
    """`$NAME`/`${NAME}` replaced from `env` (checked at submit: every name is one the job sets); `$$` -> `$`."""

    def value(match: re.Match[str]) -> str:
        if match[3]:
            return "$"
        return env.get(match[1] or match[2] or "", match[0])

    return ENV_REF_RE.sub(value, arg)


def file_complete(size: int, head: bytes, tail: bytes) -> bool:
    """A torch.save archive (a zip, the default since torch 1.6) is whole once its end-of-central-directory
    record is written, last: `tail` is the file's last bytes (up to 64 KiB + 22, the record's comment bound).
    Another format (a legacy pickle, safetensors) cannot be told apart from a cut one: non-empty counts."""
    if size <= 0:
        return False
    if not head.startswith(b"PK\x03\x04"):
        return True
    at = tail.rfind(b"PK\x05\x06")
    return at >= 0 and len(tail) - at >= 22


def rotated_away(
    before: Iterable[Entry], after: Iterable[Entry], pattern: str, since: float
) -> tuple[Latest, Latest] | None:
    """The newest checkpoint of an earlier attempt (complete in `before`, the attempt's start) that is gone from
    `after` (its end) although it was newer than everything the attempt itself wrote since `since`: the script's
    rotation (`save_total_limit`, `save_top_k`) deleted it, and with it the further point to resume from. Returns
    (that checkpoint, the attempt's own newest); None when no such deletion happened."""
    regex, wants_dir = pattern_regex(pattern), pattern.endswith("/")
    present = {e.name for e in after}
    wrote = [
        Latest(e.name, step, e.mtime)
        for e in after
        if e.is_dir == wants_dir and e.complete and e.mtime >= since and (step := step_of(e.name, regex)) is not None
    ]
    if not wrote:
        return None
    own = max(wrote, key=lambda w: w.step or 0)
    gone = [
        Latest(e.name, step, e.mtime)
        for e in before
        if e.is_dir == wants_dir
        and e.complete
        and e.name not in present
        and (step := step_of(e.name, regex)) is not None
        and step > (own.step or 0)
    ]
    return (max(gone, key=lambda g: g.step or 0), own) if gone else None
